"""The Redis broker goes away, and comes back, under `make run`'s processes (the Procfile's web
server and both workers) on a Redis of the test's own: the API keeps accepting writes meanwhile,
a task that waited in a queue when Redis stopped runs once it is back, and the index updates of
memories written while it was away reach the indexes without restarting anything (the database
outbox keeps them, the schedule's sweep sends them). A broker that hangs instead of stopping
delays a write by seconds, never for ever."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.services import Api, PrivateRedis, free_port, prepare_store
from tests.integration.test_index_queue import procfile_processes
from tests.integration.test_worker_index_sync import _environment, _manage

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

STALL_SECONDS = 6.0  # the LLM's answer to each turn of the long extraction
SWEEP_SECONDS = 2  # the outbox sweep's schedule, and how long a row waits before it is swept
STARTUP_REPAIRS = "SELECT COUNT(*) FROM memoryui_indexcheck WHERE actor = 'worker start' AND finished_at IS NOT NULL"
SENT_WITHIN = 15.0  # seconds a write may wait for a broker that hangs (3 s per exchange, a few of them)


def _rows(data_dir: Path, sql: str, params: tuple = ()) -> list:
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute(sql, params).fetchall()


def _wait(condition, what: str, processes: dict, logs: Path, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        for name, process in processes.items():
            assert process.poll() is None, f"{name} died:\n{(logs / f'{name}.log').read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def _task_status(data_dir: Path, task_id: str) -> str:
    rows = _rows(data_dir, "SELECT status FROM memoryui_taskrun WHERE id = ?", (uuid.UUID(task_id).hex,))
    return rows[0][0] if rows else "none"


def _transcript(n: int) -> dict:
    """A conversation the agent calls `n` (posting it again adds nothing); nothing in its turns
    for L0, so each goes to the LLM, which takes its time."""
    messages = []
    for week in range(2):
        messages += [{"role": "user", "content": f"我们第{week}周要把第{n}号支付服务迁到新机房,负责人是王芳"},
                     {"role": "assistant", "content": "好的"}]  # fmt: skip
    return {"id": str(uuid.UUID(int=n)), "scope": "agent:main", "messages": messages}


def _environment_on(data_dir: Path, broker: PrivateRedis) -> dict:
    env = _environment(data_dir, broker.url)
    env.update(
        PORT=str(free_port()),
        MEMORYUI_API_RATE="off",
        # Dedup layer 3 would embed every write in the web server: not what is tested here.
        MEMORYUI_SEMANTIC_DEDUP_THRESHOLD="off",
        MEMORYUI_INDEX_SWEEP_SECONDS=str(SWEEP_SECONDS),
    )
    return env


def test_a_broker_restart_loses_no_task_and_no_index_update_and_writes_go_on(tmp_path):
    with PrivateRedis(tmp_path / "redis") as broker, FakeOpenAIServer(stall_seconds=STALL_SECONDS) as llm:
        env = _environment_on(tmp_path, broker)
        env.update(MEMORYUI_LLM_BASE_URL=llm.base_url, MEMORYUI_LLM_MODEL="fake", MEMORYUI_L1_TIMEOUT_MS="60000")
        bulk_queue = f"{env['CELERY_TASK_DEFAULT_QUEUE']}.bulk"
        api = Api(int(env["PORT"]), prepare_store(env))
        pending = lambda: _rows(tmp_path, "SELECT memory_id FROM memoryui_indexoutbox")  # noqa: E731
        with procfile_processes(["web", "index", "bulk"], env, tmp_path) as processes:
            api.wait_until_serving(processes, tmp_path)
            assert api.write_memory("Warm-up: the index worker has loaded its embedder.").status == 201
            _wait(lambda: not pending(), "the warm-up write to be indexed", processes, tmp_path, timeout=120)
            started = lambda: _rows(tmp_path, STARTUP_REPAIRS) == [(2,)]  # noqa: E731
            _wait(started, "the repair each worker runs when it starts", processes, tmp_path)

            # The bulk worker busy with a long extraction, another one waiting in Redis behind it.
            llm.mode = "stall"
            first = api.call("POST", "/api/transcripts/?extract=true", _transcript(1))
            assert first.status == 201, first.raw
            running = lambda: _task_status(tmp_path, first.body["task_id"]) == "running"  # noqa: E731
            _wait(running, "the first extraction to start", processes, tmp_path)
            second = api.call("POST", "/api/transcripts/?extract=true", _transcript(2))
            assert second.status == 201, second.raw
            assert broker.queue_length(bulk_queue) == 1

            broker.stop()
            outage = [api.write_memory(f"Written while the broker was away: locker K{n:03d}.") for n in range(5)]
            assert [a.status for a in outage] == [201] * 5, [a.raw for a in outage]
            assert max(a.finished - a.started for a in outage) < SENT_WITHIN
            written = {uuid.UUID(a.body["id"]).hex for a in outage}
            assert written <= {memory_id for (memory_id,) in pending()}  # kept in the outbox
            # A write that asks for a task: stored, and the client told that its task is not queued.
            third = api.call("POST", "/api/transcripts/?extract=true", _transcript(3))
            assert (third.status, third.error_code) == (503, "backend_unavailable"), third.raw
            assert third.body["error"]["details"]["backend"] == "broker", third.raw
            assert running()
            broker.start()
            # The waiting extraction survived the restart (the append-only file), still queued.
            assert broker.queue_length(bulk_queue) == 1

            llm.mode = "good"
            third = api.call("POST", "/api/transcripts/?extract=true", _transcript(3))  # asked again
            assert third.status == 200, third.raw  # the transcript was stored the first time
            for task in (first, second, third):
                done = lambda task=task: _task_status(tmp_path, task.body["task_id"]) == "succeeded"  # noqa: E731
                _wait(done, f"extraction {task.body['task_id']} to succeed", processes, tmp_path)
            _wait(lambda: not pending(), "the writes of the outage to be indexed", processes, tmp_path)
            # No worker started again (its start would have repaired the indexes): the sweep did it.
            assert started()

            after = api.write_memory("Written once the broker was back: locker K999.")
            assert after.status == 201, after.raw
            _wait(lambda: not pending(), "a write after the outage to be indexed", processes, tmp_path)
            found = api.call("GET", "/api/search/?q=K003&scope=agent:main&retriever=bm25")
            assert [r["text"] for r in found.body["results"]] == ["Written while the broker was away: locker K003."]
            report = json.loads(_manage(env, "reindex", "--verify", "--json"))
            assert [(i["index"], i["ok"], i["entries"]) for i in report["indexes"]] == [
                ("vector", True, 7),
                ("bm25", True, 7),
            ]


def test_a_hung_broker_delays_a_write_by_seconds_not_for_ever(tmp_path):
    with PrivateRedis(tmp_path / "redis") as broker:
        env = _environment_on(tmp_path, broker)
        index_queue = f"{env['CELERY_TASK_DEFAULT_QUEUE']}.index"
        api = Api(int(env["PORT"]), prepare_store(env), timeout=30)
        with procfile_processes(["web"], env, tmp_path) as processes:  # no worker: tasks stay queued
            api.wait_until_serving(processes, tmp_path)
            assert api.write_memory("Before the broker hung.").status == 201
            assert broker.queue_length(index_queue) == 1

            broker.freeze()  # connections stay open, nothing answers
            hung = api.write_memory("While the broker hung.")
            broker.thaw()
            print(f"a write waited {hung.finished - hung.started:.1f} s for the hung broker")
            assert hung.status == 201, hung.raw
            assert hung.finished - hung.started < SENT_WITHIN
            assert _rows(tmp_path, "SELECT COUNT(*) FROM memoryui_indexoutbox") == [(2,)]  # its index work kept

            # The same server sends again once the broker answers.
            queued = broker.queue_length(index_queue)
            assert api.write_memory("After the broker answered again.").status == 201
            assert broker.queue_length(index_queue) == queued + 1
