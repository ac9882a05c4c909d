"""Private data files, the page a locked-out sign-in gets, and query strings no text can hold.

Data files: the data dir holds every memory (SQLite database, broker queue, indexes, caches) and
the secret key, so it and everything in it is private: directories 0700, files 0600. Most of those
files are not written by memoryui but by the libraries it uses, at any time and in any process:
chromadb (its `chroma.sqlite3`, which holds every memory's text, and its segment files, written by
Rust and C++ code), whoosh (a new segment at each commit), jieba's cache, the broker. Each creates
its files with the usual modes, 0644 and 0755 under the common umask 022. So the process umask is
077 (`private_data_dir`): whoever creates a file, whenever, it is private from the first byte.
Fixing modes after each write instead would need a hook after every write of every library, and
would leave each new file readable by others until it ran. Files that already exist (an older
install) are tightened at start-up. SQLite creates a database's journals (`-wal`, `-shm`,
`-journal`) with the mode of the database file itself, so each database file is also made 0600
*before* SQLite or the Celery broker opens it (`private_sqlite_file`). Settings call both at
start-up, i.e. in every web, worker and command process.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render

from memoryui import untrusted
from memoryui.errors import error_body

SQLITE_JOURNALS = ("-wal", "-shm", "-journal")


PRIVATE_UMASK = 0o077


def private_data_dir(path: Path) -> None:
    """Make everything this process creates from now on private (umask 077: see the module's
    docstring), create the data dir if needed, and take from it and from everything in it the
    access of others (an older install; what someone else owns keeps its mode).

    The umask is the process's: a file it writes outside the data dir (an export) is 0600 as well,
    which suits what such a file holds (memories)."""
    os.umask(PRIVATE_UMASK)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path)
    for root, directories, files in os.walk(path):
        for name in (*directories, *files):
            _tighten(Path(root, name))


def _tighten(path: Path) -> None:
    """Take group's and others' permissions from a file or directory (never following a link)."""
    with contextlib.suppress(FileNotFoundError, PermissionError):  # gone meanwhile, or someone else's
        mode = path.lstat().st_mode
        if mode & PRIVATE_UMASK and not stat.S_ISLNK(mode):
            os.chmod(path, stat.S_IMODE(mode) & ~PRIVATE_UMASK)


def private_sqlite_file(path: Path) -> None:
    """Make a SQLite database file 0600 before SQLite opens it (so its journals are too)."""
    if not path.parent.is_dir():
        return  # a database somewhere we do not manage: SQLite reports the missing directory
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)  # an empty file is an empty database
    os.close(fd)
    for file in (path, *(path.with_name(path.name + suffix) for suffix in SQLITE_JOURNALS)):
        with contextlib.suppress(FileNotFoundError):  # journals come and go
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)


def sqlite_path_of_url(url: str) -> Path | None:
    """The file of a `sqlite:///…` or `sqla+sqlite:///…` URL, else None (a server, or in memory)."""
    for prefix in ("sqlite:///", "sqla+sqlite:///"):
        if url.startswith(prefix):
            name = url[len(prefix) :].split("?", 1)[0]
            return Path(name) if name and name != ":memory:" else None
    return None


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' answer to a locked-out sign-in: a page that says so and for how long (429)."""
    cooloff = settings.AXES_COOLOFF_TIME
    minutes = max(1, round(cooloff.total_seconds() / 60)) if cooloff else None
    context = {
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": minutes,
    }
    response = render(request, "axes/lockout.html", context, status=429)
    if cooloff:
        response["Retry-After"] = str(int(cooloff.total_seconds()))
    return response


class UnstorableQueryMiddleware:
    """A query parameter holding what no text can (a NUL, a lone surrogate) is a 400 naming it,
    before any view reads it: JSON under /api/ and /mcp/, a plain page elsewhere. The schema states it
    (api.schema: every text parameter matches `^[^\\x00]*$`)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        problems = {
            name: [f"{name} {problem}"]
            for name, values in request.GET.lists()
            for problem in [next(filter(None, map(untrusted.string_problem, [name, *values])), None)]
            if problem
        }
        if not problems:
            return self.get_response(request)
        message = "Invalid query parameters: " + ", ".join(problems) + "."
        if request.path.startswith(("/api/", "/mcp/")):
            return JsonResponse(error_body(400, message, problems), status=400)
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
