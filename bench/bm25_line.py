"""Benchmark: where the BM25 common-terms line should be at scale, on bench/scale.py's store.

A query term held by at least the line's number of memories does not select candidates: it adds
its score only where a rarer term matched (searchindex.lexical, after Elasticsearch's common terms
query). Today the line is COMMON_TERM_SHARE of the memories, and at least COMMON_TERM_MIN_DOCS:
1,000 at 100k, 10,000 at 1M, so at 1M a selecting term may bring ten times the candidates it
brings at 100k. This sweeps the line, given in memories, over bench/scale.py's cached store of
one size (run `bench/scale.py --sizes N --prepare` first) and, for every line, measures with
bench/scale.py's query mix, in `agent:main` and `agent:test-w`, the lines interleaved query by
query (their order turned from one query to the next):

- the PostgreSQL (and with --whoosh, whoosh) BM25 top 50, p50 / p95 ms;
- how much of the exhaustive top 50 (and top 10) each line keeps, by id and by score (the summed
  scores of its top 10 over the exhaustive top 10's), and the share of queries it changed: the
  exhaustive search is the same scoring with no line at all, every present term selecting;
- with --whoosh, PostgreSQL ~ whoosh top-50 overlap (|A ∩ B| / |A ∪ B|) under the line, as
  bench/scale.py reports it.

    .venv/bin/python bench/bm25_line.py --size 1000000 [--lines 10000,5000,3000,2000,1000] [--queries 100]
        [--whoosh]

Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = "postgres://postgres@127.0.0.1:5432"
EXHAUSTIVE = 10**12  # a line no term reaches: every present term selects
K = 50


def setup(size: int) -> None:
    """Point Django at bench/scale.py's store of this size before anything imports it."""
    os.environ["MEMORYUI_DATA_DIR"] = str(ROOT / "var" / "bench" / "scale" / str(size))
    os.environ["DATABASE_URL"] = f"{POSTGRES}/memoryui_scale_{size}"
    os.environ["MEMORYUI_LEXICAL"] = "postgres"
    os.environ.pop("CHROMA_URL", None)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import retrieval_latency  # noqa: F401  (sets Django up)


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[18] if len(samples) > 1 else samples[0]


def kept(found: list, exhaustive: list, k: int) -> float:
    want = {hit.id for hit in exhaustive[:k]}
    return len({hit.id for hit in found[:k]} & want) / len(want) if want else 1.0


def score_kept(found: list, exact: list, k: int) -> float:
    """The summed scores of the found top k over the exact top k's: near-ties of one template keep
    the score where they keep none of the ids."""
    want = sum(hit.score for hit in exact[:k])
    return sum(hit.score for hit in found[:k]) / want if want else 1.0


def sweep(args, name: str, values: list[int], apply, exact: int, shown) -> None:
    """Search bench/scale.py's query mix at each value of a knob (set by `apply`), the values
    interleaved query by query, and print a table of times, agreement with the `exact` value's
    hits, and (with --whoosh) PostgreSQL ~ whoosh overlap."""
    from latency_corpus import MAIN_SCOPE, SMALL_SCOPE, build_corpus, build_queries

    from searchindex.lexical import LexicalIndex
    from searchindex.lexical_postgres import PostgresLexicalIndex

    corpus = build_corpus(args.size, args.seed)
    queries = build_queries(corpus, args.queries, args.seed)
    del corpus
    engines = {"postgres": PostgresLexicalIndex()} | ({"whoosh": LexicalIndex()} if args.whoosh else {})
    if any(engine.count() != args.size for engine in engines.values()):
        raise SystemExit(f"no complete store of {args.size}: run bench/scale.py --sizes {args.size} --prepare first")
    times: dict[tuple, list[float]] = defaultdict(list)
    keeps: dict[tuple, list[float]] = defaultdict(list)
    agree: dict[tuple, list[float]] = defaultdict(list)
    for engine in engines.values():  # warm: statistics, caches, the segmenter
        engine.search(queries[0], scopes=[MAIN_SCOPE], k=K)
    for number, query in enumerate(queries):
        for label, scope in (("main", MAIN_SCOPE), ("small", SMALL_SCOPE)):
            found: dict[tuple, list] = {}
            for value in values if number % 2 == 0 else values[::-1]:
                apply(value)
                for engine_name, engine in engines.items() if number % 2 == 0 else reversed(engines.items()):
                    start = time.perf_counter()
                    found[engine_name, value] = engine.search(query, scopes=[scope], k=K)
                    times[engine_name, value, label].append((time.perf_counter() - start) * 1000)
            for value in values:
                for engine_name in engines:
                    hits, exact_hits = found[engine_name, value], found[engine_name, exact]
                    for k in (10, K):
                        keeps[engine_name, value, label, k].append(kept(hits, exact_hits, k))
                    keeps[engine_name, value, label, "score"].append(score_kept(hits, exact_hits, 10))
                    changed = [hit.id for hit in hits] != [hit.id for hit in exact_hits]
                    keeps[engine_name, value, label, "changed"].append(float(changed))
                if args.whoosh:
                    pg, wh = ({hit.id for hit in found[engine_name, value]} for engine_name in ("postgres", "whoosh"))
                    agree[value, label].append(len(pg & wh) / len(pg | wh) if pg | wh else 1.0)
        if (number + 1) % 20 == 0:
            print(f"  {number + 1}/{len(queries)}", file=sys.stderr)

    print(f"\n## BM25 {name}, {args.size} memories, {len(queries)} queries (ms)\n")
    head = ["scope", name] + [f"{engine_name} {q}" for engine_name in engines for q in ("p50", "p95")]
    head += [
        f"{engine_name}: queries changed, keeps of the exact top 10 / 50, score of the top 10"
        for engine_name in engines
    ]
    head += ["PostgreSQL ~ whoosh top 50"] if args.whoosh else []
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label in ("main", "small"):
        for value in values:
            cells = [label, shown(value)]
            for engine_name in engines:
                samples = times[engine_name, value, label]
                cells += [f"{statistics.median(samples):.1f}", f"{p95(samples):.1f}"]
            for engine_name in engines:
                measured = {key: statistics.mean(keeps[engine_name, value, label, key]) for key in ("changed", 10, K)}
                cells.append(
                    f"{measured['changed']:.2f}, {measured[10]:.3f} / {measured[K]:.3f}, "
                    f"{statistics.mean(keeps[engine_name, value, label, 'score']):.4f}"
                )
            if args.whoosh:
                cells.append(f"{statistics.mean(agree[value, label]):.3f}")
            print("| " + " | ".join(cells) + " |")
    for engine in engines.values():
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--lines", default="10000,5000,3000,2000,1000", help="lines to try, in memories")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--whoosh", action="store_true", help="whoosh as well (slow at 1M), with the overlap")
    args = parser.parse_args()
    setup(args.size)

    from searchindex import lexical

    def apply(line: int) -> None:
        lexical.COMMON_TERM_SHARE, lexical.COMMON_TERM_MIN_DOCS = 0.0, line

    lines = [int(line) for line in args.lines.split(",")] + [EXHAUSTIVE]
    sweep(
        args,
        "common-terms line (memories)",
        lines,
        apply,
        EXHAUSTIVE,
        lambda line: "exhaustive" if line == EXHAUSTIVE else f"{line:,}",
    )


if __name__ == "__main__":
    main()
