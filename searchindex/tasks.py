"""Index work as Celery tasks: small, idempotent, keyed by memory ids.

The task names are those of the release that ran them from `recall.tasks`, so messages already
queued under those names still run.
"""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from searchindex import health, outbox
from searchindex.documents import IndexUnavailable

SYNC_BATCH = 200


@shared_task(
    bind=True,
    name="recall.tasks.sync_index",
    autoretry_for=(IndexUnavailable,),
    retry_backoff=2,
    retry_backoff_max=300,
    max_retries=10,
)
def sync_index(self, memory_ids: list[str]) -> dict:
    """Refresh the index entries of these memories from the database (safe to run twice)."""
    report = outbox.sync_memories(memory_ids)
    return {"indexed": report.indexed, "removed": report.removed}


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
