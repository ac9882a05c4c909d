"""A process refuses to start on a database that holds no store (a mistyped MEMORYUI_DATA_DIR),
naming the database and `migrate`, instead of failing later with "no such table"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.readiness import COMMANDS_WITHOUT_STORE, command_needs_store

ROOT = Path(__file__).resolve().parents[2]


def run(data_dir: Path, *args: str, module: str = "manage.py") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_", "DATABASE_"))}
    command = [sys.executable, module, *args] if module == "manage.py" else [sys.executable, "-c", module]
    return subprocess.run(
        command,
        cwd=ROOT,
        env=env | {"MEMORYUI_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_command_on_a_directory_without_a_store_names_it_and_migrate(tmp_path):
    typo = tmp_path / "mistyped"
    done = run(typo, "search", "phone", "--scope", "agent:main")
    assert done.returncode == 1
    assert f"no memoryui store at {typo / 'memoryui.sqlite3'}" in done.stderr
    assert f"MEMORYUI_DATA_DIR is {typo}" in done.stderr and "manage.py migrate" in done.stderr
    assert "no such table" not in done.stderr and "Traceback" not in done.stderr

    as_json = run(typo, "recall", "phone", "--scope", "agent:main", "--json")
    assert as_json.returncode == 1 and "no memoryui store" in json.loads(as_json.stdout)["error"]


def test_after_migrate_the_same_command_runs(tmp_path):
    assert run(tmp_path, "migrate", "-v0").returncode == 0, "migrate runs without a store: it makes one"
    done = run(tmp_path, "search", "phone", "--scope", "agent:main", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"] == []


def test_the_dashboard_does_not_start_without_a_store(tmp_path):
    done = run(tmp_path, module="import config.wsgi")
    assert done.returncode != 0
    assert "StoreMissing" in done.stderr and "no memoryui store" in done.stderr


@pytest.mark.parametrize(
    "argv", [["manage.py"], ["manage.py", "--help"], ["manage.py", "check"], ["manage.py", "help"]]
)
def test_commands_that_make_or_inspect_a_store_run_without_one(argv):
    assert not command_needs_store(argv)
    assert {"migrate", "bootstrap", "makemigrations", "shell"} <= COMMANDS_WITHOUT_STORE


@pytest.mark.parametrize("name", ["mcp", "search", "recall", "import_memories", "runserver", "seed_demo", "reindex"])
def test_commands_that_read_or_write_memories_need_one(name):
    assert command_needs_store(["manage.py", name, "--json"])
