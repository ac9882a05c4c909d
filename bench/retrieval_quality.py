"""Benchmark: retrieval quality of vector, BM25 and hybrid search on every labelled set, side by side.

The labelled sets (bench/data/README.md):

- `retrieval`: retrieval_set.json, one agent's store of short, varied memories (en/zh/ja/ko);
- `multilingual`: multilingual_set.json, two small stores of short memories in five languages;
- `conversation`: conversation_set.json, five multi-session chats between two people, stored
  as the third-person observations an extractor keeps, with session dates.

Each set lives in a store of its own (var/bench/retrieval/<set>/, written through the write
path, indexed with the configured embedder, cached until the set or the embedder changes), so
one set's words never change another's BM25 statistics. A child process per set runs every
query through `searchindex.search.retrieve` once and hands back the raw retrieval (cached in
collected.json until the set or the retrieval code changes); the parent re-ranks and re-judges
it (`searchindex.search.rank`) for each retriever and each setting, so a knob is tried in seconds.

Printed for each set and retriever (vector, BM25, hybrid), for the ranking alone and with the
answerability decision applied:

- recall@5: relevant memories among the first five, over min(5, number relevant), averaged
  over the answerable queries;
- evidence recall@10: relevant memories among the first ten over the number relevant;
- top-1 and MRR over the answerable queries;
- silent: the share of answerable queries answered with nothing;
- no-result precision / recall: of the queries answered with nothing, the share that has no
  answer; of the queries with no answer, the share answered with nothing.

Hybrid with the decision is then broken down by query type, and `recall (heuristic)` scores
what an agent is given: every query through `recall.pipeline.recall` without a model selector.

    .venv/bin/python bench/retrieval_quality.py [--sets retrieval,conversation] [--json]
        [--settings JSON] [--sweep]

`--settings` tries other retrieval knobs (flat JSON, e.g. '{"cc_vector_weight": 0.6}') on
every set; `--sweep` prints recall@5 / evidence recall@10 of hybrid for a range of fusion
settings on every set, the table the default fusion was chosen from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA_DIR = ROOT / "bench" / "data"
SETS = {
    "retrieval": DATA_DIR / "retrieval_set.json",
    "multilingual": DATA_DIR / "multilingual_set.json",
    "conversation": DATA_DIR / "conversation_set.json",
}
RETRIEVERS = ("vector", "bm25", "hybrid")
DEPTH = 20  # results kept per query: enough for every metric


# --- the labelled sets, in one shape -----------------------------------------------------------


def labelled_set(path: Path) -> tuple[list[dict], list[dict]]:
    """(memories, queries) of a set file in either format (recall.golden.read_labelled)."""
    from recall.golden import read_labelled

    return read_labelled(json.loads(path.read_text(encoding="utf-8")))


def memory_id(key: str) -> str:
    from recall.golden import labelled_id

    return str(labelled_id(key))


# --- the child: one set's store and its raw retrievals -------------------------------------------


def collect(name: str) -> dict:
    """Load the set's store (cached) and run every query once; JSON-ready raw retrievals."""
    import django

    django.setup()
    from bench import labelled_store
    from recall.pipeline import BLOCK_HEADING, recall
    from searchindex import indexes as search_indexes
    from searchindex.fusion import RetrievalSettings
    from searchindex.search import check_outside_top_k, retrieve

    path = SETS[name]
    memories, queries = labelled_set(path)
    embedder = labelled_store.ensure(name, path, len(memories))
    settings = RetrievalSettings()
    runs = []
    for q in queries:
        retrieval, _ = retrieve(q["query"], [q["scope"]], settings)
        check_outside_top_k(retrieval, [q["scope"]])
        result = recall(q["query"], scope=q["scope"], selector_config=None)
        lines = [line for line in result.block.splitlines() if line != BLOCK_HEADING]
        runs.append(
            {
                "query": q,
                "relevant": [memory_id(key) for key in q["relevant"]],
                "vector": [[h.id, h.rank, h.score] for h in retrieval.vector_hits],
                "bm25": [[h.id, h.rank, h.score, h.coverage] for h in retrieval.bm25_hits],
                "anchors": retrieval.anchors,
                "infos": {
                    pk: [i.tier, i.pinned, i.importance, i.updated_at.isoformat(), i.created_at.isoformat()]
                    for pk, i in retrieval.infos.items()
                },
                "refused": retrieval.refused,
                "checked": retrieval.checked,
                "recall": [rc.id for rc in result.selected],
                "recall_within_limit": len(result.selected) <= result.limit and len(lines) <= result.limit,
            }
        )
    search_indexes.close_indexes()
    return {"set": name, "embedder": embedder, "runs": runs}


def collect_in_child(name: str, lexical: str = "whoosh", postgres: str = "") -> dict:
    """The set's raw retrievals, from a child process, or from its cache when neither the set nor
    the code that retrieves (recall/, searchindex/, the store's rules) changed since.

    With `lexical="postgres"` the set's store is a PostgreSQL database of its own
    (memoryui_bench_<set> at `postgres`, created when missing) with the BM25 index in it."""
    data_dir = ROOT / "var" / "bench" / "retrieval" / (name if lexical == "whoosh" else f"{name}-{lexical}")
    data_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(
        [*(ROOT / "recall").glob("*.py"), *(ROOT / "searchindex").glob("*.py"), ROOT / "memoryui" / "rules.py"]
    ) + [Path(__file__), Path(__file__).with_name("labelled_store.py")]
    digest = hashlib.sha256(SETS[name].read_bytes())
    for source in sources:
        digest.update(source.read_bytes())
    cache = data_dir / "collected.json"
    if cache.exists():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("fingerprint") == digest.hexdigest():
            return cached
    env = dict(os.environ)
    env["MEMORYUI_DATA_DIR"] = str(data_dir)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env["CELERY_TASK_ALWAYS_EAGER"] = "1"
    env["MEMORYUI_LEXICAL"] = lexical
    if lexical == "postgres":
        env["DATABASE_URL"] = postgres_database(postgres, f"memoryui_bench_{name}")
    env.setdefault("OMP_NUM_THREADS", "1")
    done = subprocess.run(
        [sys.executable, __file__, "--collect", name], env=env, capture_output=True, text=True, check=False
    )
    sys.stderr.write(done.stderr)
    if done.returncode:
        raise SystemExit(f"collecting {name} failed")
    collected = json.loads(done.stdout) | {"fingerprint": digest.hexdigest()}
    cache.write_text(json.dumps(collected), encoding="utf-8")
    return collected


def postgres_database(server: str, database: str) -> str:
    """The URL of `database` on the PostgreSQL server at `server`, created when missing."""
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            connection.execute(f'CREATE DATABASE "{database}"')
    return f"{server.rstrip('/')}/{database}"


# --- the parent: rank, judge and score ------------------------------------------------------------


def retrievals(collected: dict) -> list[tuple[dict, object]]:
    from searchindex.documents import Hit
    from searchindex.fusion import CandidateInfo
    from searchindex.search import Retrieval

    found = []
    for run in collected["runs"]:
        infos = {
            pk: CandidateInfo(tier=t, pinned=p, importance=i, updated_at=datetime.fromisoformat(u),
                              created_at=datetime.fromisoformat(c))
            for pk, (t, p, i, u, c) in run["infos"].items()
        }  # fmt: skip
        retrieval = Retrieval(
            query=run["query"]["query"],
            vector_hits=[Hit(pk, rank, score) for pk, rank, score in run["vector"]],
            bm25_hits=[Hit(pk, rank, score, coverage) for pk, rank, score, coverage in run["bm25"]],
            anchors=run["anchors"],
            infos=infos,
            refused=run["refused"],
            checked=run["checked"],
        )
        found.append((run, retrieval))
    return found


def answers(runs, settings, retriever: str, *, floor: bool, now) -> list[tuple[list[str], set[str]]]:
    """(what came back, what is relevant) per query."""
    from dataclasses import replace

    from searchindex.search import rank

    got = []
    for run, retrieval in runs:
        if retriever != "hybrid":  # one retriever alone: nothing of the other, no checked similarities
            drop = "bm25_hits" if retriever == "vector" else "vector_hits"
            retrieval = replace(retrieval, **{drop: []}, checked={})
        candidates, answer = rank(retrieval, settings, now)
        if floor:
            candidates = [c for c in candidates if c.passes_floor] if answer.answered else []
        got.append(([c.id for c in candidates[:DEPTH]], set(run["relevant"])))
    return got


def metrics(pairs: list[tuple[list[str], set[str]]]) -> dict:
    top1 = recall5 = evidence10 = mrr = 0.0
    answerable = silent = silent_right = unanswerable = silent_answerable = 0
    for got, relevant in pairs:
        if not got:
            silent += 1
            silent_right += not relevant
        if not relevant:
            unanswerable += 1
            continue
        answerable += 1
        silent_answerable += not got
        top1 += bool(got) and got[0] in relevant
        recall5 += len(relevant & set(got[:5])) / min(5, len(relevant))
        evidence10 += len(relevant & set(got[:10])) / len(relevant)
        mrr += next((1 / rank for rank, key in enumerate(got, 1) if key in relevant), 0.0)
    share = (lambda x: x / answerable) if answerable else (lambda x: 0.0)
    return {
        "recall@5": share(recall5),
        "evidence_recall@10": share(evidence10),
        "top1": share(top1),
        "mrr": share(mrr),
        "silent": share(silent_answerable),
        "no_result_precision": silent_right / silent if silent else 1.0,
        "no_result_recall": silent_right / unanswerable if unanswerable else 1.0,
        "queries": len(pairs),
        "answerable": answerable,
    }


def report_set(collected: dict, settings) -> dict:
    now = datetime.now(UTC)
    runs = retrievals(collected)
    report = {"queries": len(runs), "ranking": {}, "decision": {}}
    for retriever in RETRIEVERS:
        report["ranking"][retriever] = metrics(answers(runs, settings, retriever, floor=False, now=now))
        report["decision"][retriever] = metrics(answers(runs, settings, retriever, floor=True, now=now))
    by_type = defaultdict(list)
    for run in runs:
        by_type[run[0]["query"]["type"]].append(run)
    report["hybrid_by_type"] = {
        kind: metrics(answers(group, settings, "hybrid", floor=True, now=now))
        for kind, group in sorted(by_type.items())
    }
    recalled = [(run["recall"], set(run["relevant"])) for run, _ in runs]
    report["recall (heuristic)"] = metrics(recalled) | {
        "within_limit": sum(run["recall_within_limit"] for run, _ in runs)
    }
    return report


COLUMNS = ("recall@5", "evidence_recall@10", "top1", "mrr", "silent", "no_result_precision", "no_result_recall")
HEADER = "| {:<28} | recall@5 | ev.recall@10 | top-1 | MRR   | silent | no-result P | no-result R |"


def row(name: str, m: dict) -> str:
    cells = " | ".join(f"{m[c]:.3f}" for c in COLUMNS)
    return f"| {name:<28} | {cells} |"


def print_table(title: str, rows: list[tuple[str, dict]]) -> None:
    header = HEADER.format(title)
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for name, m in rows:
        print(row(name, m))
    print()


def sweep(collected_sets: dict[str, dict], base) -> None:
    """Hybrid ranking quality of each fusion setting on every set: how the default was chosen."""
    from dataclasses import replace

    now = datetime.now(UTC)
    candidates = [("vector alone", None), ("bm25 alone", None)]
    candidates += [(f"cc w={w:.2f}", replace(base, fusion="cc", cc_vector_weight=w)) for w in
                   (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)]  # fmt: skip
    candidates += [
        (f"rrf k={k} wb={wb}", replace(base, fusion="rrf", rrf_k=k, rrf_bm25_weight=wb))
        for k in (10, 60)
        for wb in (0.3, 0.5, 1.0)
    ]
    runs = {name: retrievals(collected) for name, collected in collected_sets.items()}
    names = list(runs)
    print("| fusion | " + " | ".join(f"{n} r@5 | {n} ev@10" for n in names) + " |")
    print("|---|" + "---|---|" * len(names))
    for label, settings in candidates:
        cells = []
        for name in names:
            retriever = "hybrid" if settings else label.split()[0]
            m = metrics(answers(runs[name], settings or base, retriever, floor=False, now=now))
            cells.append(f"{m['recall@5']:.3f} | {m['evidence_recall@10']:.3f}")
        print(f"| {label} | " + " | ".join(cells) + " |")


def compare_lexical(names: list[str], settings, postgres: str) -> None:
    """Each set scored with the whoosh and the PostgreSQL BM25 index, and the differences."""
    print("\n## whoosh vs PostgreSQL lexical index (same sets, same embedder, same knobs)\n")
    keys = ("recall@5", "top1", "mrr", "no_result_recall")
    print("| set | retriever | " + " | ".join(f"{k} whoosh / pg (Δ)" for k in keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for name in names:
        whoosh = report_set(collect_in_child(name, "whoosh"), settings)
        postgres_report = report_set(collect_in_child(name, "postgres", postgres), settings)
        for retriever in RETRIEVERS:
            for mode in ("ranking", "decision"):
                a, b = whoosh[mode][retriever], postgres_report[mode][retriever]
                cells = [f"{a[k]:.3f} / {b[k]:.3f} ({b[k] - a[k]:+.3f})" for k in keys]
                print(f"| {name} | {retriever} ({mode}) | " + " | ".join(cells) + " |")
        a, b = whoosh["recall (heuristic)"], postgres_report["recall (heuristic)"]
        cells = [f"{a[k]:.3f} / {b[k]:.3f} ({b[k] - a[k]:+.3f})" for k in keys]
        print(f"| {name} | recall (heuristic) | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--settings", metavar="JSON", help="retrieval knobs to try instead of the defaults")
    parser.add_argument("--sweep", action="store_true", help="print hybrid ranking quality over fusion settings")
    parser.add_argument(
        "--lexical",
        choices=("whoosh", "postgres", "both"),
        default="whoosh",
        help="the BM25 index; `both` scores every set on each and prints the differences",
    )
    parser.add_argument(
        "--postgres",
        default="postgres://postgres@127.0.0.1:5432",
        help="PostgreSQL server for --lexical postgres (one database per set, created when missing)",
    )
    parser.add_argument("--collect", metavar="SET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collect:
        print(json.dumps(collect(args.collect)))
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("MEMORYUI_DATA_DIR", str(ROOT / "var" / "bench" / "retrieval"))
    import django

    django.setup()  # the parent only ranks and scores; it never opens the database
    from searchindex.fusion import RetrievalSettings, SettingsError

    try:
        settings = RetrievalSettings.from_dict(json.loads(args.settings or "{}"))
    except (ValueError, SettingsError) as exc:
        parser.error(f"--settings: {getattr(exc, 'errors', exc)}")
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = [name for name in names if name not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)}; use {', '.join(SETS)}")
    if args.lexical == "both":
        compare_lexical(names, settings, args.postgres)
        return
    collected = {name: collect_in_child(name, args.lexical, args.postgres) for name in names}
    if args.sweep:
        sweep(collected, settings)
        return
    reports = {name: report_set(c, settings) for name, c in collected.items()}
    embedder = next(iter(collected.values()))["embedder"]
    if args.json:
        print(json.dumps({"embedder": embedder, "settings": settings.to_dict(), "sets": reports}, indent=2))
        return
    print(f"\nembedder {embedder}; fusion: {settings.describe_fusion()}")
    print(
        f"answerability: strong with margin {settings.strong_margin:+.3f} or coverage {settings.strong_coverage:.0%}"
        f" or both {settings.agree_margin:+.3f} and {settings.agree_coverage:.0%}; weak with margin "
        f"{settings.weak_margin:+.3f} or coverage {settings.weak_coverage:.0%}\n"
    )
    for name, report in reports.items():
        answerable = report["decision"]["hybrid"]["answerable"]
        print(f"## {name}: {report['queries']} queries, {answerable} answerable\n")
        rows = [(f"{r} (ranking)", report["ranking"][r]) for r in RETRIEVERS]
        rows += [(f"{r} (decision)", report["decision"][r]) for r in RETRIEVERS]
        rows.append(("recall (heuristic)", report["recall (heuristic)"]))
        print_table("retriever", rows)
    for name, report in reports.items():
        print(f"## {name}: hybrid with the decision, by query type\n")
        print_table("query type", [(f"{t} ({m['queries']})", m) for t, m in report["hybrid_by_type"].items()])


if __name__ == "__main__":
    main()
