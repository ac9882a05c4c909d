"""Exact vector search of small scopes: each one's vectors held in this process as one matrix.

Below MEMORYUI_VECTOR_EXACT_BELOW vectors, multiplying the query by every vector of a scope costs
about what HNSW's graph search does, and it is always right: HNSW is approximate, and a graph
that lost links to deletes, or was built with small settings, misses neighbours that brute force
cannot. bench/hnsw_sweep.py's exact line measures where the two cost the same. Above the line the
scope's collection is searched by its HNSW graph (searchindex/vector.py).

Freshness. Every write to a scope's collection ends by giving the collection a new random mark in
its metadata (`WRITTEN`). A matrix remembers the mark it was read under (the mark is read before
the vectors) and is used only while the collection still bears that mark, so a write by any
process, or any host of a chromadb server, makes it stale at once. The embedded index's own
writes, made under its exclusive lock by a process that knows the mark before and after, patch
this process's matrix in place of making it stale (copy on write: a search in another thread
keeps the matrix it started with). A stale scope is searched by HNSW until it is read again.

Reading. Reading vectors out of chromadb is slow (~50 µs a vector, bench/hnsw_sweep.py's load
column), so a search never waits for it: the scope is searched by HNSW, and one background thread
of the process reads the matrix. A scope is read again at most every RELOAD_FACTOR times its last
read's duration (at least MIN_GAP seconds), so a scope written to all the time costs its process
at most about 1/RELOAD_FACTOR of a core in reads; it is searched by HNSW in between.

Exit. A process that exits while its thread reads (a command that searched once) stops the read
between two pages and waits for it: chromadb's native code must not be left running while the
interpreter shuts down, which crashes it.

Memory. At most MEMORYUI_VECTOR_EXACT_MB megabytes of matrices a process, the least recently used
dropped first.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings

__all__ = ["EXACT", "WRITTEN", "ExactScopes", "Matrix", "new_mark", "unit_rows"]

log = logging.getLogger(__name__)

WRITTEN = "written"  # the collection metadata key holding its write mark
RELOAD_FACTOR = 20
MIN_GAP = 1.0  # seconds between two reads of one scope, at least
FAILED_GAP = 30.0  # seconds before a scope whose read failed is tried again
# Seconds a scope counted at or above the line is searched by HNSW without its mark being asked for
# (a request to a chromadb server): a big scope falls below the line only by deleting thousands.
BIG_RECHECK = 60.0


def new_mark() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Matrix:
    """One scope's vectors (unit rows, float32) as read under `mark`."""

    mark: str | None
    ids: tuple[str, ...]
    rows: dict[str, int]
    vectors: np.ndarray

    @classmethod
    def build(cls, mark: str | None, found: dict[str, np.ndarray], dim: int) -> Matrix:
        ids = tuple(found)
        vectors = np.empty((len(ids), dim), dtype=np.float32)
        for n, pk in enumerate(ids):
            vectors[n] = found[pk]
        return cls(mark, ids, {pk: n for n, pk in enumerate(ids)}, unit_rows(vectors))

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes)

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[float, str]]:
        """The k nearest, as (cosine distance, id) pairs, nearest first (ties by id)."""
        if not self.ids or k <= 0:
            return []
        norm = float(np.linalg.norm(query))
        similarities = self.vectors @ (query / norm if norm else query)
        best = np.argpartition(-similarities, k - 1)[:k] if k < len(self.ids) else np.arange(len(self.ids))
        return sorted((1.0 - float(similarities[n]), self.ids[n]) for n in best)

    def stored(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {pk: self.vectors[self.rows[pk]] for pk in ids if pk in self.rows}

    def patched(self, mark: str, upserted: Sequence[str], vectors: np.ndarray | None, deleted: Sequence[str]) -> Matrix:
        """A new matrix with these rows written and removed, under the collection's new mark."""
        gone = {pk for pk in deleted if pk in self.rows}
        kept = [n for n, pk in enumerate(self.ids) if pk not in gone] if gone else None
        ids = list(self.ids) if kept is None else [self.ids[n] for n in kept]
        matrix = self.vectors.copy() if kept is None else self.vectors[kept]
        rows = {pk: n for n, pk in enumerate(ids)}
        added_ids, added = [], []
        if upserted:
            unit = unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(upserted), -1))
            for pk, vector in zip(upserted, unit, strict=True):
                if pk in rows:
                    matrix[rows[pk]] = vector
                else:
                    rows[pk] = len(ids) + len(added_ids)
                    added_ids.append(pk)
                    added.append(vector)
        if added:
            matrix = np.vstack([matrix, np.asarray(added, dtype=np.float32)])
        return Matrix(mark, tuple(ids + added_ids), rows, matrix)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (a zero row is left as it is)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32, copy=False)


# What a read returns: the mark it read under, and the matrix, or None when the scope holds the line
# or more vectors (it is searched by HNSW until its mark changes).
Read = tuple[str | None, Matrix | None]


class ExactScopes:
    """This process's matrices, by key (the index's location and the collection's id)."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Condition()
        self._matrices: OrderedDict[Hashable, Matrix] = OrderedDict()  # least recently used first
        # key → the mark it was counted at or above the line at, and when that was last known true
        self._big: dict[Hashable, tuple[str | None, float]] = {}
        self._not_before: dict[Hashable, float] = {}
        self._queue: OrderedDict[Hashable, Callable[[], Read]] = OrderedDict()
        self._reading: Hashable | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def _here(self) -> None:
        """After a fork the parent's thread is gone and its lock may be held: start over."""
        if self._pid != os.getpid():
            self._reset()

    # --- searching -------------------------------------------------------------------

    def get(self, key: Hashable, mark: str | None) -> Matrix | None:
        """The matrix of `key` if it was read under `mark` (the collection's current one)."""
        self._here()
        with self._lock:
            matrix = self._matrices.get(key)
            if matrix is None or matrix.mark != mark:
                return None
            self._matrices.move_to_end(key)
            return matrix

    def known_big(self, key: Hashable) -> bool:
        """Whether this scope held the line or more vectors within the last BIG_RECHECK seconds:
        search it by HNSW without asking for its mark."""
        self._here()
        with self._lock:
            big = self._big.get(key)
            return big is not None and time.monotonic() - big[1] < BIG_RECHECK

    def request(self, key: Hashable, mark: str | None, read: Callable[[], Read]) -> None:
        """Have the background thread `read()` this scope, unless it is known to hold the line or
        more vectors at this mark, is already waiting, or was read too recently."""
        self._here()
        with self._lock:
            big = self._big.get(key)
            if big is not None and big[0] == mark:
                self._big[key] = (mark, time.monotonic())  # not written since: still as big
                return
            if key in self._queue or key == self._reading or time.monotonic() < self._not_before.get(key, 0.0):
                return
            if self._stopping:
                return
            self._queue[key] = read
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memoryui-exact-reader", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    @property
    def stopping(self) -> bool:
        """The process is exiting: a read in progress gives up at its next page."""
        return self._stopping

    def stop(self, timeout: float = 30.0) -> None:
        """No more reads; wait for the one in progress to give up (registered to run at exit)."""
        if self._pid != os.getpid():
            return
        with self._lock:
            self._stopping = True
            self._queue.clear()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def read_now(self, key: Hashable, read: Callable[[], Read]) -> Matrix | None:
        """Read this scope in the caller's thread (what `VectorIndex.warm` does)."""
        self._here()
        return self._read(key, read)

    def wait(self, timeout: float = 30.0) -> bool:
        """Until no read is waiting or running; whether that happened within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._queue or self._reading is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    # --- writing -----------------------------------------------------------------------

    def patch(
        self,
        key: Hashable,
        *,
        before: str | None,
        after: str,
        upserted: Sequence[str] = (),
        vectors: np.ndarray | None = None,
        deleted: Sequence[str] = (),
    ) -> None:
        """Apply a write this process made under the collection's exclusive lock: the matrix read
        under `before` becomes the one under `after`; any other is stale and is dropped."""
        self._here()
        with self._lock:
            self._big.pop(key, None)
            matrix = self._matrices.pop(key, None)
            if matrix is None or matrix.mark != before:
                return
            matrix = matrix.patched(after, upserted, vectors, deleted)
            if len(matrix.ids) < settings.MEMORYUI_VECTOR_EXACT_BELOW:
                self._keep(key, matrix)
            else:
                self._big[key] = (after, time.monotonic())

    def drop(self, key: Hashable) -> None:
        self._here()
        with self._lock:
            self._matrices.pop(key, None)
            self._big.pop(key, None)

    def drop_where(self, belongs: Callable[[Hashable], bool]) -> None:
        """Forget every scope whose key `belongs` (an index reset)."""
        self._here()
        with self._lock:
            for key in [key for key in self._matrices if belongs(key)]:
                del self._matrices[key]
            for key in [key for key in self._big if belongs(key)]:
                del self._big[key]
            for key in [key for key in self._not_before if belongs(key)]:
                del self._not_before[key]

    def clear(self) -> None:
        self._here()
        self.wait()
        with self._lock:
            self._matrices.clear()
            self._big.clear()
            self._not_before.clear()

    def held(self) -> dict:
        """What the dashboard shows: scopes held, their vectors and megabytes."""
        self._here()
        with self._lock:
            return {
                "scopes": len(self._matrices),
                "vectors": sum(len(m.ids) for m in self._matrices.values()),
                "mb": round(sum(m.nbytes for m in self._matrices.values()) / 2**20, 1),
            }

    # --- reading -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                key, read = self._queue.popitem(last=False)
                self._reading = key
            try:
                self._read(key, read)
            finally:
                with self._lock:
                    self._reading = None
                    self._lock.notify_all()

    def _read(self, key: Hashable, read: Callable[[], Read]) -> Matrix | None:
        started = time.monotonic()
        try:
            mark, matrix = read()
        except Exception:  # an index that cannot be read is searched by HNSW, and read again later
            log.warning("could not read a scope's vectors for exact search", exc_info=True)
            with self._lock:
                self._not_before[key] = time.monotonic() + FAILED_GAP
            return None
        took = time.monotonic() - started
        with self._lock:
            self._not_before[key] = time.monotonic() + max(MIN_GAP, RELOAD_FACTOR * took)
            if matrix is None:
                self._matrices.pop(key, None)
                self._big[key] = (mark, time.monotonic())
                return None
            self._big.pop(key, None)
            self._keep(key, matrix)
            return matrix

    def _keep(self, key: Hashable, matrix: Matrix) -> None:
        """Hold `matrix`, dropping the least recently used others beyond the memory allowed (called
        with the lock held)."""
        self._matrices[key] = matrix
        self._matrices.move_to_end(key)
        limit = settings.MEMORYUI_VECTOR_EXACT_MB * 2**20
        while self._matrices and sum(m.nbytes for m in self._matrices.values()) > limit:
            self._matrices.popitem(last=False)


EXACT = ExactScopes()
atexit.register(EXACT.stop)
