"""A real Celery worker keeps the indexes in step with the database, on the embedded SQLite
broker, on the Redis at 127.0.0.1:6379 and on the RabbitMQ at 127.0.0.1:5672. Everything
runs as a user runs it: manage.py and `celery worker` processes sharing one data dir."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.own_database]


def _environment(data_dir: Path, broker: str | None) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        MEMORYUI_DATA_DIR=str(data_dir),
        CELERY_TASK_DEFAULT_QUEUE=f"memoryui-test-{uuid.uuid4().hex[:8]}",
        CELERY_TASK_ALWAYS_EAGER="0",
    )
    if broker:
        env["CELERY_BROKER_URL"] = broker
    return env


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@contextmanager
def running_worker(env: dict, concurrency: int = 1, *extra: str):
    """A `celery worker` process on the test's data dir and broker, stopped however the test ends."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", str(concurrency)]
        + ["--loglevel", "WARNING", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


def _pending(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM memoryui_indexoutbox").fetchone()[0]


def _wait_until_synced(data_dir: Path, worker: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while _pending(data_dir):
        assert worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"{_pending(data_dir)} index updates still pending"
        time.sleep(0.3)


@pytest.mark.parametrize(
    "broker",
    [None, "redis://127.0.0.1:6379/0", "amqp://guest:guest@127.0.0.1:5672//"],
    ids=["embedded-sqlite-broker", "redis", "rabbitmq"],
)
def test_a_worker_indexes_new_memories_and_drops_tombstoned_ones(tmp_path, broker):
    env = _environment(tmp_path, broker)
    _manage(env, "migrate", "-v0")
    with running_worker(env) as worker:
        lines = [
            {"scope": "agent:main", "kind": "fact", "text": "Runs 1000 RTX 4070s in an IDC."},
            {
                "scope": "agent:main",
                "kind": "entity",
                "text": "Phone is 18600000000.",
                "entity_key": "phone:18600000000",
            },
            {"scope": "agent:main", "kind": "preference", "text": "Prefers terse answers without recaps."},
        ]
        path = tmp_path / "store.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        assert json.loads(_manage(env, "import_memories", str(path), "--json"))["imported"] == 3
        _wait_until_synced(tmp_path, worker)
        report = json.loads(_manage(env, "reindex", "--verify", "--json"))
        assert [(d["index"], d["ok"], d["entries"]) for d in report["indexes"]] == [
            ("vector", True, 3),
            ("bm25", True, 3),
        ]

        _manage(
            env,
            "shell",
            "-c",
            "from memoryui.models import Memory; "
            "Memory.objects.get(entity_key='phone:18600000000').tombstone('wrong number', actor='test')",
        )
        _wait_until_synced(tmp_path, worker)
        report = json.loads(_manage(env, "reindex", "--verify", "--json"))
        assert [(d["ok"], d["entries"]) for d in report["indexes"]] == [(True, 2), (True, 2)]
