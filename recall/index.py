"""Keeping the search indexes consistent with the database.

The database is the source of truth; the vector (chromadb) and BM25 (whoosh) indexes hold a
derived copy of every active memory. Each change to a memory queues an IndexOutbox row in
the same transaction and, after commit, a `sync_index` task; `verify()` compares each index
with the database (missing, stale and orphaned entries), `repair()` fixes what verify found
and finishes pending work, `rebuild()` starts both indexes over.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction
from django.utils import timezone

from memoryui.models import IndexOutbox, Memory, PendingVector
from recall.documents import IndexedMemory, IndexUnavailable

_lock = threading.Lock()
_indexes: dict[str, object] = {}

INDEX_NAMES = ("vector", "bm25")
CHUNK = 500


def get_index(name: str):
    """The process's open index by name ("vector" or "bm25"), opened on first use."""
    with _lock:
        if name not in _indexes:
            _indexes[name] = _open(name)
        return _indexes[name]


def _open(name: str):
    if name == "vector":
        from recall.vector import VectorIndex

        return VectorIndex()
    if name == "bm25":
        from recall.lexical import LexicalIndex

        return LexicalIndex()
    raise ValueError(f"unknown index {name!r}; one of {', '.join(INDEX_NAMES)}")


def close_indexes() -> None:
    """Close and forget the open indexes (settings changed, or the directory was replaced)."""
    with _lock:
        for opened in _indexes.values():
            close = getattr(opened, "close", None)
            if close:
                close()
        _indexes.clear()


def _documents(memories) -> list[IndexedMemory]:
    return [IndexedMemory.from_memory(memory) for memory in memories]


@dataclass
class SyncReport:
    indexed: int = 0
    removed: int = 0
    errors: dict[str, str] = field(default_factory=dict)


def sync_memories(memory_ids: list[str], *, indexes: tuple[str, ...] = INDEX_NAMES) -> SyncReport:
    """Bring the index entries of these memories in line with the database.

    Active memories are (re)indexed, anything else is removed. The outbox rows are cleared
    only for the work done here, and only if no newer change queued them again meanwhile.
    Raises IndexUnavailable (after recording the error) so a task can retry.
    """
    started = timezone.now()
    memories = list(Memory.objects.filter(pk__in=memory_ids))
    active = [m for m in memories if m.status == Memory.Status.ACTIVE]
    active_ids = {str(m.pk) for m in active}
    gone = [str(pk) for pk in memory_ids if str(pk) not in active_ids]
    report = SyncReport(indexed=len(active), removed=len(gone))
    documents = _documents(active)
    if active and "vector" in indexes:
        _reuse_write_path_vectors(active)
    for name in indexes:
        try:
            index = get_index(name)
            if documents:
                index.upsert(documents)
            if gone:
                index.delete(gone)
        except IndexUnavailable as exc:
            report.errors[name] = str(exc)
    if report.errors:
        message = "; ".join(report.errors.values())
        with transaction.atomic():
            for row in IndexOutbox.objects.select_for_update().filter(memory_id__in=memory_ids):
                row.attempts += 1
                row.last_error = message[:2000]
                row.save(update_fields=["attempts", "last_error"])
        raise IndexUnavailable(", ".join(report.errors), message)
    IndexOutbox.objects.filter(memory_id__in=memory_ids, queued_at__lte=started).delete()
    if "vector" in indexes:
        PendingVector.objects.filter(memory_id__in=memory_ids).delete()
    return report


def _reuse_write_path_vectors(memories) -> None:
    """Hand the embedder the vectors the write path computed (dedup layer 3) for these texts."""
    rows = PendingVector.objects.filter(memory_id__in=[m.pk for m in memories]).values_list(
        "memory_id", "vector", "embedder", "content_hash"
    )
    if not rows:
        return
    try:
        embedder = get_index("vector").embedder
    except IndexUnavailable:
        return
    by_id = {m.pk: m for m in memories}
    vectors = {}
    for memory_id, blob, embedder_name, content_hash in rows:
        memory = by_id.get(memory_id)
        if memory and embedder_name == embedder.name and content_hash == memory.content_hash:
            vectors[memory.text] = np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32)
    embedder.remember_passages(vectors)


@dataclass
class IndexDiff:
    """How one index differs from the database."""

    index: str
    database: int = 0
    entries: int = 0
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.orphaned or self.error)

    def as_dict(self, *, sample: int = 20) -> dict:
        return {
            "index": self.index,
            "ok": self.ok,
            "database": self.database,
            "entries": self.entries,
            "missing": len(self.missing),
            "stale": len(self.stale),
            "orphaned": len(self.orphaned),
            "examples": {
                "missing": self.missing[:sample],
                "stale": self.stale[:sample],
                "orphaned": self.orphaned[:sample],
            },
            "error": self.error,
        }


def expected_entries() -> dict[str, str]:
    """What every index should hold: active memory id → its index fingerprint."""
    expected = {}
    queryset = Memory.objects.active().only(
        "id", "scope", "kind", "tier", "pinned", "text", "content_hash", "entity_key", "metadata"
    )
    for memory in queryset.iterator(chunk_size=2000):
        document = IndexedMemory.from_memory(memory)
        expected[document.id] = document.content_hash
    return expected


def verify(indexes: tuple[str, ...] = INDEX_NAMES) -> list[IndexDiff]:
    """Compare each index with the database; nothing is changed."""
    expected = expected_entries()
    diffs = []
    for name in indexes:
        diff = IndexDiff(index=name, database=len(expected))
        try:
            actual = get_index(name).entries()
        except IndexUnavailable as exc:
            diff.error = str(exc)
            diffs.append(diff)
            continue
        fingerprint = get_index(name).entry_fingerprint
        diff.entries = len(actual)
        diff.missing = sorted(set(expected) - set(actual))
        diff.orphaned = sorted(set(actual) - set(expected))
        diff.stale = sorted(pk for pk in set(expected) & set(actual) if fingerprint(expected[pk]) != actual[pk])
        diffs.append(diff)
    return diffs


def repair(diffs: list[IndexDiff] | None = None) -> dict:
    """Fix what `verify` found (re-index missing and stale, remove orphans) and clear the outbox."""
    diffs = diffs if diffs is not None else verify()
    done = {}
    for diff in diffs:
        if diff.error:
            done[diff.index] = {"error": diff.error}
            continue
        todo = diff.missing + diff.stale
        for start in range(0, len(todo), CHUNK):
            sync_memories(todo[start : start + CHUNK], indexes=(diff.index,))
        if diff.orphaned:
            get_index(diff.index).delete(diff.orphaned)
        done[diff.index] = {"reindexed": len(todo), "removed": len(diff.orphaned)}
    pending = [str(pk) for pk in IndexOutbox.objects.values_list("memory_id", flat=True)]
    for start in range(0, len(pending), CHUNK):
        sync_memories(pending[start : start + CHUNK])
    done["outbox_cleared"] = len(pending)
    return done


def rebuild(indexes: tuple[str, ...] = INDEX_NAMES) -> dict:
    """Drop the indexes and index every active memory again from the database."""
    for name in indexes:
        get_index(name).reset()
    ids = list(Memory.objects.active().values_list("pk", flat=True))
    for start in range(0, len(ids), CHUNK):
        sync_memories([str(pk) for pk in ids[start : start + CHUNK]], indexes=indexes)
    if "bm25" in indexes:
        get_index("bm25").optimize()  # one segment instead of one per chunk: faster searches
    return {name: len(ids) for name in indexes}
