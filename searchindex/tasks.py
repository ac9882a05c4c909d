"""Index work as Celery tasks: small, idempotent, keyed by memory ids.

The task names are those of the release that ran them from `recall.tasks`, so messages already
queued under those names still run.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from memoryui.models import IndexOutbox
from searchindex import health, outbox
from searchindex.documents import IndexUnavailable

SYNC_BATCH = 200
SWEEP_LIMIT = 5 * SYNC_BATCH  # outbox rows one sweep syncs; the next sweep takes the rest


@shared_task(
    bind=True,
    name="recall.tasks.sync_index",
    autoretry_for=(IndexUnavailable,),
    retry_backoff=2,
    retry_backoff_max=300,
    max_retries=10,
)
def sync_index(self, memory_ids: list[str]) -> dict:
    """Refresh the index entries of these memories from the database (safe to run twice).

    Only the memories still pending in the outbox (an earlier task may have done the others),
    and, up to SYNC_BATCH, the oldest other pending ones along with them: a sync of many costs
    about what a sync of one does (an embedding batch, one chromadb upsert, one whoosh commit),
    so a burst of small transactions (an extraction writes one a message) is indexed in a few
    syncs, and a memory written behind it is searchable in seconds, not after hundreds of syncs
    of one. Rows that failed before are left to their own task, the sweep and `reindex`.
    """
    asked = [str(pk) for pk in memory_ids]
    pending = {str(pk) for pk in IndexOutbox.objects.filter(memory_id__in=asked).values_list("memory_id", flat=True)}
    batch = [pk for pk in dict.fromkeys(asked) if pk in pending]
    if len(batch) < SYNC_BATCH:
        along = (
            IndexOutbox.objects.filter(attempts=0)
            .exclude(memory_id__in=batch)
            .order_by("queued_at")
            .values_list("memory_id", flat=True)[: SYNC_BATCH - len(batch)]
        )
        batch += [str(pk) for pk in along]
    if not batch:
        return {"indexed": 0, "removed": 0, "already": len(asked)}
    report = outbox.sync_memories(batch)
    return {"indexed": report.indexed, "removed": report.removed, "along": len(set(batch) - set(asked))}


@shared_task(name="searchindex.tasks.sync_pending")
def sync_pending() -> dict:
    """Sync the memories whose outbox rows have waited longer than MEMORYUI_INDEX_SWEEP_SECONDS:
    their `sync_index` was never sent (the broker was away when they committed) or never ran.

    Sent by the schedule, on the index queue, behind the `sync_index` tasks sent before it: a row
    that has waited that long is one no task is coming for (or, behind a long backlog, one whose
    task is still queued; syncing it twice does no harm).
    """
    waited = timezone.now() - timedelta(seconds=settings.MEMORYUI_INDEX_SWEEP_SECONDS)
    rows = IndexOutbox.objects.filter(queued_at__lte=waited).order_by("queued_at")
    memory_ids = [str(pk) for pk in rows.values_list("memory_id", flat=True)[:SWEEP_LIMIT]]
    for start in range(0, len(memory_ids), SYNC_BATCH):
        outbox.sync_memories(memory_ids[start : start + SYNC_BATCH])
    return {"synced": len(memory_ids)}


@shared_task(name="recall.tasks.repair_indexes")
def repair_indexes(actor: str = "task") -> dict:
    """What `reindex` does: verify both indexes, fix the differences, finish pending work."""
    return health.run("repair", actor=actor).result


@shared_task(name="recall.tasks.rebuild_indexes")
def rebuild_indexes(actor: str = "task") -> dict:
    """What `reindex --full` does: drop both indexes and index every active memory again
    (also how the vector index moves to a newly configured embedder)."""
    return health.run("rebuild", actor=actor).result


def enqueue_sync(sender=None, *, memory_ids: list[str], **kwargs) -> None:
    """Receiver of the store's `outbox_committed`: one `sync_index` per batch of committed memories.

    One sync per transaction, however many writes it held: 500 memories written in one
    transaction are embedded and indexed in batches, not one by one.
    """
    for start in range(0, len(memory_ids), SYNC_BATCH):
        sync_index.delay(memory_ids[start : start + SYNC_BATCH])


@worker_ready.connect
def _repair_when_a_worker_starts(sender=None, **kwargs) -> None:
    # Work lost while no worker ran (a crash between commit and index, or a store imported
    # by an older version) is found and finished as soon as one is up.
    repair_indexes.delay(actor="worker start")
