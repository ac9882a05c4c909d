"""Benchmark: the BM25 candidate budget at scale, on bench/scale.py's store.

A query of only common terms is selected by its rarest term; in a big store that term may bring
thousands of candidates, and past the budget (searchindex.lexical.CANDIDATE_BUDGET) the query ranks
a narrowed set: the memories holding every term, or those and a sample of the rest
(`searchindex.lexical.narrowing`). This sweeps the budget over bench/scale.py's cached store of one
size (run `bench/scale.py --sizes N --prepare` first) with bench/scale.py's query mix, in
`agent:main` and `agent:test-w`, the budgets interleaved query by query (their order turned from
one query to the next), and prints for each:

- the PostgreSQL (and with --whoosh, whoosh) BM25 top 50, p50 / p95 ms;
- the share of the queries it narrowed;
- how much of the exact top 10 and top 50 (no budget) it keeps, by id;
- the score it keeps: the summed scores of its top 10 over the exact top 10's. Where the exact top
  50 are near-ties of one template, another 10 of them keep the ids of none and the score of all;
- with --whoosh, PostgreSQL ~ whoosh top-50 overlap (|A ∩ B| / |A ∪ B|), as bench/scale.py
  reports it.

    .venv/bin/python bench/bm25_budget.py --size 1000000 [--budgets 4000,2000,1000] [--queries 100] [--whoosh]

Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bm25_line import K, kept, p95, setup  # noqa: E402

EXACT = 10**12  # a budget no query reaches: every candidate is ranked


def score_kept(found: list, exact: list, k: int) -> float:
    want = sum(hit.score for hit in exact[:k])
    return sum(hit.score for hit in found[:k]) / want if want else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--budgets", default="4000,2000,1000", help="budgets to try, in candidates")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--whoosh", action="store_true", help="whoosh as well (slow at 1M), with the overlap")
    args = parser.parse_args()
    setup(args.size)

    from latency_corpus import MAIN_SCOPE, SMALL_SCOPE, build_corpus, build_queries

    from searchindex import lexical
    from searchindex.lexical import LexicalIndex
    from searchindex.lexical_postgres import PostgresLexicalIndex

    corpus = build_corpus(args.size, args.seed)
    queries = build_queries(corpus, args.queries, args.seed)
    del corpus
    engines = {"postgres": PostgresLexicalIndex()} | ({"whoosh": LexicalIndex()} if args.whoosh else {})
    if any(engine.count() != args.size for engine in engines.values()):
        raise SystemExit(f"no complete store of {args.size}: run bench/scale.py --sizes {args.size} --prepare first")
    budgets = [EXACT] + [int(budget) for budget in args.budgets.split(",")]
    times: dict[tuple, list[float]] = defaultdict(list)
    keeps: dict[tuple, list[float]] = defaultdict(list)
    agree: dict[tuple, list[float]] = defaultdict(list)
    narrowed: dict[tuple, list[bool]] = defaultdict(list)
    for engine in engines.values():  # warm: statistics, caches, the segmenter
        engine.search(queries[0], scopes=[MAIN_SCOPE], k=K)
    for number, query in enumerate(queries):
        for label, scope in (("main", MAIN_SCOPE), ("small", SMALL_SCOPE)):
            found: dict[tuple, list] = {}
            order = budgets if number % 2 == 0 else budgets[::-1]
            for budget in order:
                lexical.CANDIDATE_BUDGET = budget
                for name, engine in engines.items() if number % 2 == 0 else reversed(engines.items()):
                    start = time.perf_counter()
                    found[name, budget] = engine.search(query, scopes=[scope], k=K)
                    times[name, budget, label].append((time.perf_counter() - start) * 1000)
            for budget in budgets:
                for name in engines:
                    for k in (10, K):
                        keeps[name, budget, label, k].append(kept(found[name, budget], found[name, EXACT], k))
                    keeps[name, budget, label, "score"].append(score_kept(found[name, budget], found[name, EXACT], 10))
                    ids = [hit.id for hit in found[name, budget]]
                    narrowed[name, budget, label].append(ids != [hit.id for hit in found[name, EXACT]])
                if args.whoosh:
                    pg, wh = ({hit.id for hit in found[name, budget]} for name in ("postgres", "whoosh"))
                    agree[budget, label].append(len(pg & wh) / len(pg | wh) if pg | wh else 1.0)
        if (number + 1) % 20 == 0:
            print(f"  {number + 1}/{len(queries)}", file=sys.stderr)

    print(f"\n## BM25 candidate budget, {args.size} memories, {len(queries)} queries (ms)\n")
    head = ["scope", "budget (candidates)"] + [f"{name} {q}" for name in engines for q in ("p50", "p95")]
    head += [f"{name}: queries changed, keeps of the exact top 10 / 50, score of the top 10" for name in engines]
    head += ["PostgreSQL ~ whoosh top 50"] if args.whoosh else []
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label in ("main", "small"):
        for budget in budgets:
            cells = [label, "exact" if budget == EXACT else f"{budget:,}"]
            for name in engines:
                samples = times[name, budget, label]
                cells += [f"{statistics.median(samples):.1f}", f"{p95(samples):.1f}"]
            for name in engines:
                cells.append(
                    f"{statistics.mean(narrowed[name, budget, label]):.2f}, "
                    f"{statistics.mean(keeps[name, budget, label, 10]):.3f} / "
                    f"{statistics.mean(keeps[name, budget, label, K]):.3f}, "
                    f"{statistics.mean(keeps[name, budget, label, 'score']):.4f}"
                )
            if args.whoosh:
                cells.append(f"{statistics.mean(agree[budget, label]):.3f}")
            print("| " + " | ".join(cells) + " |")
    for engine in engines.values():
        engine.close()


if __name__ == "__main__":
    main()
