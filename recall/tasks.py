"""Index work as Celery tasks: small, idempotent, keyed by memory ids."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from recall import health, index
from recall.documents import IndexUnavailable


@shared_task(
    bind=True,
    autoretry_for=(IndexUnavailable,),
    retry_backoff=2,
    retry_backoff_max=300,
    max_retries=10,
)
def sync_index(self, memory_ids: list[str]) -> dict:
    """Refresh the index entries of these memories from the database (safe to run twice)."""
    report = index.sync_memories(memory_ids)
    return {"indexed": report.indexed, "removed": report.removed}


@shared_task
def repair_indexes(actor: str = "task") -> dict:
    """What `reindex` does: verify both indexes, fix the differences, finish pending work."""
    return health.run("repair", actor=actor).result


@shared_task
def rebuild_indexes(actor: str = "task") -> dict:
    """What `reindex --full` does: drop both indexes and index every active memory again
    (also how the vector index moves to a newly configured embedder)."""
    return health.run("rebuild", actor=actor).result


@worker_ready.connect
def _repair_when_a_worker_starts(sender=None, **kwargs) -> None:
    # Work lost while no worker ran (a crash between commit and index, or a store imported
    # by an older version) is found and finished as soon as one is up.
    repair_indexes.delay(actor="worker start")
