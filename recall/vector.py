"""The vector index: active memories embedded by our Embedder, stored in chromadb.

Embedded by default (`chromadb.PersistentClient` under MEMORYUI_INDEX_DIR/chroma), a chromadb
server when CHROMA_URL is set. Vectors are always computed here and passed to chromadb as
`embeddings=`; collections are opened with `embedding_function=None` (persisted by chromadb
as the "legacy" type), so chromadb's default embedding function, which downloads a model,
is never constructed or called, and there is no custom embedding function to register
before a persisted collection can be reopened.

One collection per embedder, named after it, recording the embedder's name (model and
version) and dimension in its metadata. Vectors of two models are never mixed: opening an
index that was built with another embedder raises EmbedderMismatch ("reindex needed"), and
`reset()` (what a rebuild does) starts over with the configured one.

Several processes share the embedded index (web workers, the Celery worker). chromadb keeps
each process's HNSW graph in memory and never notices another process's writes: searches
then fail ("Error finding id") and a write could persist a graph that lacks the other
process's vectors. So every embedded operation holds a file lock (shared to read, exclusive
to write) and, when the database file changed since this process last touched it, reloads
chromadb first (~50 ms at 20k memories). A chromadb server needs none of this.

Every backend failure (server down, disk error) surfaces as IndexUnavailable("vector", ...).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import chromadb
import httpx
import numpy as np
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError, DuplicateIDError, InvalidArgumentError
from django.conf import settings

from recall.documents import Hit, IndexedMemory, IndexUnavailable
from recall.embeddings import Embedder, EmbedderUnavailable, get_embedder

__all__ = ["EmbedderMismatch", "VectorIndex", "collection_name"]

BATCH = 256  # memories embedded and written per chromadb call
PAGE = 1000  # entries read per page by entries()
LOCK_FILE = "memoryui.lock"

# chromadb errors that mean "we called it wrongly": bugs, not an unavailable backend.
_PROGRAMMING_ERRORS = (InvalidArgumentError, DuplicateIDError)


class EmbedderMismatch(IndexUnavailable):
    """The index holds vectors from another embedder than the configured one: reindex needed."""

    def __init__(self, *, recorded: str, configured: str, location: str, detail: str = ""):
        self.recorded = recorded
        self.configured = configured
        super().__init__(
            "vector",
            f"the index at {location} was built with embedder {recorded}, but {configured} is configured"
            f"{detail}; reindex needed (`manage.py reindex --full`, or Rebuild on the dashboard)",
        )


def collection_name(embedder_name: str, prefix: str = "memories") -> str:
    """A valid chromadb collection name for this embedder: readable slug + hash of the exact name."""
    slug = re.sub(r"[^a-z0-9.]+", "-", embedder_name.lower()).strip("-.")[:48].strip("-.")
    digest = hashlib.sha256(embedder_name.encode()).hexdigest()[:8]
    return f"{prefix}-{slug}-{digest}" if slug else f"{prefix}-{digest}"


@dataclass
class _Directory:
    """What this process knows about one embedded index directory (shared by its VectorIndexes)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    stamp: tuple | None = None  # the database file as this process last left it
    generation: int = 0  # bumped when chromadb is reloaded: older clients are stale


_directories: dict[str, _Directory] = {}
_directories_lock = threading.Lock()


def _directory(path: Path) -> _Directory:
    with _directories_lock:
        return _directories.setdefault(str(path), _Directory())


class VectorIndex:
    """Cosine-similarity search over active memories, filtered by scope inside chromadb.

    `path` / `url` / `embedder` default to the settings (MEMORYUI_INDEX_DIR / CHROMA_URL /
    MEMORYUI_EMBEDDER); `timeout` bounds each request to a chromadb server. The connection
    is opened on first use, so constructing an index never fails; every method may raise
    IndexUnavailable (EmbedderMismatch included). Call `close()` when done with an index.
    """

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        embedder: Embedder | None = None,
        prefix: str = "memories",
        timeout: float = 10.0,
    ):
        if path is None and url is None:
            url = settings.CHROMA_URL or None
            path = None if url else Path(settings.MEMORYUI_INDEX_DIR) / "chroma"
        self.url = url
        # Absolute: chromadb shares one in-process system per directory string.
        self.path = Path(path).absolute() if path is not None and not url else None
        self.prefix = prefix
        self.timeout = timeout
        self._embedder = embedder
        self._client = None
        self._collection = None
        self._generation = -1
        self._lock = threading.RLock()

    @property
    def location(self) -> str:
        return self.url or str(self.path)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._backend("load the embedder"):
                self._embedder = get_embedder()
        return self._embedder

    @property
    def collection_name(self) -> str:
        return collection_name(self.embedder.name, self.prefix)

    # --- writing -----------------------------------------------------------------------

    def upsert(self, items: Sequence[IndexedMemory]) -> None:
        """Add or replace these memories (matched by id)."""
        for start in range(0, len(items), BATCH):
            batch = items[start : start + BATCH]
            # Embedding is the slow part: done before taking the index lock.
            with self._backend("embed memories"):
                vectors = self.embedder.embed_passages([item.text for item in batch])
            with self._using("write to the index", write=True) as collection:
                collection.upsert(
                    ids=[item.id for item in batch],
                    embeddings=vectors,
                    documents=[item.text for item in batch],
                    metadatas=[
                        {
                            "scope": item.scope,
                            "kind": item.kind,
                            "tier": item.tier,
                            "pinned": bool(item.pinned),
                            "content_hash": item.content_hash,
                        }
                        for item in batch
                    ],
                )

    def delete(self, ids: Sequence[str]) -> None:
        """Remove these memories; ids the index does not hold are ignored."""
        ids = [str(pk) for pk in ids]
        for start in range(0, len(ids), BATCH):
            with self._using("delete from the index", write=True) as collection:
                collection.delete(ids=ids[start : start + BATCH])

    def reset(self) -> None:
        """Drop the index (this embedder's collection and any other embedder's) and start empty."""
        with self._guard("reset the index", write=True):
            client = self._connect()
            for collection in client.list_collections():
                if collection.name.startswith(f"{self.prefix}-"):
                    client.delete_collection(collection.name)
            self._collection = None
            self._open_collection()

    @staticmethod
    def entry_fingerprint(content_hash: str) -> str:
        """What an up-to-date entry of a memory with this content hash stores."""
        return content_hash

    # --- reading -----------------------------------------------------------------------

    def search(
        self, query: str, *, scopes: list[str] | None = None, k: int = 10, where: dict | None = None
    ) -> list[Hit]:
        """The k memories nearest to `query`, best first; `scopes=None` searches every scope."""
        if k <= 0 or scopes == []:
            return []
        with self._backend("embed the query"):
            vector = self.embedder.embed_query(query)
        return self.search_vector(vector, scopes=scopes, k=k, where=where)

    def search_vector(
        self, vector: np.ndarray, *, scopes: list[str] | None = None, k: int = 10, where: dict | None = None
    ) -> list[Hit]:
        """Like `search` for a query the caller already embedded with `embedder.embed_query`.

        `where` is an extra chromadb metadata filter (e.g. {"pinned": True}), ANDed with the scopes.
        """
        if k <= 0 or scopes == []:
            return []
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self.embedder.dim:
            raise ValueError(f"query vector has dimension {vector.shape[0]}, the index {self.embedder.dim}")
        with self._using("search the index") as collection:
            result = collection.query(
                query_embeddings=[vector], n_results=k, where=_where(scopes, where), include=["distances"]
            )
        ids, distances = result["ids"][0], result["distances"][0]
        # chromadb's cosine space reports distance = 1 - cosine similarity.
        return [
            Hit(id=pk, rank=rank, score=1.0 - float(distance))
            for rank, (pk, distance) in enumerate(zip(ids, distances, strict=True), 1)
        ]

    def entries(self) -> dict[str, str]:
        """Every entry's id and content hash (for verify), read page by page."""
        found: dict[str, str] = {}
        offset = 0
        while True:
            with self._using("read the index") as collection:
                page = collection.get(include=["metadatas"], limit=PAGE, offset=offset)
            for pk, metadata in zip(page["ids"], page["metadatas"] or [], strict=True):
                found[pk] = (metadata or {}).get("content_hash", "")
            if len(page["ids"]) < PAGE:
                return found
            offset += PAGE

    def count(self) -> int:
        with self._using("count the index") as collection:
            return collection.count()

    def info(self) -> dict:
        """What the dashboard shows: backend, location, embedder and size."""
        return {
            "backend": "chromadb server" if self.url else "embedded chromadb",
            "url" if self.url else "path": self.location,
            "collection": self.collection_name,
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "count": self.count(),
        }

    def close(self) -> None:
        """Release the chromadb client (its SQLite files, for the embedded one)."""
        with self._lock:
            client, self._client, self._collection = self._client, None, None
            current = self.url or self._generation == _directory(self.path).generation
        # A client from before a reload belongs to a stopped system: closing it would
        # release the new system's reference instead.
        if client is not None and current:
            sessions = _http_sessions(client)
            client.close()
            for session in sessions:
                session.close()  # chromadb's close() leaves its HTTP connections open

    # --- connection --------------------------------------------------------------------

    @contextmanager
    def _using(self, action: str, *, write: bool = False) -> Iterator:
        """The checked collection, under the cross-process guard, with errors mapped."""
        with self._guard(action, write=write):
            yield self._open_collection()

    @contextmanager
    def _guard(self, action: str, *, write: bool) -> Iterator[None]:
        """Map errors; for the embedded index also lock the directory and reload if stale."""
        with self._backend(action):
            if self.url:
                yield
                return
            directory = _directory(self.path)
            with directory.lock, _file_lock(self.path, exclusive=write):
                stamp = _stamp(self.path)
                if stamp is None or stamp != directory.stamp:
                    # Another process wrote (or the directory was deleted): this process's
                    # chromadb state is stale. Reload it; every VectorIndex here reconnects.
                    _evict_system(self.path)
                    directory.generation += 1
                with self._lock:
                    if self._generation != directory.generation:
                        self._client, self._collection = None, None
                        self._generation = directory.generation
                try:
                    yield
                except (ChromaError, OSError):
                    directory.stamp = None  # unsure what state chromadb is left in: reload next time
                    raise
                directory.stamp = _stamp(self.path)

    @contextmanager
    def _backend(self, action: str) -> Iterator[None]:
        """Turn backend and embedder failures into IndexUnavailable("vector", ...)."""
        try:
            yield
        except IndexUnavailable:
            raise
        except EmbedderUnavailable as exc:
            raise IndexUnavailable("vector", f"cannot {action}: embedder unavailable: {exc}") from exc
        except _PROGRAMMING_ERRORS:
            raise
        except (ChromaError, httpx.HTTPError, OSError) as exc:
            # The handle may be stale (server restarted, collection reset elsewhere): reopen next time.
            self._collection = None
            raise IndexUnavailable("vector", f"cannot {action} at {self.location}: {exc}") from exc

    def _connect(self):
        with self._lock:
            if self._client is not None:
                return self._client
            # Telemetry off: no background calls home from a machine that may be offline.
            chroma_settings = ChromaSettings(anonymized_telemetry=False)
            if not self.url:
                try:
                    self._client = chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
                except (ValueError, ChromaError, OSError) as exc:
                    raise IndexUnavailable("vector", f"cannot open chromadb at {self.path}: {exc}") from exc
                return self._client
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise IndexUnavailable("vector", f"CHROMA_URL {self.url!r} is not an http(s) URL")
            ssl = parts.scheme == "https"
            try:
                port = parts.port or (443 if ssl else 8000)  # 8000: chromadb's own default
                self._client = chromadb.HttpClient(host=parts.hostname, port=port, ssl=ssl, settings=chroma_settings)
            except (ValueError, ChromaError, httpx.HTTPError, OSError) as exc:
                # chromadb reports a refused connection as ValueError("Could not connect ...").
                raise IndexUnavailable("vector", f"cannot connect to chromadb at {self.url}: {exc}") from exc
            # chromadb's HTTP sessions have no timeout at all: a stalled server would hang a
            # recall request forever. (The handshake inside HttpClient() above still can.)
            for session in _http_sessions(self._client):
                session.timeout = httpx.Timeout(self.timeout)
            return self._client

    def _open_collection(self):
        """The collection for the configured embedder, checked against what the index recorded."""
        with self._lock:
            if self._collection is not None:
                return self._collection
            client = self._connect()
            embedder = self.embedder
            name = self.collection_name
            others = [c for c in client.list_collections() if c.name.startswith(f"{self.prefix}-")]
            if name not in {c.name for c in others}:
                # Another embedder's non-empty collection and none for ours: the index was
                # built with another model. Answering from an empty collection would hide that.
                for other in others:
                    if other.count():
                        recorded = (other.metadata or {}).get("embedder", other.name)
                        raise EmbedderMismatch(recorded=recorded, configured=embedder.name, location=self.location)
            collection = client.get_or_create_collection(
                name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"embedder": embedder.name, "dim": embedder.dim},
                embedding_function=None,
            )
            recorded = (collection.metadata or {}).get("embedder")
            recorded_dim = (collection.metadata or {}).get("dim")
            if recorded != embedder.name or recorded_dim != embedder.dim:
                raise EmbedderMismatch(
                    recorded=str(recorded),
                    configured=embedder.name,
                    location=self.location,
                    detail=f" (dimension {recorded_dim} recorded, {embedder.dim} configured)",
                )
            self._collection = collection
            return collection


@contextmanager
def _file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    """An advisory lock on the index directory, held across processes for one operation."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _stamp(path: Path) -> tuple | None:
    """Identity and last change of the chromadb database file; None if there is none."""
    try:
        stat = (path / "chroma.sqlite3").stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _evict_system(path: Path) -> None:
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


def _http_sessions(client) -> list[httpx.Client]:
    """The httpx sessions of a chromadb HttpClient and its admin client (private attributes;
    chromadb is pinned and the tests cover this)."""
    sessions = []
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            sessions.append(session)
    return sessions


def _where(scopes: list[str] | None, extra: dict | None) -> dict | None:
    clauses = []
    if scopes is not None:
        scopes = list(dict.fromkeys(scopes))
        clauses.append({"scope": scopes[0]} if len(scopes) == 1 else {"scope": {"$in": scopes}})
    if extra:
        clauses.append(extra)
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
