"""Hybrid search: what the list page, `/api/search/` and `manage.py search` answer with.

One query runs through the stages of docs/architecture.md "Read path: recall", step 1: the
query is embedded, the vector index and the BM25 index each return their top candidates within the
scopes (`retrieve`), the candidates' rows are loaded from the database, which is the source of
truth (an index entry whose memory is no longer active, or has moved out of the scopes, is
left out), the two lists are fused and reranked (searchindex.fusion), and the answerability
decision (searchindex.answerability) labels each candidate and says whether the query is answered
at all (`rank`). Ranking and answering are two decisions: with `floor=False` the ranking is
returned as it is.

Every answer explains itself: each result carries its vector rank, similarity and margin over
the anchor text, its BM25 rank, score and coverage, each retriever's contribution to the fused
score, each rerank adjustment, and its label with the reasons.

A hybrid search asks both indexes at once: the query's embedding and the vector search run in a
worker thread (neither touches the database) while this thread asks the BM25 index, so the two
cost the slower of them, not their sum. A query the ranking does not answer is judged again with
the exact similarity of the BM25 candidates outside the vector top k, read from their stored
vectors after the ranking (`check_outside_top_k`); an answered query never reads them.

When one index cannot answer (a chromadb server down, a corrupt whoosh directory) a hybrid
search answers from the other alone and says so in `degraded`; only when the requested
retrievers all fail does `search` raise IndexUnavailable.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connection
from django.utils import timezone

from memoryui import untrusted
from memoryui.models import Memory
from memoryui.reports import rounded
from searchindex.anchors import anchor_similarities, script_of
from searchindex.answerability import Answer, judge
from searchindex.defaults import active_defaults
from searchindex.documents import Hit, IndexUnavailable
from searchindex.embeddings import EmbedderUnavailable
from searchindex.fusion import Candidate, CandidateInfo, RetrievalSettings, clamp_limit, fuse, with_checked
from searchindex.indexes import get_index

RETRIEVERS = ("hybrid", "vector", "bm25")
# Longer queries are cut (and the answer says so): the embedder reads 512 tokens at most and a
# BM25 query of thousands of terms is a document, not a question.
MAX_QUERY_CHARS = 1000
NEAR_MISSES = 5
# How much of the ranking a search with the floor shows under the line (collapsed on the page).
BELOW_FLOOR_SHOWN = 10
# What a result shows and the rerank reads: the rest of a row (metadata JSON, TTL, access
# counts) is not loaded for each of the up to 100 candidates.
RESULT_FIELDS = (
    "id", "scope", "kind", "tier", "status", "text", "entity_key", "importance", "pinned", "source",
    "created_at", "updated_at",
)  # fmt: skip

_CANONICAL_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# One ASCII token of at least four characters holding a digit: 18600000000, JIRA-1234, a hash.
_IDENTIFIER_RE = re.compile(r"(?=\S*\d)[+#]?[A-Za-z0-9][A-Za-z0-9_.\-:/@#]{3,}")


# A query with no letter or digit (`!!`, `??`, an emoji) has nothing either retriever can match
# by: search and recall answer it alike, with nothing found and this reason, never a 400.
NO_WORDS = "the query holds no words to search for (no letter or digit)"


def has_words(text: str) -> bool:
    """Whether the query holds a letter or a digit, in any script: something to search for."""
    return any(char.isalnum() for char in text)


class SearchError(ValueError):
    """A search request that cannot run; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


class Found:
    """One candidate with its memory, as a result or a candidate under the floor line.

    A search's candidates hold their rows (`Rows`), and the Memory is made the first time it is
    read: a search ranks up to 100 candidates and most callers read a few of them.
    """

    __slots__ = ("_memory", "_rows", "candidate")

    def __init__(self, memory: Memory | None, candidate: Candidate, *, rows: Rows | None = None):
        if (memory is None) == (rows is None):
            raise ValueError("Found takes a memory or the rows holding it, not both")
        self._memory, self._rows, self.candidate = memory, rows, candidate

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            self._memory = self._rows[self.candidate.id]
        return self._memory

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
            "label": candidate.label,
            "reasons": list(candidate.reasons),
            "vector_rank": candidate.vector_rank,
            "vector_similarity": rounded(candidate.vector_score),
            "vector_anchor": rounded(candidate.anchor),
            "vector_margin": rounded(candidate.margin),
            "bm25_rank": candidate.bm25_rank,
            "bm25_score": rounded(candidate.bm25_score),
            "bm25_coverage": rounded(candidate.bm25_coverage),
            "fused": round(candidate.fused, 6),
            "contributions": {name: round(value, 6) for name, value in candidate.contributions.items()},
            "adjustments": {name: round(value, 6) for name, value in candidate.adjustments.items()},
        }


class Rows(Mapping[str, Memory]):
    """Active memories by id, loaded as values and each made a Memory the first time it is read.

    Making a model instance costs more than reading its row (Django's `Model.__init__`, for each
    of the up to 100 candidates of a search); the rerank reads a few fields of every candidate
    (`value`), the caller the memories of the few it shows.
    """

    def __init__(self, fields: tuple[str, ...], values: dict[str, tuple], db: str = DEFAULT_DB_ALIAS):
        """`fields` as `fields_in_model_order` gives them; `values`: each memory's values by id, in that order."""
        self.fields = fields
        self._db = db
        self._position = {name: n for n, name in enumerate(self.fields)}
        self._values = values
        self._made: dict[str, Memory] = {}

    @classmethod
    def of(cls, queryset, fields: tuple[str, ...]) -> Rows:
        """These fields of the queryset's memories, read through the ORM."""
        fields = fields_in_model_order(fields)
        values = {str(row[0]): row for row in queryset.order_by().values_list(*fields)}
        return cls(fields, values, queryset.db)

    @classmethod
    def active(cls, ids: Iterable[str], scopes: list[str] | None, fields: tuple[str, ...]) -> Rows:
        """These fields of the active memories among `ids`, within `scopes` (None: any scope).

        On PostgreSQL one statement with the ids as one array parameter, its timestamps read as
        ISO text: Django's loader of timestamptz is psycopg's pure-Python one, and parsing two per
        row cost about as much as the rest of a search's rows (95 rows of a 100k store: p50 4.13 ms
        through the ORM, 1.98 ms so). The values are the ORM's, converter for converter.
        """
        ids = _memory_ids(ids)
        if connection.vendor != "postgresql":
            queryset = Memory.objects.active().filter(pk__in=ids)
            return cls.of(queryset if scopes is None else queryset.filter(scope__in=scopes), fields)
        fields = fields_in_model_order(fields)
        sql, converting = _postgres_select(fields, scoped=scopes is not None)
        parameters: list = [ids, Memory.Status.ACTIVE] + ([list(scopes)] if scopes is not None else [])
        with connection.cursor() as cursor:
            cursor.execute(sql, parameters)
            rows = cursor.fetchall()
        if converting:
            changed = []
            for row in rows:
                row = list(row)
                for n, convert in converting:
                    row[n] = convert(row[n])
                changed.append(tuple(row))
            rows = changed
        return cls(fields, {str(row[0]): row for row in rows}, connection.alias)

    def value(self, pk: str, field: str):
        return self._values[pk][self._position[field]]

    def __getitem__(self, pk: str) -> Memory:
        memory = self._made.get(pk)
        if memory is None:
            memory = self._made[pk] = Memory.from_db(self._db, self.fields, self._values[pk])
        return memory

    def __contains__(self, pk: object) -> bool:
        return pk in self._values

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def fields_in_model_order(fields: tuple[str, ...]) -> tuple[str, ...]:
    """These fields and the id, in the model's order (Model.from_db takes the values so)."""
    wanted = {*fields, "id"}
    return tuple(f.attname for f in Memory._meta.concrete_fields if f.attname in wanted)


@functools.lru_cache(maxsize=16)
def _postgres_select(fields: tuple[str, ...], *, scoped: bool) -> tuple[str, tuple]:
    """`Rows.active`'s statement on PostgreSQL for these fields (in the model's order), with a scope
    condition when `scoped`, and the (position, converter) of each column read through one. Made
    once per set of fields, not per search."""
    model = {f.attname: f for f in Memory._meta.concrete_fields}
    quote = connection.ops.quote_name
    columns, converters = [], []
    for name in fields:
        column = f"m.{quote(model[name].column)}"
        if model[name].get_internal_type() == "DateTimeField":
            columns.append(f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')")
            converters.append(_utc_timestamp)
        else:
            columns.append(column)
            field_converters = model[name].get_db_converters(connection)
            converters.append(_converted(field_converters, model[name]) if field_converters else None)
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(Memory._meta.db_table)} m "
        f"WHERE m.{quote(model['id'].column)} = ANY(%s::uuid[]) AND m.{quote(model['status'].column)} = %s"
    )
    if scoped:
        sql += f" AND m.{quote(model['scope'].column)} = ANY(%s::text[])"
    return sql, tuple((n, convert) for n, convert in enumerate(converters) if convert is not None)


def _memory_ids(ids: Iterable[str]) -> list[str]:
    """The ids that can name a memory, once each: an index is derived data, and an entry under an
    id that is no UUID (written by hand, or by another program) names no memory rather than failing
    the search."""
    valid = []
    for pk in dict.fromkeys(ids):
        if _CANONICAL_UUID_RE.fullmatch(pk := str(pk)):  # what the indexes write: no parsing needed
            valid.append(pk)
            continue
        try:
            valid.append(str(uuid.UUID(pk)))
        except ValueError:
            continue
    return valid


def _utc_timestamp(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _converted(converters, model_field):
    """A value through the field's own converters, as the ORM applies them (JSONField's json.loads)."""

    def convert(value):
        for converter in converters:
            value = converter(value, model_field, connection)
        return value

    return convert


@dataclass
class Retrieval:
    """What the indexes answered for one query, before fusion: what calibration replays."""

    query: str
    vector_hits: list[Hit] = field(default_factory=list)
    bm25_hits: list[Hit] = field(default_factory=list)
    anchors: dict[str, float] = field(default_factory=dict)  # memory id → the query's anchor in its script
    infos: dict[str, CandidateInfo] = field(default_factory=dict)
    refused: str | None = None  # why vector similarity cannot count for this query at all
    # The exact similarity of BM25 candidates outside the vector top k (`check_outside_top_k`).
    checked: dict[str, float] = field(default_factory=dict)
    query_vector: object = None  # numpy array, when the query was embedded


@dataclass
class SearchResult:
    query: str
    scopes: list[str] | None
    retriever: str
    limit: int
    settings: RetrievalSettings
    floor: bool = True  # apply the answerability decision (False: the raw ranking)
    results: list[Found] = field(default_factory=list)
    below_floor: list[Found] = field(default_factory=list)  # ranked candidates under the line
    candidates: list[Found] = field(default_factory=list)  # every candidate, best first
    answer: Answer | None = None
    notices: list[str] = field(default_factory=list)
    degraded: dict[str, str] = field(default_factory=dict)  # index → why it did not answer
    timings_ms: dict[str, float] = field(default_factory=dict)
    vector_searched: dict[str, str] = field(default_factory=dict)  # scope → "exact" or "hnsw"

    @property
    def near_misses(self) -> list[Found]:
        return self.below_floor[:NEAR_MISSES]

    def to_dict(self) -> dict:
        s = self.settings
        return {
            "query": self.query,
            "scopes": self.scopes,
            "retriever": self.retriever,
            "limit": self.limit,
            "floor": self.floor,
            "answer": self.answer.to_dict() if self.answer else None,
            "results": [found.to_dict() for found in self.results],
            "below_floor": [found.to_dict() for found in self.below_floor],
            "fusion": {"function": s.fusion, "description": s.describe_fusion(), "weights": s.weights},
            "thresholds": {
                "strong_margin": s.strong_margin,
                "strong_coverage": s.strong_coverage,
                "agree_margin": s.agree_margin,
                "agree_coverage": s.agree_coverage,
                "weak_margin": s.weak_margin,
                "weak_coverage": s.weak_coverage,
            },
            "notices": self.notices,
            "degraded": self.degraded,
            "timings_ms": {stage: round(ms, 2) for stage, ms in self.timings_ms.items()},
            "vector_searched": self.vector_searched,
        }


def clean_query(query: str | None) -> tuple[str, list[str]]:
    """The query as searched, and what was changed about it; SearchError (naming `q`) when there is
    none: blank, or nothing visible (only zero-width or control characters, which the schema's
    pattern refuses too); or when it holds a NUL or a lone surrogate, which no index or page can hold.
    A visible query with no words (`has_words`) is a query: its answer says nothing was found."""
    if query is None or not str(query).strip():
        raise SearchError("q", "The query is empty: type some words, a name, a number or an id to search for.")
    query = str(query)
    if problem := untrusted.string_problem(query):
        raise SearchError("q", f"The query {problem}.")
    if not untrusted.is_visible(query):
        nothing = "nothing visible, only spaces, zero-width or control characters"
        raise SearchError("q", f"The query holds no words to search for: {nothing}.")
    text = " ".join(query.split())
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
    floor: bool = True,
    query_vector=None,
) -> SearchResult:
    """Search active memories of `scopes` (None: every scope) with one or both retrievers.

    The query is checked here (`clean_query`): callers pass it as they got it and answer the
    SearchError, which names the parameter at fault, in their own shape. `scopes=[]` searches
    nothing: the query is checked, and the answer says there is no scope to search.

    With `floor` the answerability decision applies: `results` are the strong and weak
    candidates of an answered query (none when it is not answered). Without it `results` are
    the first `limit` of the ranking, labelled all the same. `extra_fields` are loaded with the
    rows besides RESULT_FIELDS (recall reads `metadata`). `query_vector` is the query as the
    configured embedder's `embed_query` embeds it, for a caller that has it already (a benchmark
    timing the search alone): the query is then not embedded again.
    """
    text, notices = clean_query(query)
    if retriever not in RETRIEVERS:
        raise SearchError("retriever", f"unknown retriever {retriever!r}; use one of {', '.join(RETRIEVERS)}")
    settings = settings or RetrievalSettings.from_dict(active_defaults())
    if limit is None:
        limit = settings.limit
    limit, clamped = clamp_limit(limit)
    if clamped:
        notices.append(clamped)
    result = SearchResult(
        query=text, scopes=scopes, retriever=retriever, limit=limit, settings=settings, notices=notices, floor=floor
    )
    if scopes == []:
        result.answer = Answer(False, "no scope to search")
        return result
    if not has_words(text):
        result.answer = Answer(False, NO_WORDS)
        result.notices.append(f"nothing searched: {NO_WORDS}")
        return result
    retrieval, memories = retrieve(
        text, scopes, settings, retriever=retriever, into=result, extra_fields=extra_fields, query_vector=query_vector
    )
    now = now or timezone.now()
    with _timed(result.timings_ms, "fusion"):
        candidates, result.answer = rank(retrieval, settings, now)
    if not result.answer.answered and retrieval.query_vector is not None:
        check_outside_top_k(retrieval, scopes, result.timings_ms)
        if retrieval.checked:  # rank's second look, without redoing its first
            candidates, result.answer = _judged_again(candidates, retrieval, settings)
    result.candidates = [Found(None, c, rows=memories) for c in candidates]
    passing = [found for found in result.candidates if found.candidate.passes_floor] if result.answer.answered else []
    if floor:
        result.results = passing[:limit]
        shown = {id(found) for found in result.results}
        ranked = result.candidates[: max(limit, BELOW_FLOOR_SHOWN)]
        result.below_floor = [found for found in ranked if id(found) not in shown]
    else:
        result.results = result.candidates[:limit]
    return result


def rank(retrieval: Retrieval, settings: RetrievalSettings, now: datetime) -> tuple[list[Candidate], Answer]:
    """Fuse, rerank and judge one retrieval: the ranking, labelled, and the answerability decision.

    A query the ranked candidates do not answer is judged once more with the exact similarity of
    the BM25 candidates outside the vector top k (`retrieval.checked`), when they were read: an
    approximate index that missed a memory must not silence its answer.
    """
    candidates, answer = _judged(retrieval, settings, now)
    if answer.answered or not retrieval.checked:
        return candidates, answer
    return _judged_again(candidates, retrieval, settings)


def _judged(retrieval: Retrieval, settings: RetrievalSettings, now: datetime) -> tuple[list[Candidate], Answer]:
    candidates = fuse(
        retrieval.vector_hits, retrieval.bm25_hits, retrieval.infos, settings, now, anchors=retrieval.anchors
    )
    return judge(candidates, settings, refused=retrieval.refused)


def _judged_again(
    candidates: list[Candidate], retrieval: Retrieval, settings: RetrievalSettings
) -> tuple[list[Candidate], Answer]:
    """The fused candidates judged again with the similarity read outside the vector top k
    (`retrieval.checked`), which never moves a candidate: the ranking is not fused twice."""
    return judge(with_checked(candidates, retrieval.checked), settings, refused=retrieval.refused)


def check_outside_top_k(retrieval: Retrieval, scopes: list[str] | None, timings: dict | None = None) -> None:
    """Read the exact similarity of the BM25 candidates the vector index did not return.

    Only a query the ranking did not answer reads it, after the ranking: read beside the rows'
    load for every query, the read (a chromadb request, its vectors decoded in this process) cost
    the answered ones more than it saved the others (bench/scale.py at 100k: search() p50 21.5 →
    17.9 ms without it, with 5% of the queries unanswered)."""
    if retrieval.query_vector is None or retrieval.refused:
        return
    outside = [hit.id for hit in _outside_top_k(retrieval) if hit.id in retrieval.infos]
    if not outside:
        return
    try:
        with _timed(timings if timings is not None else {}, "vector_check"):
            retrieval.checked = get_index("vector").similarities(retrieval.query_vector, outside, scopes=scopes)
    except IndexUnavailable:
        retrieval.checked = {}


def _outside_top_k(retrieval: Retrieval) -> list[Hit]:
    in_top_k = {hit.id for hit in retrieval.vector_hits}
    return [hit for hit in retrieval.bm25_hits if hit.id not in in_top_k]


def retrieve(
    text: str,
    scopes: list[str] | None,
    settings: RetrievalSettings,
    *,
    retriever: str = "hybrid",
    into: SearchResult | None = None,
    extra_fields: tuple[str, ...] = (),
    query_vector=None,
) -> tuple[Retrieval, Rows]:
    """Ask the indexes, load the candidates' rows: the retrieval and the memories by id.

    Failures and timings go to `into` when given: one index down answers from the other, and
    IndexUnavailable is raised only when no requested index answers.
    """
    into = into or SearchResult(query=text, scopes=scopes, retriever=retriever, limit=1, settings=settings)
    retrieval = Retrieval(query=text, refused=_no_meaning(text))
    by_script: dict[str, float] = {}
    failures: dict[str, Exception] = {}
    vector_timings: dict[str, float] = {}
    asked: Future | None = None
    if retriever in ("hybrid", "vector"):
        arguments = (text, scopes, settings, vector_timings, into.vector_searched, query_vector)
        asked = _pool().submit(_vector_search, *arguments) if retriever == "hybrid" else _done(*arguments)
    if retriever in ("hybrid", "bm25"):
        try:
            with _timed(into.timings_ms, "bm25_search"):
                retrieval.bm25_hits = get_index("bm25").search(text, scopes=scopes, k=settings.bm25_k)
            if note := getattr(retrieval.bm25_hits, "note", None):
                into.notices.append(note)
        except IndexUnavailable as exc:
            failures["bm25"] = exc
    if asked is not None:
        try:
            retrieval.vector_hits, by_script, retrieval.query_vector = asked.result()
        except (IndexUnavailable, EmbedderUnavailable) as exc:
            failures["vector"] = exc
        into.timings_ms.update(vector_timings)
    if failures and len(failures) == (2 if retriever == "hybrid" else 1):
        first = next(iter(failures.values()))
        if isinstance(first, IndexUnavailable):
            raise first
        raise IndexUnavailable("vector", str(first))
    for name, exc in failures.items():
        other = "BM25" if name == "vector" else "vector"
        into.degraded[name] = str(exc)
        into.notices.append(f"{name} index unavailable, answered from {other} alone: {exc}")

    with _timed(into.timings_ms, "load_rows"):
        ids = {hit.id for hit in retrieval.vector_hits} | {hit.id for hit in retrieval.bm25_hits}
        memories = Rows.active(ids, scopes, (*RESULT_FIELDS, *extra_fields))
        value = memories.value
        retrieval.infos = {
            pk: CandidateInfo(
                tier=value(pk, "tier"),
                pinned=value(pk, "pinned"),
                importance=value(pk, "importance"),
                updated_at=value(pk, "updated_at"),
                created_at=value(pk, "created_at"),
            )
            for pk in memories
        }
        if by_script:
            retrieval.anchors = {pk: by_script[script_of(value(pk, "text"))] for pk in memories}
    return retrieval, memories


def _no_meaning(text: str) -> str | None:
    """Why a query cannot be matched by meaning, if it cannot: one character ("的", "の") is noise
    to an embedding model and would otherwise match whatever shares its script; an identifier
    with digits (a phone number, a ticket, a hash) is matched by its characters, and by meaning
    "18600000001" is as close to it as the number itself."""
    if len(text) == 1:
        return "a one-character query has no meaning to match"
    if _IDENTIFIER_RE.fullmatch(unicodedata.normalize("NFKC", text)):
        return "an identifier is matched by its characters, not by meaning"
    return None


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's threads for vector searches (a forked child starts its own: the parent's
    threads do not exist there)."""
    with _pools_lock:
        pool = _pools.get(os.getpid())
        if pool is None:
            pool = _pools[os.getpid()] = ThreadPoolExecutor(max_workers=8, thread_name_prefix="memoryui-vector")
        return pool


def _done(*arguments) -> Future:
    """`_vector_search` run in this thread, as a finished future (a vector-only search has nothing
    to run beside it)."""
    future: Future = Future()
    try:
        future.set_result(_vector_search(*arguments))
    except BaseException as exc:
        future.set_exception(exc)
    return future


def _vector_search(text, scopes, settings, timings, methods, vector=None) -> tuple[list[Hit], dict[str, float], object]:
    index = get_index("vector")
    try:
        with _timed(timings, "query_embedding"):
            embedder = index.embedder
            if vector is None:
                vector = embedder.embed_query(text)
            by_script = anchor_similarities(vector, embedder)
    except EmbedderUnavailable as exc:
        raise IndexUnavailable("vector", f"the embedder could not embed the query: {exc}") from exc
    with _timed(timings, "vector_search"):
        hits = index.search_vector(vector, scopes=scopes, k=settings.vector_k, methods=methods)
    return hits, by_script, vector


class _timed:
    def __init__(self, timings: dict[str, float], stage: str):
        self.timings, self.stage = timings, stage

    def __enter__(self):
        self.started = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.stage] = self.timings.get(self.stage, 0.0) + (time.perf_counter() - self.started) * 1000
