"""The index outbox, drained: bring the index entries of changed memories in line with the database.

The store writes an IndexOutbox row in the same transaction as each change to a memory and,
after commit, sends `memoryui.models.outbox_committed`; `searchindex.tasks.enqueue_sync` (connected
when the app is ready) answers with `sync_index` tasks, which call `sync_memories`. A crash between the
commit and the index write leaves the row behind: it shows as pending and `reindex` (or the
repair a worker runs when it starts) finishes the work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from memoryui.models import IndexOutbox, Memory, PendingVector
from searchindex.documents import IndexedMemory, IndexUnavailable
from searchindex.indexes import drained_by_outbox, get_index, kept_in_step


def _documents(memories) -> list[IndexedMemory]:
    return [IndexedMemory.from_memory(memory) for memory in memories]


@dataclass
class SyncReport:
    indexed: int = 0
    removed: int = 0
    errors: dict[str, str] = field(default_factory=dict)


def sync_memories(
    memory_ids: list[str], *, indexes: tuple[str, ...] | None = None, moved: dict[str, list[str]] | None = None
) -> SyncReport:
    """Bring the index entries of these memories in line with the database.

    `indexes` defaults to those the outbox drains (an index kept in step by the write itself,
    the PostgreSQL lexical one, is already there); repair and rebuild name the ones they fix.
    A memory that moved scope leaves the vector collections of the scopes its outbox row names,
    and of those `moved` names (repair: where the index was found to hold it).

    Active memories are (re)indexed, anything else is removed. The outbox rows are cleared
    only for the work done here, and only if no newer change queued them again meanwhile: a
    sync of some of the indexes the outbox drains (the BM25 entries a bulk import writes before it
    answers) leaves the rows for the rest.
    Raises IndexUnavailable (after recording the error) so a task can retry.
    """
    if indexes is None:
        indexes = drained_by_outbox()
    started = timezone.now()
    memories = list(Memory.objects.filter(pk__in=memory_ids))
    active = [m for m in memories if m.status == Memory.Status.ACTIVE]
    active_ids = {str(m.pk) for m in active}
    gone = [str(pk) for pk in memory_ids if str(pk) not in active_ids]
    gone_ids = set(gone)
    report = SyncReport(indexed=len(active), removed=len(gone))
    documents = _documents(active)
    left: dict[str, list[str]] = {}
    held: dict[str, list[str]] = {}  # a gone memory's entry: its scope and those it moved out of
    if "vector" in indexes:
        if active:
            _reuse_write_path_vectors(active)
        left = _scopes_left(active_ids | gone_ids, moved or {})
        for memory in memories:
            pk = str(memory.pk)
            if pk in gone_ids:
                held[pk] = list(dict.fromkeys([memory.scope, *left.get(pk, [])]))
    for name in indexes:
        try:
            index = get_index(name)
            if documents and name == "vector":
                index.upsert(documents, moved=left, sizes=scope_sizes)
            elif documents:
                index.upsert(documents)
            if gone and name == "vector":
                index.delete(gone, scopes=held)
            elif gone:
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
    if set(drained_by_outbox()) <= set(indexes):
        IndexOutbox.objects.filter(memory_id__in=memory_ids, queued_at__lte=started).delete()
    if "vector" in indexes:
        PendingVector.objects.filter(memory_id__in=memory_ids).delete()
    return report


def scope_sizes(scopes: list[str]) -> dict[str, int]:
    """How many active memories each of these scopes holds: what a scope's new vector collection is
    shaped for (`VectorIndex.upsert`), asked only when a write creates one."""
    counted = Memory.objects.active().filter(scope__in=scopes).values("scope").annotate(n=Count("pk"))
    return {row["scope"]: row["n"] for row in counted.order_by()}


def _scopes_left(memory_ids: set[str], moved: dict[str, list[str]]) -> dict[str, list[str]]:
    """The scopes these memories moved out of, by id: those their outbox rows recorded, and `moved`."""
    left = {pk: list(scopes) for pk, scopes in moved.items() if pk in memory_ids and scopes}
    rows = IndexOutbox.objects.filter(memory_id__in=list(memory_ids)).exclude(moved_from_scopes=[])
    for memory_id, scopes in rows.values_list("memory_id", "moved_from_scopes"):
        pk = str(memory_id)
        left[pk] = list(dict.fromkeys([*left.get(pk, []), *scopes]))
    return left


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


def write_in_step(sender=None, *, memory_ids: list[str], memories=None, **kwargs) -> None:
    """Receiver of the store's `index_entries_due`: write the entries of the indexes kept in step
    (the PostgreSQL lexical index) inside the transaction that changed these memories, from the
    saved objects when the store passed them along, else as the database has them now."""
    if not kept_in_step("bm25"):
        return
    if memories is None or {str(m.pk) for m in memories} != {str(pk) for pk in memory_ids}:
        memories = list(
            Memory.objects.filter(pk__in=memory_ids).only(
                "id", "scope", "kind", "tier", "pinned", "text", "content_hash", "entity_key", "metadata", "status"
            )
        )
    active = [memory for memory in memories if memory.status == Memory.Status.ACTIVE]
    active_ids = {str(memory.pk) for memory in active}
    index = get_index("bm25")
    index.upsert(_documents(active))
    index.delete([str(pk) for pk in memory_ids if str(pk) not in active_ids])
