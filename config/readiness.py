"""Whether the configured database holds a memoryui store, checked where a process starts.

A mistyped MEMORYUI_DATA_DIR (or DATABASE_URL) points at a directory with no store in it: the
dashboard, the workers and every command that reads memories would start on an empty database and
fail later with "no such table". They refuse at start instead, naming the database and the way out
(`migrate`, which `make run` runs). The commands that make or inspect a store, and the ones that
never touch it, run without one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.recorder import MigrationRecorder
from django.db.utils import DatabaseError

# Commands that create, migrate or inspect the database, or never read the store.
COMMANDS_WITHOUT_STORE = frozenset(
    {
        "bootstrap",
        "check",
        "collectstatic",
        "compilemessages",
        "createcachetable",
        "dbshell",
        "diffsettings",
        "findstatic",
        "flush",
        "help",
        "inspectdb",
        "makemessages",
        "makemigrations",
        "migrate",
        "optimizemigration",
        "sendtestemail",
        "shell",
        "showmigrations",
        "sqlflush",
        "sqlmigrate",
        "sqlsequencereset",
        "squashmigrations",
        "startapp",
        "startproject",
        "test",
        "version",
    }
)


class StoreMissing(RuntimeError):
    """The configured database holds no memoryui store; the message says which and what to do."""


def store_problem(alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """Why the database `alias` is not a migrated memoryui store, or None when it is."""
    connection = connections[alias]
    where = _describe(connection.settings_dict)
    if connection.vendor == "sqlite" and not _sqlite_file_has_data(connection.settings_dict["NAME"]):
        return f"no memoryui store at {where}: {_way_out(connection.vendor)}"
    try:
        recorder = MigrationRecorder(connection)
        applied = recorder.has_table() and any(app == "memoryui" for app, _ in recorder.applied_migrations())
    except DatabaseError as exc:
        return f"cannot read the database at {where} ({exc}): check DATABASE_URL"
    if not applied:
        return f"the database at {where} holds no memoryui store (no migrations applied): {_way_out(connection.vendor)}"
    return None


def require_store(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Raise StoreMissing unless the database is a migrated memoryui store."""
    problem = store_problem(alias)
    if problem:
        raise StoreMissing(problem)


def command_needs_store(argv: list[str]) -> bool:
    """Whether `manage.py` with `argv` runs a command that reads or writes the store."""
    name = argv[1] if len(argv) > 1 else ""
    return bool(name) and not name.startswith("-") and name not in COMMANDS_WITHOUT_STORE


def refuse_command_without_store(argv: list[str]) -> None:
    """Exit with the reason (as the JSON error document too, with --json) before a command that needs
    the store runs on a database that does not hold one."""
    if not command_needs_store(argv):
        return
    problem = store_problem()
    if problem is None:
        return
    if "--json" in argv:
        sys.stdout.write(json.dumps({"error": problem}) + "\n")
    sys.stderr.write(f"CommandError: {problem}\n")
    raise SystemExit(1)


def _sqlite_file_has_data(name) -> bool:
    path = Path(str(name))
    return path.is_file() and path.stat().st_size > 0


def _describe(settings_dict: dict) -> str:
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return str(settings_dict["NAME"])
    host = settings_dict.get("HOST") or "localhost"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"{settings_dict.get('NAME')} on {host}{port}"


def _way_out(vendor: str) -> str:
    where = (
        f"MEMORYUI_DATA_DIR is {settings.DATA_DIR}; point it at the directory that holds your store"
        if vendor == "sqlite"
        else "check DATABASE_URL"
    )
    return f"{where}, or create a store there with `python manage.py migrate` (`make run` does it)"
