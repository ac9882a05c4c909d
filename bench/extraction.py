"""Benchmark: extraction's L0 throughput, and the cost of running extraction in Celery workers.

1. L0 throughput on a synthetic corpus of --messages user messages (default 10k, English and
   Chinese, deterministic for a seed): about half state a fact L0 extracts (names, phones,
   e-mail, birthdays, lucky numbers, preferences, `/remember` and `记住`), with unique values so
   dedup mostly creates; the rest are chit-chat, nudges and questions the salience gate drops.
   - L0 rules alone (the baseline): `salience`, `l0_extract` and `tool_guard` on every message,
     as `ingest.extraction` calls them, no database.
   - `extract()` end to end, in-process: the transcripts (--per-transcript user messages, each
     followed by a short assistant reply) stored with `ingest`, then extracted with `l1="off"`
     and semantic dedup off (MEMORYUI_SEMANTIC_DEDUP_THRESHOLD=off): projection, filters, L0,
     tool guard, the write path (dedup layers 1-2, rows, events, the index outbox) and each
     message's extraction record. The index sync each write queues after commit is not sent
     (it belongs to the indexes, timed by bench/ingest.py).
   Both in user messages/s.

2. Orchestration, with an OpenAI-compatible fake LLM endpoint (tests/fakes/openai_server.py, in
   this process) answering every chat call after a fixed --llm-ms (500 ms), with a valid empty
   L1 answer (`{"memories": []}`). --transcripts transcripts of --per-run neutral user messages
   each: sentences that pass the salience gate and hold no L0 fact (checked), so L1 is called
   once per message (`l1="auto"`).
   - Baseline: the same extractions run in-process, one after the other (`extract()`), about
     transcripts x messages x 500 ms.
   - One real worker (`celery -A config worker --concurrency 1`, a subprocess on this data dir),
     then two (--concurrency 2), each on its own fresh set of the same transcripts: the clock
     starts when `enqueue_extraction` queues them with the worker up and idle (it first ran one
     warm-up extraction per pool process) and stops when this process sees every TaskRun
     `succeeded` (polling the database every 20 ms). Targets: one worker at most 10% slower than
     in-process; two workers at least 1.6x faster than one.
   The embedded SQLite broker is used unless --broker (e.g. redis://127.0.0.1:6379/0).

Prints markdown tables (medians and p95 over --repeat runs for part 1; wall times for part 2) and
whether the targets are met; never asserts a time. The store is var/bench/extraction/, made
afresh (removed and migrated) by every run.

    .venv/bin/python bench/extraction.py [--messages 10000] [--repeat 3] [--transcripts 8] [--per-run 6]
                                         [--llm-ms 500] [--broker redis://127.0.0.1:6379/0] [--skip-l0|--skip-workers]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA_DIR = ROOT / "var" / "bench" / "extraction"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000, help="user messages in the L0 corpus")
    parser.add_argument("--per-transcript", type=int, default=100, help="user messages per transcript (part 1)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the L0 rules alone")
    parser.add_argument("--transcripts", type=int, default=8, help="transcripts per worker run (part 2)")
    parser.add_argument("--per-run", type=int, default=6, help="neutral user messages per transcript (part 2)")
    parser.add_argument("--llm-ms", type=int, default=500, help="the fake LLM endpoint's time per call")
    parser.add_argument("--broker", default=None, help="a broker URL instead of the embedded SQLite one")
    parser.add_argument("--skip-l0", action="store_true", help="skip part 1")
    parser.add_argument("--skip-workers", action="store_true", help="skip part 2")
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
shutil.rmtree(DATA_DIR, ignore_errors=True)  # fresh per run
DATA_DIR.mkdir(parents=True, exist_ok=True)
# Forced, not defaulted: this benchmark writes, so never into another store.
os.environ["MEMORYUI_DATA_DIR"] = str(DATA_DIR)
os.environ.pop("DATABASE_URL", None)
os.environ["MEMORYUI_SEMANTIC_DEDUP_THRESHOLD"] = "off"
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"memoryui-bench-{uuid.uuid4().hex[:8]}"  # never a stale message
os.environ["MEMORYUI_LLM_BASE_URL"] = ""
os.environ["MEMORYUI_LLM_MODEL"] = ""
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
if ARGS and ARGS.broker:
    os.environ["CELERY_BROKER_URL"] = ARGS.broker
else:
    os.environ.pop("CELERY_BROKER_URL", None)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from ingest.extraction import extract  # noqa: E402
from ingest.extraction.guards import tool_guard  # noqa: E402
from ingest.extraction.l0_statements import l0_extract  # noqa: E402
from ingest.extraction.salience import salience  # noqa: E402
from ingest.ingestion import ingest  # noqa: E402
from ingest.tasks import enqueue_extraction  # noqa: E402
from memoryui.models import IndexOutbox, Memory, MemoryEvent, TaskRun, Transcript  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

TARGET_OVERHEAD = 0.10  # one worker's wall / in-process wall - 1
TARGET_SPEEDUP = 1.6  # one worker's wall / two workers' wall
POLL = 0.02

# --- the corpus ------------------------------------------------------------------------------------

FIRST = ("Oscar", "Maya", "Priya", "Dave", "Carol", "Bob", "Alice", "Lena", "Tomas", "Ines", "Yuki", "Omar")
LAST = ("Silva", "Singh", "Nair", "Kumar", "Wu", "Miller", "Chen", "Novak", "Berg", "Costa", "Sato", "Haddad")
ZH_SURNAMES = "张王李刘陈杨赵黄周吴徐孙胡朱高林何郭马罗"
ZH_GIVEN = "伟芳娜洋静磊敏勇军杰涛明超秀霞平刚桂英华玲"
THINGS = ("tabs over spaces", "dark mode in every editor", "window seats on long flights", "green tea to coffee")
THINGS += ("short standups", "written specs before code", "trains over planes", "Vim keybindings")
ZH_THINGS = ("喝乌龙茶", "吃川菜", "靠窗的座位", "用深色主题", "早上跑步", "坐高铁出差", "写单元测试", "听古典音乐")
FACTS_EN = (
    "My name is {name}.",
    "My phone number is {phone}.",
    "My email is {email}",
    "my lucky number is {n}",
    "My birthday is {date}",
    "I prefer {thing} (since {year}).",
    "{name}'s email is {email}",
    "/remember the {project} demo is in room R{n}",
)
FACTS_ZH = (
    "我叫{zname}。",
    "我的手机号是{phone}",
    "我的幸运数字是{n}",
    "我喜欢{zthing},从{year}年开始。",
    "{zname}的电话是{phone}",
    "我的生日是{year}年{month}月{day}日",
    "记住:{project}项目的评审在{n}号会议室",
)
NOISE = (
    "hi there!",
    "thanks, that works",
    "ok",
    "继续",
    "你好",
    "what's my lucky number?",
    "我的幸运数字是啥?",
    "can you search the web for hotels in Lisbon",
    "帮我查一下明天的天气",
    "that's wrong again",
    "不对",
    "how do I rebase a branch?",
    "谢谢!",
    "any update?",
)
PROJECTS = ("atlas", "borealis", "cobalt", "delta", "ember", "fjord", "granite", "helix")


def l0_corpus(count: int, seed: int) -> list[str]:
    """`count` user messages: about half an L0 fact with fresh values, the rest noise."""
    rnd = random.Random(f"extraction:{seed}")
    messages = []
    for n in range(count):
        if rnd.random() < 0.45:
            messages.append(rnd.choice(NOISE))
            continue
        year = rnd.randint(1960, 2005)
        values = {
            "name": f"{rnd.choice(FIRST)} {rnd.choice(LAST)}",
            "zname": rnd.choice(ZH_SURNAMES) + "".join(rnd.sample(ZH_GIVEN, rnd.choice((1, 2)))),
            "phone": f"1{rnd.choice('3456789')}{rnd.randint(0, 999_999_999):09d}",
            "email": f"{rnd.choice(FIRST).lower()}.{n}{rnd.randint(0, 9999)}@{rnd.choice(PROJECTS)}.example.com",
            "n": rnd.randint(10, 9_999_999),
            "date": f"{year}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
            "year": year,
            "month": rnd.randint(1, 12),
            "day": rnd.randint(1, 28),
            "thing": rnd.choice(THINGS),
            "zthing": rnd.choice(ZH_THINGS),
            "project": f"{rnd.choice(PROJECTS)}-{n}",
        }
        template = rnd.choice(FACTS_ZH if rnd.random() < 0.5 else FACTS_EN)
        messages.append(template.format(**values))
    return messages


SUBJECTS = ("The weekly sync", "Our design review", "The offsite", "The hiring panel", "The release retro")
SUBJECTS += ("The budget meeting", "The onboarding session", "The team lunch")
ENDINGS = (
    "moved to the bigger room on the third floor.",
    "went smoothly and everyone liked the new layout.",
    "ran long because the projector kept failing.",
    "will happen in the garden when the weather is nice.",
    "felt calmer after we dropped the slide deck.",
    "needs a better agenda than last time.",
)
SUBJECTS_ZH = ("团队周会", "设计评审", "季度复盘", "新人培训", "部门聚餐", "预算会议")
ENDINGS_ZH = (
    "挪到了三楼的大会议室。",
    "进行得很顺利,大家都喜欢新的布局。",
    "因为投影仪坏了拖了很久。",
    "下次要准备更好的议程。",
)


def neutral_messages(count: int, seed: int) -> list[str]:
    """`count` distinct messages that pass the salience gate and hold no L0 fact, so only L1 can answer."""
    candidates = [f"{s} {e}" for s in SUBJECTS for e in ENDINGS] + [f"{s}{e}" for s in SUBJECTS_ZH for e in ENDINGS_ZH]
    random.Random(f"neutral:{seed}").shuffle(candidates)
    chosen = [t for t in candidates if salience(t) is None and not l0_extract(t)]
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} neutral messages pass the gate with no L0 fact; asked for {count}")
    return chosen[:count]


def store_transcripts(groups: list[list[str]], label: str) -> list[Transcript]:
    """One transcript per group of user messages, each followed by a short assistant reply."""
    transcripts = []
    for number, texts in enumerate(groups):
        messages = []
        for text in texts:
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
        report = ingest({"scope": f"user:{label}-{number}", "messages": messages})
        transcripts.append(report.transcript)
    return transcripts


def chunks(items: list, size: int) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# --- 1. L0 throughput ------------------------------------------------------------------------------


def l0_rules(messages: list[str]) -> tuple[float, int]:
    """Seconds for the L0 rules alone over `messages`, and the facts they found."""
    found = 0
    started = time.perf_counter()
    for text in messages:
        if salience(text) is not None:
            continue
        for fact in l0_extract(text):
            if tool_guard(fact.text) is None:
                found += 1
    return time.perf_counter() - started, found


def measure_l0(args: argparse.Namespace) -> None:
    messages = l0_corpus(args.messages, args.seed)
    l0_rules(messages[:200])  # warm-up: compiled patterns, caches
    rule_runs = [l0_rules(messages) for _ in range(args.repeat)]
    found = rule_runs[0][1]

    transcripts = store_transcripts(chunks(messages, args.per_transcript), "l0")
    counts = {"added": 0, "merged": 0, "skipped": 0}
    per_transcript: list[float] = []  # user messages/s of each transcript's extraction
    # The index sync each write queues after commit is not sent: no worker consumes it here.
    with mock.patch("searchindex.tasks.sync_index.delay"):
        started = time.perf_counter()
        for transcript, texts in zip(transcripts, chunks(messages, args.per_transcript), strict=True):
            t0 = time.perf_counter()
            report = extract(transcript, actor="bench", l1="off")
            per_transcript.append(len(texts) / (time.perf_counter() - t0))
            for action, count in report.counts.items():
                counts[action] += count
        end_to_end = time.perf_counter() - started

    rules_rates = [len(messages) / seconds for seconds, _ in rule_runs]
    rules_rate = statistics.median(rules_rates)
    e2e_rate = len(messages) / end_to_end
    print(
        f"\n## L0 throughput: {len(messages)} user messages (seed {args.seed}), "
        f"{len(transcripts)} transcripts of {args.per_transcript}, user messages/s\n"
    )
    print(f"| {'path':<58} | {'msg/s':>14} | {'p5':>10} | {'ratio to L0 rules':>17} |")
    print(f"|{'-' * 60}|{'-' * 15}:|{'-' * 11}:|{'-' * 18}:|")
    slowest = sorted(rules_rates)[max(0, round(0.05 * (len(rules_rates) - 1)))]
    print(
        f"| {f'L0 rules alone: salience + l0_extract + tool_guard (x{args.repeat})':<58} | "
        f"{rules_rate:14,.0f} | {slowest:10,.0f} | {'1.00x':>17} |"
    )
    e2e_low = sorted(per_transcript)[max(0, round(0.05 * (len(per_transcript) - 1)))]
    print(
        f"| {'extract() in-process, l1=off, semantic dedup off':<58} | {e2e_rate:14,.0f} | "
        f"{e2e_low:10,.0f} | {e2e_rate / rules_rate:16.3f}x |"
    )
    print(
        f"\nL0 rules found {found} facts in {len(messages)} messages; extract() over the whole corpus took "
        f"{end_to_end:.1f} s: added {counts['added']}, merged {counts['merged']}, skipped {counts['skipped']}. "
        "L0 rules: median and p5 of the repetitions; extract(): the whole corpus, and p5 of its transcripts' rates."
    )
    # Part 2's workers start with an index repair: leave them no memories to index.
    MemoryEvent.objects.all().delete()
    IndexOutbox.objects.all().delete()
    Memory.objects.all().delete()


# --- 2. orchestration with a slow LLM endpoint -----------------------------------------------------


def start_worker(env: dict, concurrency: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", str(concurrency)]
        + ["--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_worker(worker: subprocess.Popen) -> None:
    worker.terminate()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def wait_for_runs(runs: list[TaskRun], worker: subprocess.Popen, timeout: float) -> float:
    """Block until every run succeeded; the time.perf_counter() at which that was seen."""
    ids = [run.pk for run in runs]
    deadline = time.monotonic() + timeout
    while True:
        statuses = list(TaskRun.objects.filter(pk__in=ids).values_list("status", flat=True))
        if statuses.count(TaskRun.Status.SUCCEEDED) == len(ids):
            return time.perf_counter()
        if TaskRun.Status.FAILED in statuses:
            errors = list(
                TaskRun.objects.filter(pk__in=ids, status=TaskRun.Status.FAILED).values_list("error", flat=True)
            )
            raise SystemExit(f"an extraction task failed: {errors[:1]}")
        if worker.poll() is not None:
            raise SystemExit(f"the worker died: {worker.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {statuses.count(TaskRun.Status.SUCCEEDED)} of {len(ids)} runs succeeded")
        time.sleep(POLL)


def worker_run(env: dict, concurrency: int, groups: list[list[str]], label: str, warmup: list[str]) -> dict:
    """Wall time of a worker extracting `groups`, queued while it is up and idle."""
    transcripts = store_transcripts(groups, label)
    warm = store_transcripts([[text] for text in warmup[:concurrency]], f"{label}-warmup")
    worker = start_worker(env, concurrency)
    try:
        # Ready and warm: one extraction per pool process (imports, the LLM client, connections).
        wait_for_runs([enqueue_extraction(t, actor="bench", l1="auto") for t in warm], worker, timeout=180)
        time.sleep(1.0)  # let the start-up index repair and the warm-up's acks settle
        started = time.perf_counter()
        runs = [enqueue_extraction(t, actor="bench", l1="auto") for t in transcripts]
        queued = time.perf_counter() - started
        finished = wait_for_runs(runs, worker, timeout=600)
    finally:
        stop_worker(worker)
    runs = list(TaskRun.objects.filter(pk__in=[r.pk for r in runs]))
    task_seconds = [(r.finished_at - r.started_at).total_seconds() for r in runs if r.started_at and r.finished_at]
    l1_calls = sum(len(r.result.get("skipped", [])) for r in runs)
    return {"wall": finished - started, "queued": queued, "task_seconds": task_seconds, "l1_calls": l1_calls}


def measure_workers(args: argparse.Namespace) -> None:
    delay = args.llm_ms / 1000
    neutral = neutral_messages(args.transcripts * args.per_run + 2, args.seed)
    groups = chunks(neutral[: args.transcripts * args.per_run], args.per_run)
    warmup = neutral[-2:]
    calls = args.transcripts * args.per_run

    def slow_empty_answer(_body: dict) -> str:
        time.sleep(delay)
        return json.dumps({"memories": []})

    with FakeOpenAIServer() as server:
        server.chat_reply = slow_empty_answer
        llm = {"MEMORYUI_LLM_BASE_URL": server.base_url, "MEMORYUI_LLM_MODEL": "stub"}
        # Baseline: the same extractions in this process, one after the other.
        baseline_transcripts = store_transcripts(groups, "inprocess")
        warm = store_transcripts([[warmup[0]]], "inprocess-warmup")
        with override_settings(**llm):
            extract(warm[0], actor="bench", l1="auto")  # the openai import and client, outside the clock
            started = time.perf_counter()
            reports = [extract(t, actor="bench", l1="auto") for t in baseline_transcripts]
            in_process = time.perf_counter() - started
        reasons = {o.reason for r in reports for o in r.outcomes}
        if reasons != {"no durable fact found (L0, L1)"}:
            raise SystemExit(f"expected one empty L1 answer per message, got outcomes {reasons}")

        env = {**os.environ, **llm}
        one = worker_run(env, 1, groups, "worker1", warmup)
        two = worker_run(env, 2, groups, "worker2", warmup)

    broker = os.environ.get("CELERY_BROKER_URL") or "embedded SQLite"
    floor = calls * delay
    print(
        f"\n## Orchestration: {args.transcripts} transcripts x {args.per_run} user messages = {calls} L1 calls, "
        f"fake LLM endpoint at {args.llm_ms} ms per call, broker {broker}; seconds\n"
    )
    print(
        f"| {'how':<40} | {'wall':>7} | {'vs in-process':>13} | {'vs 1 worker':>11} | "
        f"{'task p50':>8} | {'task p95':>8} | {'enqueue':>7} |"
    )
    print(f"|{'-' * 42}|{'-' * 8}:|{'-' * 14}:|{'-' * 12}:|{'-' * 9}:|{'-' * 9}:|{'-' * 8}:|")
    print(
        f"| {f'floor: {calls} x {args.llm_ms} ms':<40} | {floor:7.2f} | {floor / in_process - 1:+13.1%} | "
        f"{'—':>11} | {'':>8} | {'':>8} | {'':>7} |"
    )
    print(
        f"| {'in-process, sequential extract()':<40} | {in_process:7.2f} | {'—':>13} | {'—':>11} | "
        f"{'':>8} | {'':>8} | {'':>7} |"
    )
    for label, result in (("1 worker (--concurrency 1)", one), ("2 workers (--concurrency 2)", two)):
        tasks = result["task_seconds"]
        print(
            f"| {label:<40} | {result['wall']:7.2f} | {result['wall'] / in_process - 1:+13.1%} | "
            f"{one['wall'] / result['wall']:10.2f}x | {statistics.median(tasks):8.2f} | {p95(tasks):8.2f} | "
            f"{result['queued']:7.3f} |"
        )
    print(
        "\ntask p50/p95: each TaskRun's started_at to finished_at; enqueue: creating the TaskRuns and "
        f"sending the tasks. L1 calls answered: in-process {calls}, 1 worker {one['l1_calls']}, "
        f"2 workers {two['l1_calls']}."
    )
    overhead = one["wall"] / in_process - 1
    speedup = one["wall"] / two["wall"]
    print(
        f"\ntarget: one worker {one['wall']:.2f} s = in-process {in_process:.2f} s {overhead:+.1%}; "
        f"overhead <= {TARGET_OVERHEAD:.0%}: {'met' if overhead <= TARGET_OVERHEAD else 'NOT met'}"
    )
    print(
        f"target: two workers {two['wall']:.2f} s, {speedup:.2f}x one worker; >= {TARGET_SPEEDUP}x: "
        f"{'met' if speedup >= TARGET_SPEEDUP else 'NOT met'}"
    )


def main() -> None:
    args = ARGS
    call_command("migrate", verbosity=0)
    if not args.skip_l0:
        measure_l0(args)
    if not args.skip_workers:
        measure_workers(args)


if __name__ == "__main__":
    main()
