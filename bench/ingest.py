"""Benchmark: memories/s created with indexing, through the write path and the import, vs embedding alone.

Embedding is the one cost no indexing can avoid, so it is the baseline. Each repetition times,
one after the other, on --memories fresh English and Chinese texts each (new random ids and
numbers, so dedup never merges them, and a set of their own per variant, so none is answered
from the embedder's cache of recently embedded passages):

- embedding alone: `embedder.embed_passages` in slices of `searchindex.vector.BATCH`, the slice the
  vector index embeds with;
- write path: `writing.write(actor="bench", scope=..., kind=..., text=...)` for each
  text inside one transaction. CELERY_TASK_ALWAYS_EAGER is on, so the index sync queued after
  commit (memoryui.models.queue_index_sync -> searchindex.tasks.sync_index) runs inline and the time
  covers the rows, their events and both indexes (chromadb and whoosh);
- import: its texts as a JSONL file through `manage.py import_memories` (one transaction;
  the index sync after commit, in batches of searchindex.tasks.SYNC_BATCH).

The store and both indexes are emptied before each timed write, so every run starts alike; the
counts in the database and in both indexes are checked after it. Each timed write is split in
the work inside the transaction (validation, the dedup lookups, which for the write path's
semantic layer embed the text and search the vector index, rows, events, outbox) and the work
after commit (the index sync). Prints medians of memories/s and the ratio to embedding alone
(target >= 0.7x), measured in the same run; never asserts a time.

    .venv/bin/python bench/ingest.py [--memories 500] [--repeat 3]

With --background it measures `import_memories --background` instead: --count memories (default
20000) imported into a fresh store while a real `celery worker` (embedded SQLite broker, as the
integration tests run it) with --concurrency 1, then 2, embeds them; it times the command's
return (then samples BM25 searches: every sampled row must be found by keyword) and the end of
the embedding task (then samples vector searches), and prints medians and the 2-worker/1-worker
ratio. Both runs import the same texts into fresh stores and fresh workers: the same embedding work.

    .venv/bin/python bench/ingest.py --background [--count 20000] [--repeat 1]

The bench store lives in var/bench/ingest/.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench" / "ingest"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from ingest import writing  # noqa: E402
from memoryui.models import IndexOutbox, Memory, MemoryEvent  # noqa: E402
from searchindex import indexes as search_indexes  # noqa: E402
from searchindex.embeddings import get_embedder  # noqa: E402
from searchindex.tasks import SYNC_BATCH as INDEX_SYNC_BATCH  # noqa: E402
from searchindex.vector import BATCH  # noqa: E402

TARGET_RATIO = 0.7
SCOPES = ("agent:main", "agent:main", "agent:main", "user:42", "agent:bot-01", "global")
PEOPLE = ("Alice Chen", "Bob Miller", "Carol Wu", "Dave Kumar", "Maya Singh", "Oscar Silva", "Priya Nair")
PEOPLE_ZH = ("张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏", "黄勇")
SERVICES = ("payments", "billing", "search", "auth", "gateway", "scheduler", "ledger", "checkout", "crawler")
SERVICES_ZH = ("支付", "账单", "搜索", "鉴权", "网关", "调度", "账本", "库存", "推荐")
GPUS = ("RTX 4070", "RTX 4090", "A100", "H100", "L40S")
EN_TEMPLATES = (
    ("relationship", "{person} owns the {service} service; escalate to {person2} if it is down for over {n} minutes."),
    ("fact", "Deploying {service} {version} to {host} failed with exit code {code}; rolled back to {version2}."),
    ("fact", "The IDC in rack {rack} runs {count} {gpu} GPUs for the {service} team."),
    ("project_state", "Ticket {ticket} tracks the {service} migration; blocked on a vendor quote until {date}."),
    ("entity", "{person}'s phone number is {phone}, ticket {ticket}."),
    ("fact", "The {service} API returns HTTP {code} when page > {n}; use the cursor instead."),
    ("project_state", "Commit {hash} fixed the cache leak in {service}, shipped in {version} on {date}."),
    ("remember", "Remember: the {service} demo is on {date} in room {rack}, ticket {ticket}."),
)
ZH_TEMPLATES = (
    ("relationship", "{zperson}负责{zservice}服务,故障超过{n}分钟先找{zperson2}。"),
    ("fact", "{zservice}服务{version}部署到{host}失败,退出码{code},已回滚到{version2}。"),
    ("fact", "机架{rack}有{count}张{gpu}显卡,给{zservice}组用。"),
    ("project_state", "工单{ticket}跟踪{zservice}迁移,预计{date}完成。"),
    ("entity", "{zperson}的手机号是{phone},工单{ticket}。"),
    ("fact", "{zservice}接口在page大于{n}时返回{code},要改用cursor翻页。"),
    ("project_state", "提交{hash}修复了{zservice}的缓存泄漏,{date}随{version}上线。"),
    ("remember", "记住:{zservice}的演示在{date},会议室{rack},工单{ticket}。"),
)


def fresh_memories(count: int, seed: int) -> list[dict]:
    """`count` distinct memories, about half Chinese, new for every seed."""
    rnd = random.Random(f"ingest:{seed}")
    memories, seen = [], set()
    while len(memories) < count:
        person, person2 = rnd.sample(PEOPLE, 2)
        values = {
            "person": person,
            "person2": person2,
            "zperson": rnd.choice(PEOPLE_ZH),
            "zperson2": rnd.choice(PEOPLE_ZH),
            "service": rnd.choice(SERVICES),
            "zservice": rnd.choice(SERVICES_ZH),
            "gpu": rnd.choice(GPUS),
            "host": f"{rnd.choice(('web', 'api', 'db', 'gpu'))}-{rnd.randint(1, 60):02d}.prod.acme.net",
            "ticket": f"{rnd.choice(('OPS', 'PAY', 'SRE'))}-{rnd.randint(100, 99999)}",
            "hash": f"{rnd.getrandbits(160):040x}"[: rnd.choice((7, 12, 40))],
            "phone": f"1{rnd.choice('3456789')}{rnd.randint(0, 999_999_999):09d}",
            "version": f"v{rnd.randint(1, 9)}.{rnd.randint(0, 30)}.{rnd.randint(0, 20)}",
            "version2": f"v{rnd.randint(1, 9)}.{rnd.randint(0, 30)}.{rnd.randint(0, 20)}",
            "date": f"2025-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
            "rack": f"R{rnd.randint(1, 40):02d}",
            "n": rnd.randint(2, 120),
            "count": rnd.choice((8, 64, 256, 1000)),
            "code": rnd.choice((137, 1, 500, 502, 429)),
        }
        kind, template = rnd.choice(ZH_TEMPLATES if rnd.random() < 0.5 else EN_TEMPLATES)
        text = template.format(**values)
        if text not in seen:
            seen.add(text)
            memories.append({"scope": rnd.choice(SCOPES), "kind": kind, "text": text})
    return memories


def empty_store() -> None:
    MemoryEvent.objects.all().delete()
    IndexOutbox.objects.all().delete()
    Memory.objects.all().delete()
    for name in search_indexes.INDEX_NAMES:
        search_indexes.get_index(name).reset()


def check_store(expected: int, variant: str) -> None:
    """The write really indexed everything: otherwise its time means nothing."""
    counts = {
        "memories": Memory.objects.active().count(),
        "vector index": search_indexes.get_index("vector").count(),
        "BM25 index": search_indexes.get_index("bm25").count(),
    }
    pending = IndexOutbox.objects.count()
    if any(count != expected for count in counts.values()) or pending:
        found = ", ".join(f"{name} {count}" for name, count in counts.items())
        raise SystemExit(
            f"{variant}: expected {expected} memories in the store and both indexes; {found}, {pending} pending"
        )


def embed_alone(memories: list[dict]) -> float:
    embedder = get_embedder()
    texts = [m["text"] for m in memories]
    start = time.perf_counter()
    for offset in range(0, len(texts), BATCH):
        embedder.embed_passages(texts[offset : offset + BATCH])
    return time.perf_counter() - start


def write_each(memories: list[dict]) -> None:
    """Each memory through `ingest.writing.write`; fresh texts must never merge."""
    for m in memories:
        _, created = writing.write(actor="bench", scope=m["scope"], kind=m["kind"], text=m["text"])
        if not created:
            raise SystemExit(f"the write path merged a fresh text: {m['text']}")


def write_path(memories: list[dict]) -> tuple[float, float]:
    """(seconds in the transaction, seconds after it: the index sync run on commit)."""
    empty_store()
    start = time.perf_counter()
    with transaction.atomic():
        write_each(memories)
        committing = time.perf_counter()
    done = time.perf_counter()
    check_store(len(memories), "write path")
    return committing - start, done - committing


class Worker:
    """A real Celery worker on the embedded broker, as `make run` starts one beside the web server."""

    def __enter__(self) -> Worker:
        env = {**os.environ, "CELERY_TASK_ALWAYS_EAGER": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", "1", "--loglevel", "WARNING"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def write_path_worker(memories: list[dict]) -> tuple[float, float]:
    """Like write_path, with the index sync done by the worker process: after commit, the time
    until the outbox is empty. The worker reuses the vectors the write path computed for dedup
    layer 3 (PendingVector rows); it cannot share this process's embedder cache."""
    from config.celery import app

    empty_store()
    app.conf.task_always_eager = False
    try:
        start = time.perf_counter()
        with transaction.atomic():
            write_each(memories)
            committing = time.perf_counter()
        deadline = time.monotonic() + 900
        while IndexOutbox.objects.exists():
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not sync the indexes within 15 minutes")
            time.sleep(0.05)
        done = time.perf_counter()
    finally:
        app.conf.task_always_eager = True
    check_store(len(memories), "write path, worker")
    return committing - start, done - committing


def import_file(memories: list[dict]) -> tuple[float, float]:
    """Like write_path, through `manage.py import_memories` and a JSONL file.

    The command runs inside an outer transaction only to tell its own work from the index sync
    that runs when that transaction commits; it does the same work as run on its own.
    """
    path = BENCH_DIR / "import.jsonl"
    path.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in memories), encoding="utf-8")
    empty_store()
    out = io.StringIO()
    start = time.perf_counter()
    with transaction.atomic():
        call_command("import_memories", str(path), "--json", stdout=out)
        committing = time.perf_counter()
    done = time.perf_counter()
    report = json.loads(out.getvalue())
    if report["imported"] != len(memories):
        raise SystemExit(f"import: expected {len(memories)} memories imported, the report says {report}")
    check_store(len(memories), "import")
    return committing - start, done - committing


# Every imported row must have its entry (a synthetic store holds many near-identical texts, so a
# search by a row's own text need not rank it in a top k); a sample must also be found by search.
_SAMPLE_CHECK = """
import json, sys
from searchindex.indexes import get_index
wanted = json.loads(sys.stdin.read())
index = get_index(wanted["index"])
entries = index.entries()
missing = [pk for pk in wanted["all"] if pk not in entries]
missing += [pk for pk, text in wanted["rows"] if pk not in {hit.id for hit in index.search(text, k=1000)}]
print("MISSING=" + json.dumps(missing))
"""


def _background_run(rows: list[dict], concurrency: int, directory: Path) -> tuple[float, float]:
    """Import `rows` with --background into a fresh store under a fresh worker; (return s, task s)."""
    import shutil
    import sqlite3
    import uuid

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        MEMORYUI_DATA_DIR=str(directory),
        CELERY_TASK_DEFAULT_QUEUE=f"memoryui-bench-{uuid.uuid4().hex[:8]}",
        CELERY_TASK_ALWAYS_EAGER="0",
        MEMORYUI_INDEX_SWEEP_SECONDS="0",
    )

    def manage(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, input=stdin
        )
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return done.stdout

    def check(index: str) -> None:
        _check_indexed(directory, manage, index)

    manage("migrate", "-v0")
    path = directory / "store.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", str(concurrency)]
        + ["--loglevel", "WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(directory / "worker.log", "w"),  # noqa: SIM115
    )
    try:
        time.sleep(8)  # the worker's processes start and load the model before the clock starts
        started = time.perf_counter()
        report = json.loads(manage("import_memories", str(path), "--background", "--json"))
        returned = time.perf_counter() - started
        assert report["bm25_searchable"] and report["imported"] == len(rows), report
        db = sqlite3.connect(directory / "memoryui.sqlite3")
        check("bm25")  # as the command returned, while the worker embeds
        while True:
            status = db.execute(
                "SELECT status FROM memoryui_taskrun WHERE id = ?", (report["task"].replace("-", ""),)
            ).fetchone()[0]
            if status in ("succeeded", "failed"):
                break
            if worker.poll() is not None:
                raise SystemExit("the worker died; see " + str(directory / "worker.log"))
            time.sleep(0.2)
        finished = time.perf_counter() - started
        assert status == "succeeded", status
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    check("vector")
    return returned, finished


def _check_indexed(directory: Path, manage, index: str) -> None:
    """Every imported memory has its entry in `index`, and a sample is found by a search of its text."""
    import sqlite3
    import uuid

    with sqlite3.connect(directory / "memoryui.sqlite3") as db:
        texts = dict(db.execute("SELECT id, text FROM memoryui_memory").fetchall())
    ids = sorted(texts)
    sample = random.Random(1).sample(ids, min(50, len(ids)))
    rows_wanted = [[str(uuid.UUID(pk)), texts[pk]] for pk in sample]
    every = [str(uuid.UUID(pk)) for pk in ids]
    said = manage("shell", "-c", _SAMPLE_CHECK, stdin=json.dumps({"index": index, "rows": rows_wanted, "all": every}))
    missing = json.loads(said.split("MISSING=", 1)[1])
    assert not missing, f"{index}: {len(missing)} of {len(ids)} memories (or of {len(sample)} searched) not found"


_EMBED_PROBE = """
import json, sys, time
import django
django.setup()
from searchindex.embeddings import get_embedder
texts = json.loads(sys.stdin.read())
embedder = get_embedder()
embedder.embed_passages(["warm up the model"])
started = time.perf_counter()
for start in range(0, len(texts), 64):
    embedder.embed_passages(texts[start : start + 64])
print(time.perf_counter() - started)
"""


def _embedding_ceiling(texts: list[str]) -> float:
    """What the machine gives two processes embedding at once, against one: the most a second
    worker can add (other load on the cores lowers it). Same texts, fresh processes, no cache."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "MEMORYUI_DATA_DIR": str(BENCH_DIR)}

    def start() -> subprocess.Popen:
        probe = subprocess.Popen(
            [sys.executable, "-c", _EMBED_PROBE],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        probe.stdin.write(json.dumps(texts))
        probe.stdin.close()
        return probe

    def rate(probes: list[subprocess.Popen]) -> float:
        return sum(len(texts) / float(probe.stdout.read()) for probe in probes if probe.wait() == 0)

    one = rate([start()])
    two = rate([start(), start()])
    print(f"  embedding alone: 1 process {one:.1f}/s, 2 processes {two:.1f}/s ({two / one:.2f}x)", flush=True)
    return two / one


def background_main(args) -> None:
    rows = [
        {key: value for key, value in row.items() if key in ("scope", "kind", "text")}
        for row in fresh_memories(args.count, seed=7)
    ]
    ceiling = _embedding_ceiling([row["text"] for row in rows[:400]])
    times: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    for _ in range(args.repeat):
        for concurrency in (1, 2):
            returned, finished = _background_run(rows, concurrency, BENCH_DIR / f"background-{concurrency}")
            times[concurrency].append((returned, finished))
            print(
                f"  {concurrency} worker process(es): returned {returned:.1f} s, embedded {finished:.1f} s", flush=True
            )
    print(f"\nimport_memories --background, {args.count} memories, median of {args.repeat}")
    print(f"{'workers':>8} {'returns (s)':>12} {'rows/s':>8} {'task ends (s)':>14} {'memories/s':>11}")
    medians = {}
    for concurrency, runs in times.items():
        returned = statistics.median(r for r, _ in runs)
        finished = statistics.median(f for _, f in runs)
        medians[concurrency] = finished
        print(
            f"{concurrency:>8} {returned:>12.1f} {args.count / returned:>8.0f} {finished:>14.1f} "
            f"{args.count / finished:>11.1f}"
        )
    print(f"2-worker / 1-worker throughput: {medians[1] / medians[2]:.2f}x (target >= 1.7x)")
    print(f"embedding alone, 2 processes / 1 on this machine now: {ceiling:.2f}x (the most a second worker can add)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=500, help="memories written per run")
    parser.add_argument("--repeat", type=int, default=None, help="runs of each variant, each with fresh texts")
    parser.add_argument("--background", action="store_true", help="time import_memories --background (see above)")
    parser.add_argument("--count", type=int, default=20000, help="--background: memories imported per run")
    args = parser.parse_args()
    if args.background:
        args.repeat = args.repeat or 1
        background_main(args)
        return
    args.repeat = args.repeat or 3

    call_command("migrate", verbosity=0)
    embedder = get_embedder()
    embedder.embed_passages(["warm up the model", "预热模型"])
    n = args.memories
    rates: dict[str, list[float]] = {
        "embedding alone": [],
        "write path": [],
        "write path, worker": [],
        "import_memories": [],
    }
    split: dict[str, list[tuple[float, float]]] = {"write path": [], "write path, worker": [], "import_memories": []}
    # Every variant of every run gets texts of its own, never seen before in this process: the
    # embedder keeps the passages it embedded lately, and a text embedded twice costs nothing.
    fresh = iter(fresh_memories(4 * n * args.repeat + 1, seed=0))
    variants = (("write path", write_path), ("write path, worker", write_path_worker), ("import_memories", import_file))
    with Worker():
        write_path_worker([next(fresh)])  # the worker loads the model before the first timed run
        for repetition in range(args.repeat):
            rates["embedding alone"].append(n / embed_alone([next(fresh) for _ in range(n)]))
            for variant, run in variants:
                in_transaction, after_commit = run([next(fresh) for _ in range(n)])
                rates[variant].append(n / (in_transaction + after_commit))
                split[variant].append((in_transaction, after_commit))
            print(
                f"run {repetition + 1}/{args.repeat}: "
                + ", ".join(f"{variant} {values[-1]:.1f}/s" for variant, values in rates.items()),
                file=sys.stderr,
            )
    empty_store()
    search_indexes.close_indexes()

    baseline = statistics.median(rates["embedding alone"])
    print(
        f"\n{n} fresh memories (about half Chinese) per run, {args.repeat} runs, embedder {embedder.name}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )
    print(
        f"embedding alone = embed_passages in slices of {BATCH}; the write path syncs the indexes after commit, "
        f"the import in batches of {INDEX_SYNC_BATCH}\n"
    )
    print(
        f"| {'variant':<18} | {'memories/s':>10} | {'runs (memories/s)':<24} | {'in transaction s':>16} "
        f"| {'after commit s':>14} | {'ratio':>6} |"
    )
    print(f"|{'-' * 20}|{'-' * 11}:|{'-' * 26}|{'-' * 17}:|{'-' * 15}:|{'-' * 7}:|")
    for variant, values in rates.items():
        runs = ", ".join(f"{value:.1f}" for value in values)
        if variant in split:
            in_transaction = statistics.median(s[0] for s in split[variant])
            after_commit = statistics.median(s[1] for s in split[variant])
            timing = f"{in_transaction:16.2f} | {after_commit:14.2f}"
        else:
            timing = f"{'':>16} | {'':>14}"
        ratio = statistics.median(values) / baseline
        print(f"| {variant:<18} | {statistics.median(values):10.1f} | {runs:<24} | {timing} | {ratio:5.2f}x |")
    print("\ntarget: create-with-indexing >= 0.7x embedding alone (median memories/s)")
    for variant in ("write path", "write path, worker", "import_memories"):
        ratio = statistics.median(rates[variant]) / baseline
        verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
        print(
            f"- {variant}: {statistics.median(rates[variant]):.1f} memories/s = {ratio:.2f}x embedding alone "
            f"({baseline:.1f}/s): {verdict}"
        )


if __name__ == "__main__":
    main()
