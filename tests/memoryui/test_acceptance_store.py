"""The foundation's acceptance checks, end to end: the polluted store through the API, and an
export → import into a fresh database → export round trip through the real command line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from memoryui import rules

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_polluted_store_is_recreated_faithfully_as_the_stats_api_reports_it(client, agent_token):
    call_command("seed_demo", "--polluted", stdout=io.StringIO())
    auth = {"Authorization": f"Bearer {agent_token}"}

    stats = client.get("/api/stats/", headers=auth).json()
    assert stats == {
        "total": 85,
        "by_kind": {kind: 85 if kind == "note" else 0 for kind in rules.KINDS},
        "by_tier": {"core": 0, "working": 85, "peripheral": 0},
        "by_scope": {"agent:main": 81, "agent:test-w": 4},
        "pinned": 0,
        "tombstoned": 0,
    }
    narrowed = client.get("/api/stats/?scope=agent:main", headers=auth).json()
    assert (narrowed["total"], narrowed["by_scope"]) == (81, {"agent:main": 81})

    anonymous = client.get("/api/stats/")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"


def manage(data_dir: Path, *args: str) -> dict:
    """Run `manage.py` as a user would, against its own data dir (its own SQLite file)."""
    env = {**os.environ, "MEMORYUI_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args else {}


@pytest.mark.e2e
@pytest.mark.own_database
def test_export_import_into_an_empty_database_and_export_again_gives_identical_files(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    manage(source, "migrate", "-v0")
    assert manage(source, "seed_demo", "--json")["created"] > 40
    assert manage(source, "seed_demo", "--polluted", "--json") == {"created": 85}
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    exported = manage(source, "export_memories", str(first), "--include-tombstoned", "--json")["exported"]

    manage(target, "migrate", "-v0")
    report = manage(target, "import_memories", str(first), "--json")
    assert (report["imported"], report["errors"]) == (exported, [])
    manage(target, "export_memories", str(second), "--include-tombstoned", "--json")

    assert second.read_bytes() == first.read_bytes()
    assert len(first.read_bytes().splitlines()) == exported
