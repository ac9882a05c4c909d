"""Benchmark: how many candidates the vector search should ask each chromadb collection for.

`VectorIndex.search_vector` asks each scope's collection for `max(k, CANDIDATES)` neighbours and
keeps the best k. chromadb's HNSW search explores `ef = max(ef_search, n_results)` nodes, so a
bigger request is a wider search; the distances it returns are exact, so cutting the list to k
keeps the best of what was found. This measures what that buys in recall and costs in time, for a
few HNSW graphs (max_neighbors M, ef_construction, ef_search), against numpy brute force.

The vectors are clustered like sentence embeddings of one agent's memories, not uniform noise
(uniform vectors make every method look bad and every difference look big): a few cluster
centres, "base" vectors close to them (a quarter as many as the stored ones), and the stored
vectors close variants of the bases, each renormalised to unit length. Queries are variants of
bases too, so each has a few near-duplicates and a crowd of look-alikes around it. The default
is 3 clusters: with a few dozen, a cluster of this size holds too few look-alikes for any graph
to miss (recall@10 0.995 with chromadb's defaults at 60k vectors in 24 clusters), while the
scope that lost recall at 1M memories (bench/scale.py) holds 400k.

Each graph is built once (embedded chromadb in a temporary directory, configured as
`VectorIndex` configures a scope's collection) and queried one query at a time with each
candidate count. Brute force (a float32 matrix product and argpartition) runs in the same
process on the same queries, as the baseline. Prints one markdown table: setting, build seconds,
p50 and p95 ms per query, recall@10 and recall@50 against brute force; never asserts a time.

    .venv/bin/python bench/vector_candidates.py [--vectors 40000] [--centres 3] [--queries 200]
        [--graphs 16/100/100,16/100/200,32/200/200] [--candidates 10,50,100,200,400]

Building is the slow part (~4 minutes for 40k vectors with M=16, ~9 with M=32, on two busy
cores).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

BATCH = 5000  # vectors per chromadb add (below its maximum batch size)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def clustered(rng, *, count: int, dim: int, centres: int, bases: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` stored vectors and the bases they vary, clustered around `centres` directions.

    Spreads chosen so that, as with e5 embeddings, neighbours are close (cosine ~0.95 to their
    base) and unrelated vectors of one cluster still look alike (~0.75): a crowd of look-alikes
    that a graph search must get through.
    """
    middle = unit(rng.standard_normal((centres, dim)))
    base = unit(middle[rng.integers(0, centres, bases)] + 0.029 * rng.standard_normal((bases, dim)))
    stored = unit(base[rng.integers(0, bases, count)] + 0.017 * rng.standard_normal((count, dim)))
    return stored, base


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def brute_force(stored: np.ndarray, queries: np.ndarray, depth: int) -> tuple[np.ndarray, list[float]]:
    """The exact top `depth` ids of each query, and the ms each query took."""
    truth, times = [], []
    for query in queries:
        start = time.perf_counter()
        scores = stored @ query
        top = np.argpartition(-scores, depth)[:depth]
        top = top[np.argsort(-scores[top])]
        times.append((time.perf_counter() - start) * 1000)
        truth.append(top)
    return np.array(truth), times


def build(client, name: str, stored: np.ndarray, m: int, ef_construction: int, ef_search: int):
    collection = client.create_collection(
        name,
        configuration={
            "hnsw": {
                "space": "cosine",
                "max_neighbors": m,
                "ef_construction": ef_construction,
                "ef_search": ef_search,
            }
        },
        embedding_function=None,
    )
    for start in range(0, len(stored), BATCH):
        collection.add(
            ids=[str(n) for n in range(start, min(start + BATCH, len(stored)))],
            embeddings=stored[start : start + BATCH],
        )
    return collection


def measure(collection, queries: np.ndarray, truth: np.ndarray, candidates: int, k: int) -> dict:
    """Per-query ms for the top k asked as max(k, candidates), and recall@k and @50 against `truth`."""
    times, found_k, found_50 = [], 0, 0
    for query, exact in zip(queries, truth, strict=True):
        start = time.perf_counter()
        result = collection.query(query_embeddings=[query], n_results=max(k, candidates), include=["distances"])
        ranked = sorted(zip(result["distances"][0], result["ids"][0], strict=True))[:k]
        times.append((time.perf_counter() - start) * 1000)
        found_k += len({int(pk) for _, pk in ranked} & set(exact[:k].tolist()))
        wide = collection.query(query_embeddings=[query], n_results=max(50, candidates), include=["distances"])
        ranked_50 = sorted(zip(wide["distances"][0], wide["ids"][0], strict=True))[:50]
        found_50 += len({int(pk) for _, pk in ranked_50} & set(exact[:50].tolist()))
    return {
        "p50": statistics.median(times),
        "p95": percentile(times, 0.95),
        "recall_k": found_k / (k * len(queries)),
        "recall_50": found_50 / (50 * len(queries)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vectors", type=int, default=40_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=3)
    parser.add_argument("--bases", type=int, default=0, help="default: a quarter of --vectors")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--graphs", default="16/100/100,16/100/200,32/200/200", help="M/ef_construction/ef_search,...")
    parser.add_argument("--candidates", default="10,50,100,200,400", help="candidate counts asked of chromadb")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    args.bases = args.bases or max(1, args.vectors // 4)
    stored, base = clustered(rng, count=args.vectors, dim=args.dim, centres=args.centres, bases=args.bases)
    queries = unit(
        base[rng.integers(0, len(base), args.queries)] + 0.017 * rng.standard_normal((args.queries, args.dim))
    )
    depth = max(50, args.k)
    truth, floor_times = brute_force(stored, queries, depth)
    graphs = [tuple(int(part) for part in graph.split("/")) for graph in args.graphs.split(",")]
    counts = [int(count) for count in args.candidates.split(",")]

    print(
        f"{args.vectors:,} vectors, {args.dim} dims, {args.centres} clusters, {args.bases:,} bases; "
        f"{args.queries} queries one at a time; k={args.k}\n"
    )
    print("| setting | build s | p50 ms | p95 ms | recall@10 | recall@50 |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| numpy brute force (baseline) | – | {statistics.median(floor_times):.2f} | "
        f"{percentile(floor_times, 0.95):.2f} | 1.000 | 1.000 |"
    )
    with tempfile.TemporaryDirectory(prefix="memoryui-vector-candidates-") as path:
        client = chromadb.PersistentClient(path=path, settings=ChromaSettings(anonymized_telemetry=False))
        for m, ef_construction, ef_search in graphs:
            start = time.perf_counter()
            collection = build(
                client, f"bench-{m}-{ef_construction}-{ef_search}", stored, m, ef_construction, ef_search
            )
            built = time.perf_counter() - start
            for candidates in counts:
                row = measure(collection, queries, truth, candidates, args.k)
                print(
                    f"| M={m} ef_construction={ef_construction} ef_search={ef_search}, "
                    f"candidates={max(args.k, candidates)} | {built:.1f} | {row['p50']:.2f} | {row['p95']:.2f} | "
                    f"{row['recall_k']:.3f} | {row['recall_50']:.3f} |",
                    flush=True,
                )
            client.delete_collection(collection.name)


if __name__ == "__main__":
    main()
