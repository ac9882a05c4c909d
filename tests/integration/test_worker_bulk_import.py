"""A bulk import in the background through a real Celery worker: the rows are searchable by
keyword when the command returns, and by vector once its embedding task has finished."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from tests.integration.test_worker_index_sync import _environment, _manage, running_worker

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

COUNT = 300


def _run(data_dir, task: str) -> tuple[str, int, int]:
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute(
            "SELECT status, progress_done, progress_total FROM memoryui_taskrun WHERE id = ?", (task.replace("-", ""),)
        ).fetchone()


def _error(data_dir, task: str) -> str:
    """What a failed run said, to show beside the assertion."""
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        row = db.execute("SELECT error, counts FROM memoryui_taskrun WHERE id = ?", (task.replace("-", ""),)).fetchone()
    return f"error: {row[0]!r}, counts: {row[1]}"


def test_a_background_import_is_embedded_by_the_workers(tmp_path):
    env = _environment(tmp_path, None)
    _manage(env, "migrate", "-v0")
    path = tmp_path / "store.jsonl"
    path.write_text(
        "".join(
            json.dumps({"scope": "agent:main", "kind": "fact", "text": f"Server number {n} reboots at {n % 24}:15."})
            + "\n"
            for n in range(COUNT)
        ),
        encoding="utf-8",
    )
    with running_worker(env, 2) as worker:
        report = json.loads(_manage(env, "import_memories", str(path), "--background", "--json"))
        assert report["imported"] == COUNT and report["bm25_searchable"] is True
        deadline = time.monotonic() + 240
        while (state := _run(tmp_path, report["task"]))[0] not in ("succeeded", "failed"):
            assert worker.poll() is None, "the worker died"
            assert time.monotonic() < deadline, f"the embedding task is still {state}"
            time.sleep(0.5)
        assert state == ("succeeded", COUNT, COUNT), _error(tmp_path, report["task"])
    verified = json.loads(_manage(env, "reindex", "--verify", "--json"))
    assert [(d["index"], d["ok"], d["entries"]) for d in verified["indexes"]] == [
        ("vector", True, COUNT),
        ("bm25", True, COUNT),
    ]
    with sqlite3.connect(tmp_path / "memoryui.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM memoryui_indexoutbox").fetchone()[0] == 0
