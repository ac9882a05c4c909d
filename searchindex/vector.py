"""The vector index: active memories embedded by our Embedder, stored in chromadb.

Embedded by default (`chromadb.PersistentClient` under MEMORYUI_INDEX_DIR/chroma), a chromadb
server when CHROMA_URL is set. Vectors are always computed here and passed to chromadb as
`embeddings=`; collections are opened with `embedding_function=None` (persisted by chromadb
as the "legacy" type), so chromadb's default embedding function, which downloads a model,
is never constructed or called, and there is no custom embedding function to register
before a persisted collection can be reopened.

One collection per embedder and scope, named after both, recording the embedder's name (model
and version), its dimension and the scope in its metadata. A search within a scope queries
that scope's collection, whose HNSW graph holds nothing else: chromadb's metadata filter over
one shared collection cost 45 ms for a 300-memory scope and 150 ms for a 40k one at 100k
memories (unfiltered HNSW: 1.4 ms), see bench/retrieval_latency.py. Vectors of two models are
never mixed: opening an index that holds another embedder's collections raises
EmbedderMismatch ("reindex needed"), and `reset()` (what a rebuild does) starts over with the
configured one.

Several processes share the embedded index (web workers, the Celery worker). chromadb keeps
each process's HNSW graph in memory and never notices another process's writes: searches
then fail ("Error finding id") and a write could persist a graph that lacks the other
process's vectors. So every embedded operation holds a file lock (shared to read, exclusive
to write) and, when the database file changed since this process last touched it, reloads
chromadb first (~50 ms at 20k memories). A chromadb server needs none of this.

A chromadb server is the index of a deployment with several hosts (no shared disk), or of any
deployment whose web and worker processes should not share a directory. Start one with the
`chroma` command that the chromadb package installs, then point CHROMA_URL at it:

    chroma run --path DIR --host 127.0.0.1 --port 8001
    CHROMA_URL=http://127.0.0.1:8001

Every request to the server is bounded: MEMORYUI_CHROMA_CONNECT_TIMEOUT seconds to connect,
MEMORYUI_CHROMA_TIMEOUT seconds for the request, the client's construction included
(`searchindex.chroma`, which also holds the embedded directory's lock and reload). A server
that goes away and comes back is used again on the next call: nothing is given up for good, and
a failed first connect is tried again on the next use.

Every backend failure (server down, disk error) surfaces as IndexUnavailable("vector", ...).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
from chromadb.errors import ChromaError, DuplicateIDError, InvalidArgumentError, NotFoundError
from django.conf import settings

from searchindex import chroma
from searchindex.chroma import connect_server, open_embedded
from searchindex.documents import Hit, IndexedMemory, IndexUnavailable
from searchindex.embeddings import Embedder, EmbedderUnavailable, get_embedder
from searchindex.exact import EXACT, WRITTEN, Matrix, new_mark

__all__ = ["EmbedderMismatch", "VectorIndex", "collection_name"]

# Memories written per chromadb call. A call costs ~5-50 ms whatever it holds, so calls of a few
# memories are what makes writes slow (13 a call: 6x slower than 256); from 256 up, the HNSW
# insertions dominate and the size hardly matters (bench/vector_writes.py --sweep: 184, 186, 179,
# 181 memories/s at 256, 1000, 2000, 5000 on a loaded machine). Each call holds the write lock,
# which a search waits for. Capped by the client's own limit (get_max_batch_size()).
BATCH = 1000
# Memories embedded at once before their vectors are written, grouped by scope: the embedder
# batches on its own, and the window only bounds the vectors held in memory (~1.5 KB each).
EMBED_BATCH = 10_000
ID_CHUNK = 1000  # ids asked of a collection per get(ids=...)
# Entries a read of a whole scope asks chromadb for at once (15 MB of vectors at 384-d): chromadb
# skips to an offset row by row (~3 µs a row at 400,000), so reading a scope of n entries in pages
# of p skips about n² / (2p) rows; pages of 1,000 made reading 400,000 vectors take minutes.
PAGE = 10_000
# Neighbours asked of each scope's collection per search, of which the best k overall are kept.
# chromadb's HNSW search explores max(ef_search, n_results) nodes and reports exact distances for
# what it found, so asking for more is a wider search whose best k are at least as good; measured
# in bench/vector_candidates.py.
CANDIDATES = 50
# What chromadb fills in for a collection created without them: the graph such a collection has.
CHROMADB_HNSW_DEFAULTS = {"max_neighbors": 16, "ef_construction": 100, "ef_search": 100}
SHAPE = ("max_neighbors", "ef_construction")  # what a graph is built with, fixed for its life
# The graph of a scope below MEMORYUI_CHROMA_HNSW_BIG_FROM vectors (chromadb's own defaults). The big
# settings pay in a crowded scope of many vectors; in the crowded store of bench/hnsw_sweep.py this
# graph found 0.996 of the true top 10 at ef_search 300 in 40,000 vectors (64/400: 0.999) and built
# in 12.7 s against 29.9 s, but 0.974 in 60,000 (96/200: 1.000) and 0.936 in 100,000 (0.999); at
# the default ef_search 200, 0.990 in 40,000 and 0.984 in 50,000.
SMALL_GRAPH = {"max_neighbors": 16, "ef_construction": 100}

_GONE = "gone"  # the mark of a collection no longer there: no matrix was read under it
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


def configured_hnsw() -> dict[str, int]:
    """The HNSW settings of a big scope's new collection, in chromadb's words (max_neighbors is M)."""
    return {
        "max_neighbors": settings.MEMORYUI_CHROMA_HNSW_M,
        "ef_construction": settings.MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION,
        "ef_search": settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH,
    }


def graph_shape(vectors: int) -> dict[str, int]:
    """The M and ef_construction of a new collection for a scope about to hold this many vectors:
    the configured ones from MEMORYUI_CHROMA_HNSW_BIG_FROM vectors on (or always, when that is 0),
    SMALL_GRAPH's below it (never more than the configured ones)."""
    configured = configured_hnsw()
    line = _big_line()
    if not line or vectors >= line:
        return {name: configured[name] for name in SHAPE}
    return {name: min(SMALL_GRAPH[name], configured[name]) for name in SHAPE}


def _shape_fits(graph: dict) -> bool:
    """Whether a collection's graph is one the settings give a scope of its size: the big one, or,
    below MEMORYUI_CHROMA_HNSW_BIG_FROM vectors, the small one. A scope that shrank below the line
    keeps its big graph (it searches at least as well); one that grew past it in a small graph
    asks for a rebuild."""
    shape = {name: graph[name] for name in SHAPE}
    return shape in (graph_shape(graph["vectors"]), graph_shape(max(graph["vectors"], _big_line())))


def _big_line() -> int:
    return settings.MEMORYUI_CHROMA_HNSW_BIG_FROM or 0


def collection_hnsw(collection) -> dict[str, int]:
    """The HNSW settings chromadb recorded for a collection."""
    recorded = (collection.configuration_json or {}).get("hnsw") or {}
    return {name: recorded.get(name, default) for name, default in CHROMADB_HNSW_DEFAULTS.items()}


def _graph(collection) -> dict:
    """A collection's recorded HNSW settings and how many vectors it holds."""
    return {**collection_hnsw(collection), "vectors": collection.count()}


def _ef_search_for(current: int) -> int:
    """The ef_search a collection searching with `current` should have: the configured one, or
    `current` when it is wider and was measured (searchindex/tuning.py) while recall is measured
    (MEMORYUI_VECTOR_RECALL_TARGET): a measured scope's ef_search only grows."""
    wanted = settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH
    if settings.MEMORYUI_VECTOR_RECALL_TARGET is not None and current > wanted:
        return current
    return wanted


def _rebuild_needed(built: dict[str, dict]) -> str:
    """What the graphs not shaped as the settings say for their size were built with, and what the
    settings say, in words; else ""."""
    off: dict[tuple[int, int], Counter] = {}  # the shape wanted → the shapes found instead, counted
    for graph in built.values():
        if not _shape_fits(graph):
            wanted = graph_shape(graph["vectors"])
            found = (graph["max_neighbors"], graph["ef_construction"])
            off.setdefault((wanted["max_neighbors"], wanted["ef_construction"]), Counter())[found] += 1
    said = []
    for (m, ef), shapes in sorted(off.items()):
        found = " and ".join(
            f"M={fm}, ef_construction={fe}" + ("" if count == len(built) else f" ({count} of {len(built)} scopes)")
            for (fm, fe), count in sorted(shapes.items())
        )
        line = _big_line()
        size = f" for a scope of {line:,} vectors or more" if line and graph_shape(line)["max_neighbors"] == m else ""
        said.append(f"built with {found}; settings say M={m}, ef_construction={ef}{size}: rebuild to apply")
    return "; ".join(said)


class VectorIndex:
    """Cosine-similarity search over active memories, one chromadb collection per scope.

    `path` / `url` / `embedder` default to the settings (MEMORYUI_INDEX_DIR / CHROMA_URL /
    MEMORYUI_EMBEDDER); `connect_timeout` and `timeout` (seconds; default
    MEMORYUI_CHROMA_CONNECT_TIMEOUT and MEMORYUI_CHROMA_TIMEOUT) bound connecting to a chromadb
    server and each request to it. The connection is opened on first use, so constructing an
    index never fails; every method may raise IndexUnavailable (EmbedderMismatch included).
    Call `close()` when done with an index.
    """

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        embedder: Embedder | None = None,
        prefix: str = "memories",
        timeout: float | None = None,
        connect_timeout: float | None = None,
    ):
        if path is None and url is None:
            url = settings.CHROMA_URL or None
            path = None if url else Path(settings.MEMORYUI_INDEX_DIR) / "chroma"
        self.url = url
        # Absolute: chromadb shares one in-process system per directory string.
        self.path = Path(path).absolute() if path is not None and not url else None
        self.prefix = prefix
        self.timeout = settings.MEMORYUI_CHROMA_TIMEOUT if timeout is None else timeout
        self.connect_timeout = settings.MEMORYUI_CHROMA_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        self._embedder = embedder
        self._client = None
        self._collections: dict[str, object] | None = None  # scope → its collection
        self._generation = -1
        self._lock = threading.RLock()
        self._max_batch: int | None = None  # the client's limit of records per call, asked once

    @property
    def _bounds(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, connect=self.connect_timeout)

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

    def upsert(
        self,
        items: Sequence[IndexedMemory],
        *,
        moved: Mapping[str, Iterable[str]] | None = None,
        sizes: Callable[[list[str]], Mapping[str, int]] | None = None,
    ) -> None:
        """Add or replace these memories (matched by id), each in its scope's collection.

        A scope's collection is created by its first write, its graph shaped for the number of
        vectors the scope is about to hold (`graph_shape`): `sizes(scopes)` says how many for the
        scopes this write creates (the database's count of their active memories, for a rebuild
        or an import); without it, the memories of that scope in this write.

        An entry holds the vector and one metadata field, the fingerprint verify compares
        (`content_hash`): no text and no filter fields, which chromadb would store and index on
        every write for no reader (bench/vector_writes.py --parts).

        `moved` names, by memory id, the scope or scopes a memory moved out of since it was last
        written (the outbox row keeps them): it leaves those scopes' collections, and no other
        collection is asked, so a write costs the same whatever the number of scopes. A move the
        caller does not name leaves a stray entry that verify reports and repair removes.
        """
        items = list({item.id: item for item in items}.values())
        moved = moved or {}
        for start in range(0, len(items), EMBED_BATCH):
            window = items[start : start + EMBED_BATCH]
            # Embedding is the slow part: done before taking the index lock.
            with self._backend("embed memories"):
                vectors = self.embedder.embed_passages([item.text for item in window])
            by_scope: dict[str, list[int]] = {}
            left: dict[str, list[str]] = {}  # scope → ids that moved out of it
            for n, item in enumerate(window):
                by_scope.setdefault(item.scope, []).append(n)
                old = moved.get(item.id, ())
                for scope in dict.fromkeys((old,) if isinstance(old, str) else old):
                    if scope != item.scope:
                        left.setdefault(scope, []).append(item.id)
            batch = self._write_batch()
            expected = self._expected_sizes(by_scope, sizes)
            for scope, rows in by_scope.items():
                for first in range(0, len(rows), batch):
                    part = rows[first : first + batch]
                    # One lock per call: a search can run between two batches of a long write.
                    ids = [window[n].id for n in part]
                    with self._using("write to the index", write=True) as collections:
                        collection = self._scope_collection(collections, scope, create=True, vectors=expected[scope])
                        collection.upsert(
                            ids=ids,
                            embeddings=vectors[part],
                            metadatas=[{"content_hash": window[n].content_hash} for n in part],
                        )
                        self._written(collection, upserted=ids, vectors=vectors[part])
            self._delete_in_scopes(left, batch, "write to the index")

    def _expected_sizes(
        self, by_scope: Mapping[str, list[int]], sizes: Callable[[list[str]], Mapping[str, int]] | None
    ) -> dict[str, int]:
        """How many vectors each scope written to is about to hold, for those without a collection
        yet (`upsert`'s `sizes`, asked only for them); the rest are never created here."""
        with self._using("read the index") as collections:
            new = [scope for scope in by_scope if scope not in collections]
        expected = {scope: len(rows) for scope, rows in by_scope.items()}
        if new and sizes is not None:
            told = sizes(new)
            expected.update({scope: max(expected[scope], int(told.get(scope, 0))) for scope in new})
        return expected

    def delete(self, ids: Sequence[str], *, scopes: Mapping[str, Iterable[str]] | None = None) -> None:
        """Remove these memories; ids the index does not hold are ignored.

        `scopes` names, by memory id, every scope the memory's entry may be in (its scope, and
        those its outbox row says it moved out of): only those collections are asked. An id it
        does not name (a memory whose row is gone) is looked for in every scope's collection.
        """
        ids = list(dict.fromkeys(str(pk) for pk in ids))
        if not ids:
            return
        scopes = scopes or {}
        anywhere = [pk for pk in ids if not scopes.get(pk)]
        by_scope: dict[str, list[str]] = {}
        for pk in ids:
            named = scopes.get(pk) or ()
            for scope in dict.fromkeys((named,) if isinstance(named, str) else named):
                by_scope.setdefault(scope, []).append(pk)
        batch = self._write_batch()
        self._delete_in_scopes(by_scope, batch, "delete from the index")
        for start in range(0, len(anywhere), batch):
            with self._using("delete from the index", write=True) as collections:
                for collection in collections.values():
                    collection.delete(ids=anywhere[start : start + batch])
                    self._written(collection, deleted=anywhere[start : start + batch])

    def _delete_in_scopes(self, by_scope: Mapping[str, list[str]], batch: int, action: str) -> None:
        """Delete each scope's ids from that scope's collection alone, `batch` ids a call (a scope
        without a collection holds nothing to delete)."""
        for scope, ids in by_scope.items():
            for start in range(0, len(ids), batch):
                with self._using(action, write=True) as collections:
                    collection = self._scope_collection(collections, scope, create=False)
                    if collection is None:
                        break
                    collection.delete(ids=ids[start : start + batch])
                    self._written(collection, deleted=ids[start : start + batch])

    def _written(
        self,
        collection,
        *,
        upserted: Sequence[str] = (),
        vectors: np.ndarray | None = None,
        deleted: Sequence[str] = (),
    ) -> None:
        """Give a collection just written to a new write mark (searchindex/exact.py): every matrix
        read under an earlier one is stale, in every process. The embedded index, written under its
        exclusive lock, brings this process's matrix up to date instead; a server's may have been
        written by another host since this process last looked, so its matrix is dropped."""
        before = self._mark(collection)
        after = new_mark()
        collection.modify(metadata={**(collection.metadata or {}), WRITTEN: after})
        key = self._exact_key(collection)
        if self.url:
            EXACT.drop(key)
            return
        chroma.directory(self.path).marks[str(collection.id)] = after
        EXACT.patch(key, before=before, after=after, upserted=upserted, vectors=vectors, deleted=deleted)

    def _mark(self, collection) -> str | None:
        """The collection's write mark as this process knows it (the embedded index: current under
        the directory lock; a server: as of when the collection was opened)."""
        if not self.url:
            marks = chroma.directory(self.path).marks
            if str(collection.id) in marks:
                return marks[str(collection.id)]
        return (collection.metadata or {}).get(WRITTEN)

    def _current_marks(self, wanted: Mapping[str, object]) -> dict[str, str | None]:
        """Each wanted scope's current write mark: the embedded index knows them under its lock; a
        chromadb server is asked (one request), as another host may have written since. A scope
        whose collection is gone or was recreated gets a mark no matrix has."""
        if not self.url:
            return {scope: self._mark(collection) for scope, collection in wanted.items()}
        client = self._connect()
        if len(wanted) == 1:
            scope, collection = next(iter(wanted.items()))
            try:
                listed = [client.get_collection(collection.name, embedding_function=None)]
            except NotFoundError:
                listed = []
        else:
            listed = client.list_collections()
        current = {str(c.id): (c.metadata or {}).get(WRITTEN) for c in listed}
        return {scope: current.get(str(collection.id), _GONE) for scope, collection in wanted.items()}

    def _held_matrices(self, wanted: Mapping[str, object]) -> tuple[dict[str, str | None], dict[str, Matrix | None]]:
        """The current marks of the wanted scopes that may be searched exactly, and the matrix this
        process holds for each under that mark (None: not held, or stale). None of that when exact
        search is off; a scope known to be big is left out without asking for its mark (a request
        to a chromadb server)."""
        if settings.MEMORYUI_VECTOR_EXACT_BELOW <= 0:
            return {}, {}
        checked = {s: c for s, c in wanted.items() if not EXACT.known_big(self._exact_key(c))}
        marks = self._current_marks(checked) if checked else {}
        return marks, {s: EXACT.get(self._exact_key(c), marks[s]) for s, c in checked.items()}

    def _exact_key(self, collection) -> tuple[str, str]:
        return (self.location, str(collection.id))

    def scopes_holding(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The scopes whose collections hold each of these ids (ids held nowhere are left out).

        Asks every scope's collection: for repair, which must find entries left in a scope their
        memory moved out of when no outbox row named it.
        """
        ids = list(dict.fromkeys(str(pk) for pk in ids))
        found: dict[str, list[str]] = {}
        if not ids:
            return found
        with self._using("read the index") as collections:
            for scope, collection in collections.items():
                for start in range(0, len(ids), ID_CHUNK):
                    for pk in collection.get(ids=ids[start : start + ID_CHUNK], include=[])["ids"]:
                        found.setdefault(pk, []).append(scope)
        return found

    def _write_batch(self) -> int:
        """BATCH, or less when the chromadb client takes fewer records per call."""
        limit = self._max_batch
        if limit is None:
            with self._guard("ask the index its batch size", write=False):
                limit = self._max_batch = self._connect().get_max_batch_size()
        return max(1, min(BATCH, limit))

    def reset(self) -> None:
        """Drop the index (every scope's collection, of any embedder) and start empty."""
        with self._guard("reset the index", write=True):
            client = self._connect()
            for collection in client.list_collections():
                if collection.name.startswith(f"{self.prefix}-"):
                    client.delete_collection(collection.name)
            self._collections = None
            self._load_collections()
        EXACT.drop_where(lambda key: key[0] == self.location)

    @staticmethod
    def entry_fingerprint(content_hash: str) -> str:
        """What an up-to-date entry of a memory with this content hash stores."""
        return content_hash

    # --- reading -----------------------------------------------------------------------

    def search(self, query: str, *, scopes: list[str] | None = None, k: int = 10) -> list[Hit]:
        """The k memories nearest to `query`, best first; `scopes=None` searches every scope."""
        if k <= 0 or scopes == []:
            return []
        with self._backend("embed the query"):
            vector = self.embedder.embed_query(query)
        return self.search_vector(vector, scopes=scopes, k=k)

    def search_vector(
        self,
        vector: np.ndarray,
        *,
        scopes: list[str] | None = None,
        k: int = 10,
        methods: dict[str, str] | None = None,
    ) -> list[Hit]:
        """Like `search` for a query the caller already embedded with `embedder.embed_query`.

        A scope below MEMORYUI_VECTOR_EXACT_BELOW vectors whose matrix this process holds, read
        under the collection's current write mark, is searched exactly (searchindex/exact.py);
        any other is searched by its HNSW graph, and a small one's matrix is read in the
        background for the next search. Each graph is asked for `max(k, CANDIDATES)` neighbours,
        a wider search than k alone; the best k of all scopes are kept. `methods`, when given, is
        filled with how each scope was searched: "exact" or "hnsw".
        """
        if k <= 0 or scopes == []:
            return []
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self.embedder.dim:
            raise ValueError(f"query vector has dimension {vector.shape[0]}, the index {self.embedder.dim}")
        asked = max(k, CANDIDATES)
        found: list[tuple[float, str]] = []
        with self._using("search the index") as collections:
            if self.url and scopes is not None and not set(scopes) <= collections.keys():
                # Another process (or machine) may have created the scope since: look again.
                self._collections = None
                collections = self._load_collections()
            wanted = collections if scopes is None else {s: collections[s] for s in scopes if s in collections}
            marks, matrices = self._held_matrices(wanted)
            for scope, collection in wanted.items():
                if matrices.get(scope) is not None:
                    found.extend(matrices[scope].nearest(vector, k))
                    if methods is not None:
                        methods[scope] = "exact"
                    continue
                if scope in marks and marks[scope] != _GONE:
                    key = self._exact_key(collection)
                    EXACT.request(key, marks[scope], self._reader(scope, key))
                result = collection.query(query_embeddings=[vector], n_results=asked, include=["distances"])
                found.extend(zip(result["distances"][0], result["ids"][0], strict=True))
                if methods is not None:
                    methods[scope] = "hnsw"
        found.sort()
        # chromadb's cosine space reports distance = 1 - cosine similarity.
        return [Hit(id=pk, rank=rank, score=1.0 - float(distance)) for rank, (distance, pk) in enumerate(found[:k], 1)]

    def entries(self) -> dict[str, str]:
        """Every entry's id and content hash (for verify), read page by page.

        An id held by two scopes' collections is reported with a hash no memory has, so
        verify calls it stale and a repair puts it back in its one scope.
        """
        found: dict[str, str] = {}
        with self._using("read the index") as collections:
            names = list(collections)
        for scope in names:
            offset = 0
            while True:
                with self._using("read the index") as collections:
                    collection = collections.get(scope)
                    if collection is None:
                        break
                    page = collection.get(include=["metadatas"], limit=PAGE, offset=offset)
                for pk, metadata in zip(page["ids"], page["metadatas"] or [], strict=True):
                    content_hash = (metadata or {}).get("content_hash", "")
                    found[pk] = f"in several scopes: {found[pk]}" if pk in found else content_hash
                if len(page["ids"]) < PAGE:
                    break
                offset += PAGE
        return found

    def similarities(self, vector: np.ndarray, ids: Sequence[str], *, scopes: list[str] | None) -> dict[str, float]:
        """The exact cosine similarity of these memories to a query vector (`embed_query`'s), read
        from their stored vectors: for candidates another retriever found outside the vector top k."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        return {pk: float(stored @ query) for pk, stored in self.stored_vectors(ids, scopes=scopes).items()}

    def stored_vectors(self, ids: Sequence[str], *, scopes: list[str] | None) -> dict[str, np.ndarray]:
        """These memories' stored vectors (unit length), by id; a memory not in the index is left out."""
        ids = list(dict.fromkeys(ids))
        if not ids or scopes == []:
            return {}
        found: dict[str, np.ndarray] = {}
        with self._using("read stored vectors") as collections:
            wanted = collections if scopes is None else {s: collections[s] for s in scopes if s in collections}
            _, matrices = self._held_matrices(wanted)
            for scope, collection in wanted.items():
                if matrices.get(scope) is not None:
                    found.update(matrices[scope].stored(ids))
                    continue
                page = collection.get(ids=ids, include=["embeddings"])
                embeddings = page["embeddings"] if page["embeddings"] is not None else []
                for pk, stored in zip(page["ids"], embeddings, strict=True):
                    found[pk] = np.asarray(stored, dtype=np.float32)
        return found

    def warm(self, scopes: list[str] | None = None) -> dict[str, str]:
        """Read the matrices of these scopes (None: all) now, in this thread, for exact search;
        by scope, "exact" (held) or "hnsw" (the line or more vectors, or exact search is off)."""
        if settings.MEMORYUI_VECTOR_EXACT_BELOW <= 0:
            with self._using("read the index") as collections:
                return {scope: "hnsw" for scope in collections if scopes is None or scope in scopes}
        with self._using("read the index") as collections:
            keys = {s: self._exact_key(c) for s, c in collections.items() if scopes is None or s in scopes}
        return {
            scope: "exact" if EXACT.read_now(key, self._reader(scope, key)) is not None else "hnsw"
            for scope, key in keys.items()
        }

    def _reader(self, scope: str, key: tuple[str, str]) -> Callable[[], tuple[str | None, Matrix | None]]:
        """What reads one scope's matrix (in the background thread): an index of its own on the same
        location, so this one can be closed meanwhile."""
        path, url, embedder, prefix = self.path, self.url, self._embedder, self.prefix

        def read() -> tuple[str | None, Matrix | None]:
            index = VectorIndex(path=path, url=url, embedder=embedder, prefix=prefix)
            try:
                return index._read_matrix(scope, key)
            finally:
                index.close()

        return read

    def _read_matrix(self, scope: str, key: tuple[str, str]) -> tuple[str | None, Matrix | None]:
        """The scope's current mark, then its vectors (None when it holds the line or more). The
        mark is read first: a write meanwhile leaves the matrix under a mark no longer current."""
        with self._using("read the index") as collections:
            collection = collections.get(scope)
            if collection is None or self._exact_key(collection) != key:
                return _GONE, None
            mark = self._current_marks({scope: collection})[scope]
            if collection.count() >= settings.MEMORYUI_VECTOR_EXACT_BELOW:
                return mark, None
        found = self.vectors(scope, stop=lambda: EXACT.stopping)
        return (mark, None) if EXACT.stopping else (mark, Matrix.build(mark, found, self.embedder.dim))

    def vectors(self, scope: str, *, stop: Callable[[], bool] | None = None) -> dict[str, np.ndarray]:
        """Every entry of `scope` as id -> its vector, read page by page (until `stop()` says so).

        The index keeps no text: a caller that must know whether an entry embeds a memory's
        current text asks the database (a memory with a pending outbox row may be behind).
        """
        found: dict[str, np.ndarray] = {}
        for ids, page in self.vector_pages(scope, stop=stop):
            found.update(zip(ids, page, strict=True))
        return found

    def vector_pages(
        self,
        scope: str,
        *,
        stop: Callable[[], bool] | None = None,
        offset: int = 0,
        limit: int | None = None,
        page: int | None = None,
    ) -> Iterator[tuple[list[str], np.ndarray]]:
        """`scope`'s entries from `offset` on (`limit` of them at most), as pages of ids and their
        vectors (float32 rows), each page read under the lock of its own, `page` (PAGE) at a time."""
        page = page or PAGE
        while (stop is None or not stop()) and (limit is None or limit > 0):
            size = page if limit is None else min(page, limit)
            with self._using("read the index") as collections:
                collection = collections.get(scope)
                if collection is None:
                    return
                found = collection.get(include=["embeddings"], limit=size, offset=offset)
            ids = found["ids"]
            if ids:
                yield ids, np.asarray(found["embeddings"], dtype=np.float32).reshape(len(ids), -1)
            if len(ids) < size:
                return
            offset += size
            limit = None if limit is None else limit - size

    def graph_neighbours(self, scope: str, vector: np.ndarray, n: int) -> list[tuple[float, str]]:
        """The `n` nearest entries of `scope` by its HNSW graph alone (never the exact matrix), as
        (cosine distance, id) pairs, nearest first. The graph search keeps max(ef_search, n)
        candidates, so asking for n >= ef_search is the search that ef_search n makes."""
        with self._using("search the index") as collections:
            collection = collections.get(scope)
            if collection is None:
                return []
            result = collection.query(
                query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=n, include=["distances"]
            )
        return list(zip(result["distances"][0], result["ids"][0], strict=True))

    def counts(self) -> dict[str, int]:
        """Entries by scope."""
        with self._using("count the index") as collections:
            return {scope: collection.count() for scope, collection in collections.items()}

    def graph(self, scope: str) -> dict | None:
        """`scope`'s collection as `hnsw()` reports each one (its HNSW settings and vectors), or None."""
        with self._using("read the index") as collections:
            collection = collections.get(scope)
            return None if collection is None else _graph(collection)

    def set_ef_search(self, scope: str, ef_search: int) -> None:
        """Give `scope`'s collection this ef_search (its measured one: searchindex/tuning.py). The
        embedded index is reloaded so every process searches with it at once (the others reload
        anyway, as the directory changed); a chromadb server applies it when it next loads the
        collection's graph (after a restart)."""
        with self._guard("set ef_search", write=True):
            collection = self._load_collections().get(scope)
            if collection is None or collection_hnsw(collection)["ef_search"] == ef_search:
                return
            collection.modify(configuration={"hnsw": {"ef_search": ef_search}})
            with self._lock:
                self._collections = None
                if not self.url:
                    self._reload_embedded()

    def count(self) -> int:
        with self._using("count the index") as collections:
            return sum(collection.count() for collection in collections.values())

    def info(self) -> dict:
        """What the dashboard shows: backend, location, embedder, size and HNSW graphs (`hnsw()`)."""
        hnsw = self.hnsw()
        return {
            "backend": "chromadb server" if self.url else "embedded chromadb",
            "url" if self.url else "path": self.location,
            "collection": self.collection_name,  # one per scope: this name + "--" + the scope
            "scopes": len(hnsw["collections"]),
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "count": self.count(),
            "hnsw": hnsw,
        }

    def hnsw(self) -> dict:
        """The HNSW settings of each scope's collection beside the configured ones.

        `configured`: M, ef_construction, ef_search from the settings (a big scope's graph), the
        size from which a scope gets them (`big_from`, 0: every scope) and the `small` graph below
        it, the candidates a search asks each collection for, and the size below which a scope is
        searched exactly; `exact`: the matrices this process holds for that (scopes, vectors, MB);
        `collections`: scope → the collection's own M, ef_construction, ef_search, its vectors,
        whether its graph is one the settings give a scope of its size (`shaped`, `_shape_fits`)
        and whether its ef_search is the configured one too (`matches`; an ef_search measured wider
        than the configured one is: searchindex/tuning.py); `matches`: all of them do;
        `rebuild_needed`: "" or what differs, in words. M and ef_construction are the shape of a
        built graph, so a collection keeps its own until a rebuild recreates it; ef_search is set
        when the index is opened (a chromadb server applies it when it next loads the collection).
        """
        configured = configured_hnsw()
        with self._using("read the index") as collections:
            built = {scope: _graph(collection) for scope, collection in collections.items()}
        for graph in built.values():
            graph["shaped"] = _shape_fits(graph)
            graph["matches"] = graph["shaped"] and _ef_search_for(graph["ef_search"]) == graph["ef_search"]
        return {
            "configured": {
                **configured,
                "big_from": _big_line(),
                "small": graph_shape(0) if _big_line() else None,
                "candidates": CANDIDATES,
                "exact_below": settings.MEMORYUI_VECTOR_EXACT_BELOW,
                "recall_target": settings.MEMORYUI_VECTOR_RECALL_TARGET,
            },
            "exact": EXACT.held(),
            "collections": built,
            "matches": all(graph["matches"] for graph in built.values()),
            "rebuild_needed": _rebuild_needed(built),
        }

    def close(self) -> None:
        """Release the chromadb client (its SQLite files, for the embedded one)."""
        with self._lock:
            client, self._client, self._collections = self._client, None, None
            current = self.url or self._generation == chroma.directory(self.path).generation
        # A client from before a reload belongs to a stopped system: closing it would
        # release the new system's reference instead.
        if client is not None and current:
            chroma.close_http_client(client)

    # --- connection --------------------------------------------------------------------

    @contextmanager
    def _using(self, action: str, *, write: bool = False) -> Iterator[dict]:
        """The checked collections by scope, under the cross-process guard, with errors mapped."""
        with self._guard(action, write=write):
            yield self._load_collections()

    @contextmanager
    def _guard(self, action: str, *, write: bool) -> Iterator[None]:
        """Map errors; for the embedded index also lock the directory and reload if stale."""
        with self._backend(action):
            if self.url:
                yield
                return
            directory = chroma.directory(self.path)
            with directory.lock, chroma.file_lock(self.path, exclusive=write):
                stamp = chroma.stamp(self.path)
                if stamp is None or stamp != directory.stamp:
                    # Another process wrote (or the directory was deleted): this process's
                    # chromadb state is stale. Reload it; every VectorIndex here reconnects.
                    directory.reload(self.path)
                with self._lock:
                    if self._generation != directory.generation:
                        self._client, self._collections = None, None
                        self._generation = directory.generation
                try:
                    yield
                except (ChromaError, OSError):
                    directory.stamp = None  # unsure what state chromadb is left in: reload next time
                    raise
                directory.stamp = chroma.stamp(self.path)

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
            # The handles may be stale (server restarted, collections reset elsewhere): reopen next time.
            self._collections = None
            reason = chroma.reason(exc, self._bounds) if isinstance(exc, httpx.HTTPError) else exc
            raise IndexUnavailable("vector", f"cannot {action} at {self.location}: {reason}") from exc

    def _connect(self):
        with self._lock:
            if self._client is None:
                self._client = (
                    connect_server(self.url, timeout=self.timeout, connect_timeout=self.connect_timeout)
                    if self.url
                    else open_embedded(self.path)
                )
            return self._client

    def _load_collections(self) -> dict:
        """This embedder's collections by scope, checked against what the index recorded, each
        with the configured ef_search (MEMORYUI_CHROMA_HNSW_EF_SEARCH), or its measured one.

        chromadb searches a graph with the ef_search it had when the process loaded it, for as
        long as the process keeps it (a server: until it restarts or drops it); a change of the
        setting reaches the graph the next time it is loaded. The embedded index is reloaded
        here at once: other processes reload anyway, as the database file changed. Setting it
        writes the collection's record only, not its graph, which the shared lock allows.
        """
        with self._lock:
            if self._collections is not None:
                return self._collections
            collections = self._open_collections()
            if self._set_ef_search(collections) and not self.url:
                self._reload_embedded()
                collections = self._open_collections()
            self._collections = collections
            return collections

    def _set_ef_search(self, collections: dict) -> bool:
        """Give each collection the ef_search it should have (`_ef_search_for`); whether any changed."""
        changed = False
        for collection in collections.values():
            ef_search = collection_hnsw(collection)["ef_search"]
            if _ef_search_for(ef_search) != ef_search:
                collection.modify(configuration={"hnsw": {"ef_search": _ef_search_for(ef_search)}})
                changed = True
        return changed

    def _reload_embedded(self) -> None:
        """Reload the embedded index's chromadb (its directory lock held by this thread: see
        _guard), so this process loads each graph again with the ef_search recorded now."""
        directory = chroma.directory(self.path)
        directory.reload(self.path)
        self._client, self._generation = None, directory.generation

    def _open_collections(self) -> dict:
        """This embedder's collections by scope, checked against what the index recorded."""
        with self._lock:
            client = self._connect()
            embedder = self.embedder
            collections = {}
            for listed in client.list_collections():
                if not listed.name.startswith(f"{self.prefix}-"):
                    continue
                metadata = listed.metadata or {}
                recorded, recorded_dim = metadata.get("embedder"), metadata.get("dim")
                if recorded != embedder.name or recorded_dim != embedder.dim:
                    # A non-empty collection of another model, or one bearing our name.
                    if listed.count() or listed.name.startswith(f"{self.collection_name}--"):
                        detail = (
                            ""
                            if recorded_dim == embedder.dim
                            else (f" (dimension {recorded_dim} recorded, {embedder.dim} configured)")
                        )
                        raise EmbedderMismatch(
                            recorded=str(recorded or listed.name),
                            configured=embedder.name,
                            location=self.location,
                            detail=detail,
                        )
                    continue  # an empty collection of another model under its own name: nothing to mix up
                if "scope" not in metadata:
                    raise IndexUnavailable(
                        "vector",
                        f"the index at {self.location} keeps every scope in one collection (an earlier layout); "
                        "rebuild it (`manage.py reindex --full`, or Rebuild on the dashboard)",
                    )
                collections[metadata["scope"]] = client.get_collection(listed.name, embedding_function=None)
            return collections

    def _scope_collection(self, collections: dict, scope: str, *, create: bool, vectors: int = 0):
        """The collection of `scope`, created (and remembered) on first write, its HNSW graph shaped
        by the settings of that time for a scope about to hold `vectors` (`graph_shape`)."""
        collection = collections.get(scope)
        if collection is None and create:
            embedder = self.embedder
            hnsw = {**configured_hnsw(), **graph_shape(vectors)}
            collection = self._connect().get_or_create_collection(
                self.scope_collection_name(scope),
                configuration={"hnsw": {"space": "cosine", **hnsw}},
                metadata={"embedder": embedder.name, "dim": embedder.dim, "scope": scope},
                embedding_function=None,
            )
            collections[scope] = collection
        return collection

    def scope_collection_name(self, scope: str) -> str:
        """`<embedder collection name>--<scope slug>-<hash of the scope>`."""
        slug = re.sub(r"[^a-z0-9]+", "-", scope.lower()).strip("-")[:32].strip("-")
        digest = hashlib.sha256(scope.encode()).hexdigest()[:8]
        return f"{self.collection_name}--{slug}-{digest}" if slug else f"{self.collection_name}--{digest}"
