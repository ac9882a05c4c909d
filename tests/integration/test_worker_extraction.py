"""Extraction in a real Celery worker, on the embedded SQLite broker and on the Redis at
127.0.0.1:6379: the task records its progress in a TaskRun, and a worker process killed in the
middle of an extraction is replaced, the task redelivered, and the store ends with every memory
once: no duplicate, none missing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from config.supervise import children_of
from tests.integration.test_worker_index_sync import _environment, _manage, running_worker

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

FACTS = 40


def _query(data_dir: Path, sql: str):
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute(sql).fetchall()


def _task(data_dir: Path) -> tuple[str, int, int, int]:
    rows = _query(data_dir, "SELECT status, progress_done, progress_total, attempts FROM memoryui_taskrun")
    return rows[0] if rows else ("none", 0, 0, 0)


def _wait(condition, worker: subprocess.Popen, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert worker.poll() is None, f"the worker died: {worker.stderr.read()[-2000:] if worker.stderr else ''}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("broker", [None, "redis://127.0.0.1:6379/0"], ids=["embedded-sqlite-broker", "redis"])
def test_a_worker_killed_mid_extraction_leaves_no_duplicate_and_no_gap(tmp_path, broker):
    env = _environment(tmp_path, broker)
    _manage(env, "migrate", "-v0")
    messages = []
    for n in range(FACTS):
        messages += [
            {"role": "user", "content": f"/remember build server {n} lives in rack R{n:03d} of the Dongguan IDC"},
            {"role": "assistant", "content": "Noted."},
        ]
    path = tmp_path / "transcript.json"
    path.write_text(json.dumps({"scope": "agent:main", "messages": messages}), encoding="utf-8")
    with running_worker(env) as worker:
        queued = json.loads(_manage(env, "extract", str(path), "--background", "--json"))
        assert queued["status"] == "queued"
        # Kill the pool process doing the work once a few messages are done.
        _wait(lambda: _task(tmp_path)[1] >= 3, worker, "the extraction to start")
        [child] = _wait(lambda: children_of(worker.pid), worker, "the pool process")
        os.kill(child, signal.SIGKILL)
        status, done, total, attempts = _wait(
            lambda: (task := _task(tmp_path))[0] in ("succeeded", "failed") and task, worker, "the task to finish"
        )
        assert (status, done, total) == ("succeeded", FACTS, FACTS)
        assert attempts == 2  # the redelivered run
        texts = [row[0] for row in _query(tmp_path, "SELECT text FROM memoryui_memory WHERE status = 'active'")]
        assert len(texts) == len(set(texts)) == FACTS
        assert _query(tmp_path, "SELECT MAX(access_count) FROM memoryui_memory") == [(0,)]  # nothing merged twice
        assert _query(tmp_path, "SELECT COUNT(*) FROM memoryui_memoryevent WHERE action = 'merged'") == [(0,)]
