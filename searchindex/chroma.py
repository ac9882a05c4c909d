"""Opening chromadb for the vector index: an embedded directory shared by processes, or a server.

The embedded index (`chromadb.PersistentClient`) is shared by every process of the deployment
(web workers, the Celery worker), and chromadb keeps one in-process system per directory that
never notices another process's writes. `searchindex.vector` therefore holds `file_lock` around
each operation and, when `stamp` says the database file changed since this process last left it,
reloads chromadb (`Directory.reload`, which `evict_system`s the stale system).

A server (CHROMA_URL) is reached by `connect_server`, which bounds each step: chromadb's
HttpClient() makes three requests (identity, tenant, database) on an HTTP session with no timeout
at all while it is being constructed, so the first connect is guarded twice, by a heartbeat with
our timeouts (a dead, refusing or unreachable server fails there) and by constructing the client
in a thread that is waited for only so long (a server that accepts connections but never answers).

Every failure here surfaces as IndexUnavailable("vector", ...).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import chromadb
import httpx
from chromadb.api import ClientAPI
from chromadb.api.fastapi import FastAPI
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError

from searchindex.documents import IndexUnavailable

__all__ = [
    "LOCK_FILE",
    "Directory",
    "close_http_client",
    "connect_server",
    "directory",
    "evict_system",
    "file_lock",
    "http_sessions",
    "open_embedded",
    "reason",
    "stamp",
]

LOCK_FILE = "memoryui.lock"


def _settings() -> ChromaSettings:
    # Telemetry off: no background calls home from a machine that may be offline.
    return ChromaSettings(anonymized_telemetry=False)


# --- the embedded directory ---------------------------------------------------------------


@dataclass
class Directory:
    """What this process knows about one embedded index directory (shared by its VectorIndexes)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    stamp: tuple | None = None  # the database file as this process last left it
    generation: int = 0  # bumped when chromadb is reloaded: older clients are stale
    # Collection id → the write mark this process gave it since the generation began (each
    # VectorIndex keeps collection objects of its own, whose metadata holds the mark they were
    # opened with).
    marks: dict[str, str] = field(default_factory=dict)

    def reload(self, path: Path) -> None:
        """chromadb's state in this process is stale: drop it; every VectorIndex here reconnects."""
        evict_system(path)
        self.generation += 1
        self.marks.clear()


_directories: dict[str, Directory] = {}
_directories_lock = threading.Lock()


def directory(path: Path) -> Directory:
    """This process's record of the embedded index at `path`."""
    with _directories_lock:
        return _directories.setdefault(str(path), Directory())


def open_embedded(path: Path) -> ClientAPI:
    """chromadb's client of the embedded index at `path`."""
    try:
        return chromadb.PersistentClient(path=str(path), settings=_settings())
    except (ValueError, ChromaError, OSError) as exc:
        raise IndexUnavailable("vector", f"cannot open chromadb at {path}: {exc}") from exc


@contextmanager
def file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    """An advisory lock on the index directory, held across processes for one operation."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def stamp(path: Path) -> tuple | None:
    """Identity and last change of the chromadb database file; None if there is none."""
    try:
        stat = (path / "chroma.sqlite3").stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def evict_system(path: Path) -> None:
    """Stop and forget chromadb's in-process system for `path`, so the next client reloads it.

    chromadb shares one system per persist directory and keeps it while it lives; it never
    sees other processes' writes, nor that its directory was deleted (it would then read
    ghost entries and write into an unlinked file). Uses chromadb's private cache (chromadb
    is pinned; the tests cover it).
    """
    with SharedSystemClient._refcount_lock:
        system = SharedSystemClient._identifier_to_system.pop(str(path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        system.stop()


# --- a server ------------------------------------------------------------------------------


def connect_server(url: str, *, timeout: float, connect_timeout: float) -> ClientAPI:
    """A client of the chromadb server at `url` whose every request is bounded: `connect_timeout`
    seconds to connect, `timeout` for the request."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise IndexUnavailable("vector", f"CHROMA_URL {url!r} is not an http(s) URL")
    ssl = parts.scheme == "https"
    try:
        port = parts.port or (443 if ssl else 8000)  # 8000: chromadb's own default
    except ValueError as exc:
        raise IndexUnavailable("vector", f"CHROMA_URL {url!r}: {exc}") from exc
    chroma_settings = _settings()
    bounds = httpx.Timeout(timeout, connect=connect_timeout)
    api_url = FastAPI.resolve_url(
        chroma_server_host=parts.hostname,
        chroma_server_ssl_enabled=ssl,
        default_api_path=chroma_settings.chroma_server_api_default_path,
        chroma_server_http_port=port,
    )
    _heartbeat(url, api_url, bounds)
    client = _handshake(
        url,
        lambda: chromadb.HttpClient(host=parts.hostname, port=port, ssl=ssl, settings=chroma_settings),
        bounds,
    )
    # chromadb's HTTP sessions have no timeout at all: a stalled server would hang a recall
    # request forever.
    for session in http_sessions(client):
        session.timeout = bounds
    return client


def _heartbeat(url: str, api_url: str, bounds: httpx.Timeout) -> None:
    """Ask the server for its heartbeat, within our timeouts: a server that is down, refuses or
    cannot be reached fails here quickly instead of inside chromadb's unbounded handshake."""
    try:
        with httpx.Client(timeout=bounds) as probe:
            probe.get(f"{api_url}/heartbeat").raise_for_status()
    except httpx.HTTPError as exc:
        raise IndexUnavailable(
            "vector", f"cannot connect to the chromadb server at {url}: {reason(exc, bounds)}"
        ) from exc


def _handshake(url: str, build: Callable[[], ClientAPI], bounds: httpx.Timeout) -> ClientAPI:
    """`build()` (chromadb.HttpClient()) in a thread, waited for connect + request timeout at most.

    The handshake's requests have no timeout of their own, so a server that answered the
    heartbeat and then stalls would hold the caller forever. A handshake given up on keeps
    running in its thread; a client it builds after all is closed there, unused.
    """
    outcome: dict = {}
    lock = threading.Lock()

    def run() -> None:
        try:
            client = build()
        except Exception as exc:  # handed to the caller below
            with lock:
                outcome.setdefault("error", exc)
            return
        with lock:
            late = "abandoned" in outcome
            if not late:
                outcome["client"] = client
        if late:
            close_http_client(client)

    waited = bounds.connect + bounds.read
    worker = threading.Thread(target=run, name="chromadb-handshake", daemon=True)
    worker.start()
    worker.join(waited)
    with lock:
        if not outcome:
            outcome["abandoned"] = True
            raise IndexUnavailable(
                "vector",
                f"cannot connect to the chromadb server at {url}: no answer to the handshake within {waited:g} s",
            )
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, (ValueError, ChromaError, httpx.HTTPError, OSError)):
            # chromadb reports a refused connection as ValueError("Could not connect ...").
            raise IndexUnavailable(
                "vector", f"cannot connect to the chromadb server at {url}: {reason(exc, bounds)}"
            ) from exc
        raise exc
    return outcome["client"]


def reason(exc: Exception, bounds: httpx.Timeout) -> str:
    """What went wrong, in words (httpx's timeouts carry no message of their own)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {bounds.connect:g} s (MEMORYUI_CHROMA_CONNECT_TIMEOUT)"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {bounds.read:g} s (MEMORYUI_CHROMA_TIMEOUT)"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{exc.request.url} answered HTTP {exc.response.status_code}; is it a chromadb 1.x server?"
    return str(exc) or type(exc).__name__


def close_http_client(client) -> None:
    """Close a chromadb client and its HTTP sessions (chromadb's close() leaves them open)."""
    sessions = http_sessions(client)
    client.close()
    for session in sessions:
        session.close()


def http_sessions(client) -> list[httpx.Client]:
    """The httpx sessions of a chromadb HttpClient and its admin client (private attributes;
    chromadb is pinned and the tests cover this)."""
    sessions = []
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            sessions.append(session)
    return sessions
