"""Benchmark: retrieval quality of vector, BM25 and hybrid search, and of heuristic recall, on the labelled set.

Loads bench/data/retrieval_set.json into a store of its own (through the write path, so
tier, importance and pinning are derived as for any memory), indexes it with the configured
embedder, runs every query through `recall.search.search` and prints, for each retriever:

- top-1: share of answerable queries whose first result is relevant;
- top-1 precision: share of the queries that returned something whose first result is
  relevant (how often an answer, when there is one, starts right);
- recall@5: relevant memories among the first five, over min(5, number relevant), averaged;
- MRR: mean reciprocal rank of the first relevant result (0 when none is returned);
- no-result precision / recall: of the queries that returned nothing, the share that has no
  answer; of the queries with no answer, the share that returned nothing.

The same three rows are printed without the relevance floors, so ranking and floors can be
judged apart, and hybrid is broken down by query type.

`recall (heuristic)` scores what an agent is actually given: every query goes through
`recall.pipeline.recall` without a model selector (the heuristic re-scores the floor-passing
candidates with the profile's field weights), at the default limit, and its selected list is
scored with the same metrics. It is broken down by query type too, and every recall is
checked to select no more than its limit and to render no more block lines than that.

    .venv/bin/python bench/retrieval_quality.py [--calibrate] [--json] [--recall-settings JSON]

`--recall-settings` runs the heuristic row with other recall knobs, a recall profile's flat
JSON (e.g. '{"weight_text": 0.1}'); the retriever rows keep the defaults.

`--calibrate` searches the floor knobs (vector_floor, vector_margin, bm25_coverage) for the
setting that keeps every unanswerable query silent and answers the most queries right, and
prints it beside the defaults in recall/fusion.py. The store and its indexes are cached in
var/bench/retrieval/ and rebuilt when the set or the embedder changes.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench" / "retrieval"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from memoryui.models import IndexOutbox, Memory, MemoryEvent  # noqa: E402
from recall import index  # noqa: E402
from recall.documents import Hit  # noqa: E402
from recall.fusion import CandidateInfo, RetrievalSettings, SettingsError, fuse  # noqa: E402
from recall.pipeline import BLOCK_HEADING, RecallSettings, recall  # noqa: E402
from recall.search import search  # noqa: E402

DATA = ROOT / "bench" / "data" / "retrieval_set.json"
NAMESPACE = uuid.UUID("2f1d6c1e-7c53-4d0e-9a55-2b8a4a1f6e01")
K = 5


def memory_id(key: str) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, key)


def load_store(data: dict) -> dict[str, str]:
    """The labelled memories in the bench store and both indexes; returns memory id → key."""
    call_command("migrate", verbosity=0)
    embedder = index.get_index("vector").embedder.name
    fingerprint = hashlib.sha256(DATA.read_bytes() + embedder.encode()).hexdigest()
    marker = BENCH_DIR / "store.fingerprint"
    keys = {str(memory_id(m["key"])): m["key"] for m in data["memories"]}
    current = marker.exists() and marker.read_text() == fingerprint
    if current and all(diff.ok for diff in index.verify()):
        return keys
    print(f"loading {len(keys)} memories and indexing them with {embedder} …", file=sys.stderr)
    with transaction.atomic():
        MemoryEvent.objects.all().delete()
        IndexOutbox.objects.all().delete()
        Memory.objects.all().delete()
        for m in data["memories"]:
            fields = {"scope": m["scope"], "kind": m["kind"], "text": m["text"], "confidence": 0.9}
            if m.get("entity_key"):
                fields["entity_key"] = m["entity_key"]
            if m.get("tags"):
                fields["metadata"] = {"tags": m["tags"]}
            _, created = Memory.objects.write(actor="bench", id=memory_id(m["key"]), semantic=False, **fields)
            if not created:
                raise SystemExit(f"{m['key']} was merged into another memory: the set holds a duplicate")
    index.rebuild()
    IndexOutbox.objects.all().delete()
    marker.write_text(fingerprint)
    return keys


def collect(data: dict, keys: dict[str, str]) -> list[dict]:
    """Run every query once (hybrid, default settings) and keep what re-fusing needs."""
    runs = []
    for q in data["queries"]:
        result = search(q["query"], scopes=[q["scope"]], limit=20)
        vector, bm25, infos = [], [], {}
        for found in result.candidates:
            c, m = found.candidate, found.memory
            if c.vector_rank is not None:
                vector.append(Hit(c.id, c.vector_rank, c.vector_score))
            if c.bm25_rank is not None:
                bm25.append(Hit(c.id, c.bm25_rank, c.bm25_score, c.bm25_coverage))
            infos[c.id] = CandidateInfo(
                tier=m.tier, pinned=m.pinned, importance=m.importance, updated_at=m.updated_at, created_at=m.created_at
            )
        runs.append(
            {
                "query": q,
                "relevant": set(q["relevant"]),
                "vector": vector,
                "bm25": bm25,
                "infos": infos,
                "background": {found.candidate.id: found.candidate.vector_background for found in result.candidates},
                "keys": keys,
            }
        )
    return runs


def answer(run: dict, retriever: str, settings: RetrievalSettings, now, *, floors: bool = True) -> list[str]:
    vector = run["vector"] if retriever in ("hybrid", "vector") else []
    bm25 = run["bm25"] if retriever in ("hybrid", "bm25") else []
    candidates = fuse(vector, bm25, run["infos"], settings, now, vector_background=run["background"])
    if floors:
        candidates = [c for c in candidates if c.passes_floor]
    return [run["keys"][c.id] for c in candidates[:K]]


def recall_heuristic(runs: list[dict], settings: RecallSettings, now) -> None:
    """Recall every query without a selector; keep the selected keys and the limit checks in its run."""
    for run in runs:
        q = run["query"]
        result = recall(q["query"], scope=q["scope"], settings=settings, selector_config=None, now=now)
        if result.mode != "heuristic":
            raise SystemExit(f"{q['id']}: recall answered by the {result.mode}, not the heuristic")
        lines = [line for line in result.block.splitlines() if line != BLOCK_HEADING]
        run["recall"] = [run["keys"][rc.id] for rc in result.selected]
        run["recall_within_limit"] = len(result.selected) <= result.limit and len(lines) <= result.limit


def metrics(answers: list[tuple[list[str], set[str]]]) -> dict:
    """The metrics of (what came back, what is relevant) pairs, one a query; only the first K count."""
    top1 = recall = mrr = 0.0
    answerable = silent = silent_right = unanswerable = answered = answered_right = 0
    for got, relevant in answers:
        got = got[:K]
        if not got:
            silent += 1
            silent_right += not relevant
        else:
            answered += 1
            answered_right += got[0] in relevant
        if not relevant:
            unanswerable += 1
            continue
        answerable += 1
        top1 += bool(got) and got[0] in relevant
        recall += len(relevant & set(got)) / min(K, len(relevant))
        mrr += next((1 / rank for rank, key in enumerate(got, 1) if key in relevant), 0.0)
    return {
        "top1": top1 / answerable if answerable else 0.0,
        "top1_precision": answered_right / answered if answered else 1.0,
        "recall@5": recall / answerable if answerable else 0.0,
        "mrr": mrr / answerable if answerable else 0.0,
        "no_result_precision": silent_right / silent if silent else 1.0,
        "no_result_recall": silent_right / unanswerable if unanswerable else 1.0,
        "queries": len(answers),
        "answerable": answerable,
    }


def score(runs: list[dict], retriever: str, settings: RetrievalSettings, now, *, floors: bool = True) -> dict:
    return metrics([(answer(run, retriever, settings, now, floors=floors), run["relevant"]) for run in runs])


def score_recall(runs: list[dict]) -> dict:
    result = metrics([(run["recall"], run["relevant"]) for run in runs])
    result["within_limit"] = sum(run["recall_within_limit"] for run in runs)
    return result


def calibrate(runs: list[dict], now) -> tuple[RetrievalSettings, dict]:
    """The floor setting that keeps every unanswerable query silent and scores best.

    Ranked by hybrid top-1, then recall@5, then the loosest floors (least silence).
    """
    best = None
    grid = itertools.product(
        [0.70, 0.74, 0.76, 0.78, 0.80],  # vector_floor
        [round(0.02 + 0.005 * i, 3) for i in range(15)],  # vector_margin 0.02..0.09
        [round(0.1 + 0.02 * i, 2) for i in range(16)],  # bm25_coverage 0.10..0.40
    )
    for vector_floor, vector_margin, coverage in grid:
        settings = RetrievalSettings(vector_floor=vector_floor, vector_margin=vector_margin, bm25_coverage=coverage)
        result = score(runs, "hybrid", settings, now)
        if result["no_result_recall"] < 1.0:
            continue
        rank = (result["top1"], result["recall@5"], result["top1_precision"], -vector_margin, -coverage, -vector_floor)
        if best is None or rank > best[0]:
            best = (rank, settings, result)
    if best is None:
        raise SystemExit("no floor setting in the grid keeps every unanswerable query silent")
    return best[1], best[2]


def row(name: str, result: dict) -> str:
    return (
        f"| {name:<22} | {result['top1']:.3f} | {result['top1_precision']:.3f} | {result['recall@5']:.3f} "
        f"| {result['mrr']:.3f} "
        f"| {result['no_result_precision']:.3f} | {result['no_result_recall']:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calibrate", action="store_true", help="search the floor knobs on the set")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--recall-settings", metavar="JSON", help="recall knobs for the heuristic row")
    args = parser.parse_args()
    try:
        recall_settings = RecallSettings.from_dict(json.loads(args.recall_settings or "{}"))
    except (ValueError, SettingsError) as exc:
        parser.error(f"--recall-settings: {getattr(exc, 'errors', exc)}")
    data = json.loads(DATA.read_text(encoding="utf-8"))
    keys = load_store(data)
    runs = collect(data, keys)
    now = timezone.now()
    defaults = RetrievalSettings()
    report: dict = {"embedder": index.get_index("vector").embedder.name, "settings": defaults.to_dict()}
    report["with_floors"] = {r: score(runs, r, defaults, now) for r in ("vector", "bm25", "hybrid")}
    report["without_floors"] = {r: score(runs, r, defaults, now, floors=False) for r in ("vector", "bm25", "hybrid")}
    by_type = defaultdict(list)
    for run in runs:
        by_type[run["query"]["type"]].append(run)
    report["hybrid_by_type"] = {t: score(group, "hybrid", defaults, now) for t, group in sorted(by_type.items())}
    recall_heuristic(runs, recall_settings, now)
    report["recall_settings"] = recall_settings.to_dict()
    report["with_floors"]["recall (heuristic)"] = score_recall(runs)
    report["recall_by_type"] = {t: score_recall(group) for t, group in sorted(by_type.items())}
    if args.calibrate:
        settings, result = calibrate(runs, now)
        report["calibrated"] = {
            "vector_floor": settings.vector_floor,
            "vector_margin": settings.vector_margin,
            "bm25_coverage": settings.bm25_coverage,
            "hybrid": result,
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    answerable = report["with_floors"]["hybrid"]["answerable"]
    print(f"\nretrieval set: {len(runs)} queries ({answerable} answerable), embedder {report['embedder']}")
    print(
        f"floors: vector_floor {defaults.vector_floor}, vector_margin {defaults.vector_margin}, "
        f"bm25_floor {defaults.bm25_floor}, bm25_coverage {defaults.bm25_coverage}\n"
    )
    header = (
        "| retriever              | top-1 | top-1 precision | recall@5 | MRR   | no-result precision "
        "| no-result recall |"
    )
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for name in ("vector", "bm25", "hybrid"):
        print(row(name, report["with_floors"][name]))
    for name in ("vector", "bm25", "hybrid"):
        print(row(f"{name} (no floors)", report["without_floors"][name]))
    print(row("recall (heuristic)", report["with_floors"]["recall (heuristic)"]))
    within = report["with_floors"]["recall (heuristic)"]["within_limit"]
    print(f"\nrecall (heuristic): {within} of {len(runs)} recalls within the limit (selected and block lines)")
    if recall_settings != RecallSettings():
        changed = {k: v for k, v in recall_settings.to_dict().items() if RecallSettings().to_dict()[k] != v}
        print(f"recall settings: {json.dumps(changed)}")
    for title, by in (("hybrid", "hybrid_by_type"), ("recall (heuristic)", "recall_by_type")):
        print(f"\n{title} by query type (with floors)\n")
        print(header.replace("retriever             ", "query type            "))
        print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
        for name, result in report[by].items():
            print(row(f"{name} ({result['queries']})", result))
    if args.calibrate:
        c = report["calibrated"]
        print(
            f"\ncalibrated: vector_floor {c['vector_floor']}, vector_margin {c['vector_margin']}, "
            f"bm25_coverage {c['bm25_coverage']}"
        )
        print(row("hybrid (calibrated)", c["hybrid"]))
    index.close_indexes()


if __name__ == "__main__":
    main()
