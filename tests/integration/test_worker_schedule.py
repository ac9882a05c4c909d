"""The decay schedule on the embedded setup: a worker started with --beat (as `make run` starts
it) sends the decay task on its own, with no server, and expired peripheral memories go."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.integration.test_worker_index_sync import _environment, _manage, running_worker

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]


def _rows(data_dir: Path, sql: str):
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute(sql).fetchall()


def test_the_embedded_worker_runs_decay_on_its_schedule(tmp_path):
    env = _environment(tmp_path, None)
    env["MEMORYUI_DECAY_INTERVAL_MINUTES"] = "0.02"  # every 1.2 s
    _manage(env, "migrate", "-v0")
    lines = [
        {"scope": "agent:main", "kind": "note", "tier": "peripheral", "text": "Asked for hotpot places once.",
         "expires_at": "2020-01-01T00:00:00Z"},
        {"scope": "agent:main", "kind": "note", "tier": "peripheral", "text": "Asked about the weather once.",
         "expires_at": "2999-01-01T00:00:00Z"},
    ]  # fmt: skip
    path = tmp_path / "store.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert json.loads(_manage(env, "import_memories", str(path), "--json"))["imported"] == 2

    with running_worker(env, 1, "--beat") as worker:
        deadline = time.monotonic() + 90
        while not _rows(tmp_path, "SELECT 1 FROM memoryui_taskrun WHERE kind = 'decay' AND status = 'succeeded'"):
            assert worker.poll() is None, worker.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "no scheduled decay run within 90 s"
            time.sleep(0.2)

    status = dict(_rows(tmp_path, "SELECT text, status FROM memoryui_memory"))
    assert status == {"Asked for hotpot places once.": "tombstoned", "Asked about the weather once.": "active"}
    assert _rows(tmp_path, "SELECT DISTINCT actor FROM memoryui_taskrun WHERE kind = 'decay'") == [("schedule",)]
    assert (tmp_path / "celerybeat-schedule").exists() or list(tmp_path.glob("celerybeat-schedule*"))
