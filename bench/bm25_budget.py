"""Benchmark: the BM25 candidate budget at scale, on bench/scale.py's store.

A query's candidates are the memories holding one of its rarer terms (a query of only common terms:
its rarest); in a big store they may be thousands, and past the budget
(searchindex.lexical.CANDIDATE_BUDGET) the query ranks a narrowed set: the memories holding every
term, or those and a sample of the rest (`searchindex.lexical.narrowing`). This sweeps the
budget over bench/scale.py's cached store of one size (run `bench/scale.py --sizes N --prepare`
first) with bench/scale.py's query mix, in
`agent:main` and `agent:test-w`, the budgets interleaved query by query (their order turned from
one query to the next), and prints for each:

- the PostgreSQL (and with --whoosh, whoosh) BM25 top 50, p50 / p95 ms;
- the share of the queries it narrowed;
- how much of the exact top 10 and top 50 (no budget) it keeps, by id;
- the score it keeps: the summed scores of its top 10 over the exact top 10's. Where the exact top
  50 are near-ties of one template, another 10 of them keep the ids of none and the score of all;
- with --whoosh, PostgreSQL ~ whoosh top-50 overlap (|A ∩ B| / |A ∪ B|), as bench/scale.py
  reports it.

    .venv/bin/python bench/bm25_budget.py --size 1000000 [--budgets 2000,1500,1000] [--queries 100] [--whoosh]

Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bm25_line import setup, sweep  # noqa: E402

EXACT = 10**12  # a budget no query reaches: every candidate is ranked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--budgets", default="2000,1500,1000", help="budgets to try, in candidates")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--whoosh", action="store_true", help="whoosh as well (slow at 1M), with the overlap")
    args = parser.parse_args()
    setup(args.size)

    from searchindex import lexical

    def apply(budget: int) -> None:
        lexical.CANDIDATE_BUDGET = budget

    budgets = [EXACT] + [int(budget) for budget in args.budgets.split(",")]
    sweep(args, "candidate budget", budgets, apply, EXACT, lambda budget: "exact" if budget == EXACT else f"{budget:,}")


if __name__ == "__main__":
    main()
