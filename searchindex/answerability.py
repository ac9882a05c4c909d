"""Answerability: whether a query is answered at all, and how far each result can be trusted.

Ranking (searchindex.fusion) orders the candidates; this module decides, apart from it, whether the
store answers the query. Every candidate gets a label with its reasons (codes with their parameters,
memoryui.reasons), from two signals:

- its *margin*: vector similarity minus the query's similarity to unrelated everyday text in
  the memory's own script (the anchor, searchindex.anchors.ANCHORS);
- its *coverage*: the share of the query's terms it holds, weighted by their rarity (BM25).

Labels:

- `strong`: `strong_margin` or `strong_coverage` alone, or both retrievers agreeing: a margin of
  `agree_margin` together with a coverage of `agree_coverage`;
- `weak`: some evidence, `weak_margin` or `weak_coverage`;
- `below_floor`: neither.

The query is answered when one candidate is strong; the answer is then the strong and weak
candidates, in ranked order. Otherwise it is silent: recall gives nothing, search shows the
ranking under the floor line.

Why these signals. The anchor does not depend on the store: in a focused store, where every
memory is about the same person, the scope's own top hits all look alike, and a bar raised by
them (the scope background of earlier versions) silenced answerable questions. Coverage is what
exact tokens, names and rare words give, whatever the embedder thinks; and a memory that both
shares words with the query and stands above the anchor by meaning is evidence neither signal
gives alone. What neither can tell is a question about a detail the store never states of a
person it knows well ("what breed is Daniel's cat" when only the cat's name is stored): its
best candidates look like an answer's. bench/data/README.md has the measured trade-off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memoryui.reasons import Reason
from memoryui.reports import Report, rounded
from searchindex.fusion import Candidate, RetrievalSettings

STRONG, WEAK, BELOW = "strong", "weak", "below_floor"


@dataclass(frozen=True)
class Answer(Report):
    """The decision for one query: answered or not, why, and the signals it read."""

    answered: bool
    reason: str  # a Reason (memoryui.reasons)
    signals: dict[str, float | int | str | None] = field(default_factory=dict)


def label(candidate: Candidate, settings: RetrievalSettings, *, refused: str | None = None) -> tuple[str, list[Reason]]:
    """A candidate's label and the reasons for it."""
    reasons: list[Reason] = []
    margin = candidate.margin
    if margin is not None and refused:
        reasons.append(Reason("vector_not_counted", refused=refused))
        margin = None
    elif margin is not None and candidate.vector_score is None:
        reasons.append(Reason("vector_margin_checked", margin=margin))
    elif margin is not None:
        reasons.append(Reason("vector_margin", margin=margin))
    else:
        reasons.append(_fixed("no_vector_match"))
    coverage = candidate.bm25_coverage
    if coverage is not None:
        reasons.append(Reason("bm25_coverage", coverage=coverage))
    else:
        reasons.append(_fixed("no_bm25_match"))
    m = -math.inf if margin is None else margin
    c = 0.0 if coverage is None else coverage
    if strong_evidence(m, c, settings):
        if m >= settings.strong_margin:
            reasons.append(_fixed("strong_margin", strong_margin=settings.strong_margin))
        elif c >= settings.strong_coverage:
            reasons.append(_fixed("strong_coverage", strong_coverage=settings.strong_coverage))
        else:
            reasons.append(
                _fixed("strong_agreement", agree_margin=settings.agree_margin, agree_coverage=settings.agree_coverage)
            )
        return STRONG, reasons
    if m >= settings.weak_margin or c >= settings.weak_coverage:
        reasons.append(_fixed("weak", strong_margin=settings.strong_margin, strong_coverage=settings.strong_coverage))
        return WEAK, reasons
    reasons.append(_fixed("below_floor", weak_margin=settings.weak_margin, weak_coverage=settings.weak_coverage))
    return BELOW, reasons


def _fixed(code: str, **params) -> Reason:
    """A reason whose parameters are the settings' (the same for every candidate of a query), made
    once: a Reason is immutable, and making its words for each of 100 candidates cost more than
    the rest of their labelling."""
    return _made(code, tuple(params.items()))


@lru_cache(maxsize=256)
def _made(code: str, params: tuple) -> Reason:
    return Reason(code, **dict(params))


def strong_evidence(margin, coverage, settings: RetrievalSettings):
    """The rule for `strong`, on floats or on numpy arrays of margins and coverages alike (calibration
    replays it over whole query sets): either signal alone, or both agreeing."""
    return (
        (margin >= settings.strong_margin)
        | (coverage >= settings.strong_coverage)
        | ((margin >= settings.agree_margin) & (coverage >= settings.agree_coverage))
    )


def judge(
    candidates: Sequence[Candidate], settings: RetrievalSettings, *, refused: str | None = None
) -> tuple[list[Candidate], Answer]:
    """Label every candidate and decide whether the query is answered."""
    labelled = []
    for candidate in candidates:
        level, reasons = label(candidate, settings, refused=refused)
        labelled.append(candidate.labelled(level, tuple(reasons)))
    return labelled, decide(labelled)


def decide(labelled: Iterable[Candidate]) -> Answer:
    """Answered when some candidate is strong; the signals of the best-evidenced one either way."""
    labelled = list(labelled)
    strong = [c for c in labelled if c.label == STRONG]
    signals = {
        "strong": len(strong),
        "weak": sum(c.label == WEAK for c in labelled),
        "best_margin": rounded(max((c.margin for c in labelled if c.margin is not None), default=None)),
        "best_coverage": rounded(max((c.bm25_coverage or 0.0 for c in labelled), default=None)),
    }
    if strong:
        why = Reason("strong_matches", n=len(strong)) if len(strong) > 1 else Reason("one_strong_match")
        return Answer(True, why, signals)
    if not labelled:
        return Answer(False, Reason("no_candidates"), signals)
    weak = signals["weak"]
    why = Reason("no_strong_match", weak=weak) if weak else Reason("none_clears_floor")
    return Answer(False, why, signals)
