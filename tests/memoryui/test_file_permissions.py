"""The data dir is private: 0700, and the SQLite database, its journals and the broker file 0600.

A fresh data dir is migrated and written to by `manage.py` in subprocesses under the usual umask
(022), the way `make run` and a worker would; the files are looked at while the database and a
broker write are still open, so the -wal, -shm and -journal files exist.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from memoryui import security

ROOT = Path(__file__).resolve().parents[2]

# Writes a memory (its index sync is queued in the broker file: no worker runs here), then, with
# the database connection still open and a broker write transaction open, lists every file's mode.
WRITE_AND_LIST = """
import json, sqlite3
from django.conf import settings
from django.db import connection
from ingest import writing

writing.write(actor="test", scope="agent:main", kind="fact", text="Runs 1000 RTX 4070s.", semantic=False)
connection.ensure_connection()
broker = sqlite3.connect(settings.DATA_DIR / "celery-broker.sqlite3", isolation_level=None)
broker.execute("BEGIN IMMEDIATE")
broker.execute("CREATE TABLE probe (x)")
files = {p.name: oct(p.stat().st_mode & 0o777) for p in settings.DATA_DIR.iterdir() if p.is_file()}
broker.execute("ROLLBACK")
print(json.dumps({"dir": oct(settings.DATA_DIR.stat().st_mode & 0o777), "files": files}))
"""


def manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_", "CELERY_", "DATABASE_"))}
    env |= {"MEMORYUI_DATA_DIR": str(data_dir), "MEMORYUI_SEMANTIC_DEDUP_THRESHOLD": "off"}
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_database_its_journals_and_the_broker_file_are_private_in_a_fresh_data_dir(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)  # as a person or an installer would create it

    manage(data_dir, "migrate", "--no-input", "-v", "0")
    shown = json.loads(manage(data_dir, "shell", "-c", WRITE_AND_LIST).stdout.strip().splitlines()[-1])

    assert shown["dir"] == "0o700"
    assert {
        "memoryui.sqlite3",
        "memoryui.sqlite3-wal",
        "memoryui.sqlite3-shm",
        "celery-broker.sqlite3",
        "celery-broker.sqlite3-journal",
        "secret_key",
    } <= set(shown["files"])
    assert {name: mode for name, mode in shown["files"].items() if mode != "0o600"} == {}


def test_an_older_install_is_tightened_journals_included(tmp_path):
    database = tmp_path / "memoryui.sqlite3"
    for name in ("memoryui.sqlite3", "memoryui.sqlite3-wal", "memoryui.sqlite3-shm"):
        (tmp_path / name).write_bytes(b"")
        (tmp_path / name).chmod(0o644)
    tmp_path.chmod(0o755)

    security.private_data_dir(tmp_path)
    security.private_sqlite_file(database)

    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {
        "memoryui.sqlite3": 0o600,
        "memoryui.sqlite3-wal": 0o600,
        "memoryui.sqlite3-shm": 0o600,
    }


def test_only_sqlite_urls_name_a_file_to_protect():
    assert security.sqlite_path_of_url("sqla+sqlite:////srv/var/broker.sqlite3") == Path("/srv/var/broker.sqlite3")
    assert security.sqlite_path_of_url("sqlite:////srv/var/db.sqlite3?mode=rw") == Path("/srv/var/db.sqlite3")
    assert security.sqlite_path_of_url("redis://127.0.0.1:6379/0") is None
    assert security.sqlite_path_of_url("sqlite:///:memory:") is None
