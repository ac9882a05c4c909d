"""How many memories the recall block hands over: as many as the evidence supports, never a quota.

The heuristic ranks the candidates that cleared the relevance floor; this module decides which of
them go into the block (docs/architecture.md "Read path: recall", step 4). The limit is a
ceiling: the first candidate goes in (the query is answered, so it is a strong or weak match), and
each next one only when the evidence says it belongs there too:

- `cut`: its score is at least this share of the best candidate's ("12% of the best score; the
  cut is 70%"). The score compared is the heuristic's evidence (retrieval and text coverage,
  recall.heuristic.Scored.evidence), not its ranking bonuses. Measured on the labelled sets, a
  memory far below the best is almost never one the question needs;
- `weak_cut`: a *weak* match (answerability's label: some evidence, not enough to answer on its
  own) needs this share instead, by default as much as the best: weak matches pad a block;
- `gap`: a drop of at least this share of the best score from the candidate before it ends the
  block, whatever comes after (off at 1);
- `redundancy`: a memory whose stored vector is at least this similar (cosine) to one already
  in the block says the same thing, and only the better one is handed over ("says the same as
  #1"). Two memories saying the same thing count once.

Pinned and core memories get no free pass: the rerank's small tier and pin bonuses are already in
the scores compared here, and nothing else.

Plain values in, plain values out: each decision is a code with its numbers (`Placement`), and
its words are made from them (`words`: a reason of memoryui.reasons, `block_<code>`) where they are
shown. The pipeline, calibration and the benchmarks run the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memoryui.reasons import CODES as REASON_CODES
from memoryui.reasons import Reason
from memoryui.reports import Report

# Decision codes.
BEST = "best"  # the best-scored candidate: it always leads the block
CLOSE = "close"  # within the cut of the best
BELOW_CUT = "below_cut"  # too far below the best
WEAK = "weak"  # a weak match below the weak cut
GAP = "gap"  # after a drop in scores that ends the block
SAME_AS = "same_as"  # says the same as a memory already in the block
PAST_LIMIT = "past_limit"  # the block is full
KEPT = frozenset({BEST, CLOSE})
CODES = (BEST, CLOSE, BELOW_CUT, WEAK, GAP, SAME_AS, PAST_LIMIT)


@dataclass(frozen=True)
class BlockKnobs:
    cut: float = 0.7
    weak_cut: float = 1.0
    gap: float = 1.0
    redundancy: float = 0.97


@dataclass(frozen=True)
class Entry:
    """One ranked candidate as the block sizing sees it."""

    id: str
    score: float  # the evidence it is compared on (recall.heuristic.Scored.evidence)
    label: str = "strong"  # answerability's: strong or weak


@dataclass(frozen=True)
class Placement(Report):
    """Whether one candidate is in the block, and why, as a code with its numbers."""

    id: str
    position: int  # its rank among the candidates placed (1: the best)
    code: str
    share: float = field(metadata={"convert": lambda value: round(value, 4)})  # its score over the best one's
    params: dict = field(default_factory=dict)

    report_properties = ("kept", "reason")

    @property
    def kept(self) -> bool:
        return self.code in KEPT

    @property
    def reason(self) -> Reason:
        return words(self.code, self.share, self.params)


def size_block(
    ranked: Sequence[Entry],
    limit: int,
    knobs: BlockKnobs,
    similarity: Callable[[str, str], float | None] | None = None,
) -> list[Placement]:
    """Place every ranked candidate (best first) in the block or out of it, with the reason.

    `similarity(a, b)` gives the cosine similarity of two candidates' stored vectors, or None when
    it is not known; without it no candidate is dropped as redundant.
    """
    if not ranked:
        return []
    best = max(entry.score for entry in ranked)
    placements: list[Placement] = []
    kept: list[tuple[int, Entry]] = []
    ended: dict | None = None
    previous = ranked[0].score
    for position, entry in enumerate(ranked, 1):
        share = entry.score / best if best > 0 else (1.0 if entry.score >= best else 0.0)
        drop = (previous - entry.score) / best if best > 0 else 0.0
        previous = entry.score
        if position == 1:
            placement = Placement(entry.id, position, BEST, share)
        elif ended is not None:
            placement = Placement(entry.id, position, GAP, share, ended)
        elif knobs.gap < 1.0 and drop >= knobs.gap:
            ended = {"after": position - 1, "drop": round(drop, 4), "gap": knobs.gap}
            placement = Placement(entry.id, position, GAP, share, ended)
        elif entry.label != "strong" and share < knobs.weak_cut:
            placement = Placement(entry.id, position, WEAK, share, {"cut": knobs.weak_cut})
        elif share < knobs.cut:
            placement = Placement(entry.id, position, BELOW_CUT, share, {"cut": knobs.cut})
        else:
            placement = Placement(entry.id, position, CLOSE, share, {"cut": knobs.cut})
        if placement.kept:
            twin = _twin(entry, kept, knobs.redundancy, similarity)
            if twin is not None:
                placement = Placement(entry.id, position, SAME_AS, share, twin)
            elif len(kept) >= limit:
                placement = Placement(entry.id, position, PAST_LIMIT, share, {"limit": limit})
        if placement.kept:
            kept.append((position, entry))
        placements.append(placement)
    return placements


def _twin(entry: Entry, kept, threshold: float, similarity) -> dict | None:
    """The block member `entry` says the same as, if any: {"position", "similarity", "threshold"}."""
    if similarity is None or threshold > 1.0:
        return None
    for position, other in kept:
        value = similarity(entry.id, other.id)
        if value is not None and value >= threshold:
            return {"position": position, "similarity": round(value, 4), "threshold": threshold}
    return None


def words(code: str, share: float, params: dict) -> Reason:
    """A placement as a reason (`block_<code>`), in words as the playground, the API and the command
    line show it."""
    reason = f"block_{code}"
    if reason not in REASON_CODES:
        return Reason("free_text", text=code)
    values = {"share": share, **params}
    return Reason(reason, **{name: values[name] for name in REASON_CODES[reason].fields})
