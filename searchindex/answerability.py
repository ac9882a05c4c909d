"""Answerability: whether a query is answered at all, and how far each result can be trusted.

Ranking (searchindex.fusion) orders the candidates; this module decides, apart from it, whether the
store answers the query. Every candidate gets a label with its reasons, from two signals:

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
from dataclasses import dataclass, field, replace

from memoryui.reports import Report
from searchindex.fusion import Candidate, RetrievalSettings

STRONG, WEAK, BELOW = "strong", "weak", "below_floor"


@dataclass(frozen=True)
class Answer(Report):
    """The decision for one query: answered or not, why, and the signals it read."""

    answered: bool
    reason: str
    signals: dict[str, float | int | str | None] = field(default_factory=dict)


def label(candidate: Candidate, settings: RetrievalSettings, *, refused: str | None = None) -> tuple[str, list[str]]:
    """A candidate's label and the reasons for it."""
    reasons: list[str] = []
    margin = candidate.margin
    if margin is not None and refused:
        reasons.append(f"vector similarity not counted: {refused}")
        margin = None
    elif margin is not None and candidate.vector_score is None:
        reasons.append(f"vector {margin:+.3f} over the anchor (outside the top k, read from its stored vector)")
    elif margin is not None:
        reasons.append(f"vector {margin:+.3f} over the anchor")
    else:
        reasons.append("no vector match")
    coverage = candidate.bm25_coverage
    if coverage is not None:
        reasons.append(f"BM25 covers {coverage:.0%} of the query")
    else:
        reasons.append("no BM25 match")
    m = -math.inf if margin is None else margin
    c = 0.0 if coverage is None else coverage
    if strong_evidence(m, c, settings):
        if m >= settings.strong_margin:
            reasons.append(f"strong: margin ≥ {settings.strong_margin:+.3f}")
        elif c >= settings.strong_coverage:
            reasons.append(f"strong: coverage ≥ {settings.strong_coverage:.0%}")
        else:
            reasons.append(
                f"strong: both retrievers agree (margin ≥ {settings.agree_margin:+.3f} "
                f"and coverage ≥ {settings.agree_coverage:.0%})"
            )
        return STRONG, reasons
    if m >= settings.weak_margin or c >= settings.weak_coverage:
        reasons.append(f"weak: margin < {settings.strong_margin:+.3f} and coverage < {settings.strong_coverage:.0%}")
        return WEAK, reasons
    reasons.append(f"below floor: margin < {settings.weak_margin:+.3f} and coverage < {settings.weak_coverage:.0%}")
    return BELOW, reasons


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
        labelled.append(replace(candidate, label=level, reasons=tuple(reasons)))
    return labelled, decide(labelled)


def decide(labelled: Iterable[Candidate]) -> Answer:
    """Answered when some candidate is strong; the signals of the best-evidenced one either way."""
    labelled = list(labelled)
    strong = [c for c in labelled if c.label == STRONG]
    signals = {
        "strong": len(strong),
        "weak": sum(c.label == WEAK for c in labelled),
        "best_margin": _round(max((c.margin for c in labelled if c.margin is not None), default=None)),
        "best_coverage": _round(max((c.bm25_coverage or 0.0 for c in labelled), default=None)),
    }
    if strong:
        return Answer(True, f"{len(strong)} strong match{'es' if len(strong) > 1 else ''}", signals)
    if not labelled:
        return Answer(False, "no candidate in either index", signals)
    weak = signals["weak"]
    why = f"no strong match ({weak} weak)" if weak else "no candidate clears the floor"
    return Answer(False, why, signals)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
