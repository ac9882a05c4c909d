"""Index work as Celery tasks: small, idempotent, keyed by memory ids.

The task names are those of the release that ran them from `recall.tasks`, so messages already
queued under those names still run.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from memoryui import background
from memoryui.background import BrokerError
from memoryui.models import IndexOutbox, TaskRun
from searchindex import health, outbox
from searchindex.documents import IndexUnavailable
from searchindex.indexes import drained_by_outbox, kept_in_step

logger = logging.getLogger(__name__)

SYNC_BATCH = 200
EMBED_BATCH = 250  # memories one embed_batch task embeds: about 7 s of one core with the bundled embedder
EMBED_RUN_KIND = "embed_import"
_LOOKUP_CHUNK = 1000  # ids per IN (...) query
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
            IndexOutbox.objects.filter(attempts=0, run__isnull=True)
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

    Rows held by a bulk import's embedding run that is still running are left to it.
    Sent by the schedule, on the index queue, behind the `sync_index` tasks sent before it: a row
    that has waited that long is one no task is coming for (or, behind a long backlog, one whose
    task is still queued; syncing it twice does no harm).
    """
    waited = timezone.now() - timedelta(seconds=settings.MEMORYUI_INDEX_SWEEP_SECONDS)
    # Rows a bulk import's embedding run still holds are its batches' to do (once the run has
    # ended, failed or not, whatever it left is swept like any other row).
    rows = (
        IndexOutbox.objects.filter(queued_at__lte=waited)
        .exclude(run__status__in=[TaskRun.Status.QUEUED, TaskRun.Status.RUNNING])
        .order_by("queued_at")
    )
    memory_ids = [str(pk) for pk in rows.values_list("memory_id", flat=True)[:SWEEP_LIMIT]]
    for start in range(0, len(memory_ids), SYNC_BATCH):
        outbox.sync_memories(memory_ids[start : start + SYNC_BATCH])
    return {"synced": len(memory_ids), "batches_resent": resend_stalled_embeddings()}


def resend_stalled_embeddings() -> int:
    """Send again the batches of every background import's embedding that has not advanced for
    MEMORYUI_EMBED_STALL_SECONDS, and finish one with nothing left to embed; returns the batches sent.

    A batch whose message the broker lost (a Redis without persistence that restarted) would
    otherwise hold its rows, and the run, for ever; `reindex` embeds the rows but cannot tell the
    run. Sending a batch twice is harmless: the later one finds its rows gone. A run that is only
    slow (its batches queued behind other bulk work) is sent again once per stall period at most.
    """
    if not settings.MEMORYUI_EMBED_STALL_SECONDS:
        return 0
    stalled_before = timezone.now() - timedelta(seconds=settings.MEMORYUI_EMBED_STALL_SECONDS)
    sent = 0
    stalled = TaskRun.objects.filter(
        kind=EMBED_RUN_KIND, status=TaskRun.Status.RUNNING, progressed_at__lte=stalled_before
    ).values_list("pk", flat=True)
    for run_id in stalled:
        with transaction.atomic():
            run = TaskRun.objects.select_for_update().filter(pk=run_id, status=TaskRun.Status.RUNNING).first()
            if run is None or run.progressed_at is None or run.progressed_at > stalled_before:
                continue  # it ended or advanced meanwhile
            held = [str(pk) for pk in IndexOutbox.objects.filter(run=run).values_list("memory_id", flat=True)]
            if not held:  # `reindex` embedded what was left: the run is done
                _advance(str(run.pk), [])
                continue
            batches = _in_batches(held)
            counts = {**run.counts, "batches_resent": run.counts.get("batches_resent", 0) + len(batches)}
            run.advance(run.progress_done, counts)  # the clock restarts: sent again once per period
            logger.warning("embedding run %s stalled: %d batch(es) sent again", run.pk, len(batches))
            transaction.on_commit(lambda run=run, batches=batches: _send_batches(run, batches), robust=True)
            sent += len(batches)
    return sent


@shared_task(name="recall.tasks.repair_indexes")
def repair_indexes(actor: str = "task") -> dict:
    """What `reindex` does: verify both indexes, fix the differences, finish pending work."""
    return health.run("repair", actor=actor).result


@shared_task(name="recall.tasks.rebuild_indexes")
def rebuild_indexes(actor: str = "task") -> dict:
    """What `reindex --full` does: drop both indexes and index every active memory again
    (also how the vector index moves to a newly configured embedder)."""
    return health.run("rebuild", actor=actor).result


@shared_task(name="searchindex.tasks.tune_vector_search")
def tune_vector_search(actor: str = "task", every: bool = False) -> dict:
    """Measure the vector recall of the scopes that need it and give each the ef_search it needs:
    every scope of the exact line or more (`every`, as the dashboard asks), or, on the schedule,
    those never measured or grown or shrunk by a fifth since (`health.tune_due`); nothing is
    recorded when no scope is due, or when measuring is off (MEMORYUI_VECTOR_RECALL_TARGET)."""
    if settings.MEMORYUI_VECTOR_RECALL_TARGET is None:
        return {}
    scopes = None if every else health.tune_due()
    if scopes == []:
        return {}
    return health.run("tune", actor=actor, scopes=scopes).result


def enqueue_sync(sender=None, *, memory_ids: list[str], **kwargs) -> None:
    """Receiver of the store's `outbox_committed`: one `sync_index` per batch of committed memories.

    One sync per transaction, however many writes it held: 500 memories written in one
    transaction are embedded and indexed in batches, not one by one. A broker that refuses is
    no error of the write: the outbox keeps its rows for the sweep, and `background.send` counts
    the refusal in the outage's one log line per period (not a traceback per write).
    """
    with suppress(BrokerError):
        for start in range(0, len(memory_ids), SYNC_BATCH):
            background.send(sync_index, memory_ids[start : start + SYNC_BATCH])


def index_in_background(memory_ids: list[str], *, actor: str) -> TaskRun:
    """Index what a bulk import just committed (its outbox announcements held): the BM25 entries
    here and now, so every row is searchable by keyword when this returns; the vectors by an
    `embed_import` TaskRun fanned out as `embed_batch` tasks of EMBED_BATCH memories, sent after
    commit, so as many worker processes as consume the bulk queue embed at once.

    The outbox rows stay, marked with the run, until their batch has written their vectors: a
    worker that dies leaves them to the redelivered task, a batch that fails for good leaves them
    to the sweep and `reindex`. A BM25 index that is unavailable is left to the batches too (they
    then sync both indexes) and the run says so (`params["bm25_searchable"]` false).
    """
    started = timezone.now()
    ids = list(dict.fromkeys(str(pk) for pk in memory_ids))
    indexes = ("vector",)
    bm25_error = ""
    if not kept_in_step("bm25") and "bm25" in drained_by_outbox():
        try:
            for start in range(0, len(ids), _LOOKUP_CHUNK):
                outbox.sync_memories(ids[start : start + _LOOKUP_CHUNK], indexes=("bm25",))
        except IndexUnavailable as exc:
            indexes, bm25_error = drained_by_outbox(), str(exc)
    run = TaskRun.objects.create(
        kind=EMBED_RUN_KIND,
        actor=actor,
        params={"memories": len(ids), "batch_size": EMBED_BATCH, "indexes": list(indexes)},
    )
    held: list[str] = []
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[start : start + _LOOKUP_CHUNK]
        # Only rows queued before the BM25 sync began: a newer change is its own sync_index's.
        rows = IndexOutbox.objects.filter(memory_id__in=chunk, queued_at__lte=started)
        pending = {str(pk) for pk in rows.values_list("memory_id", flat=True)}
        rows.update(run=run)
        held += [pk for pk in chunk if pk in pending]
    batches = _in_batches(held)
    run.params.update(batches=len(batches), bm25_searchable=not bm25_error)
    if bm25_error:
        run.params["bm25_error"] = bm25_error[:500]
    run.counts = {"batches": len(batches), "batches_done": 0, "embedded": 0}
    run.save(update_fields=["params", "counts"])
    run.start(len(held))
    if not batches:
        run.finish({"embedded": 0})
        return run
    transaction.on_commit(lambda: _send_batches(run, batches), robust=True)
    return run


def _in_batches(memory_ids: list[str]) -> list[list[str]]:
    """The ids in embed_batch tasks' batches of EMBED_BATCH."""
    return [memory_ids[start : start + EMBED_BATCH] for start in range(0, len(memory_ids), EMBED_BATCH)]


def _send_batches(run: TaskRun, batches: list[list[str]]) -> None:
    try:
        for number, batch in enumerate(batches, 1):
            embed_batch.delay(str(run.pk), number, batch)
    except Exception as exc:
        # The broker refused: the rows stay in the outbox for the sweep once the run has failed.
        # (An eager task raised: it recorded its own failure, or is to be retried.)
        if not embed_batch.app.conf.task_always_eager:
            _fail(str(run.pk), f"not queued: {type(exc).__name__}: {exc}")
        raise


@shared_task(bind=True, name="searchindex.tasks.embed_batch", max_retries=5)
def embed_batch(self, run_id: str, number: int, memory_ids: list[str]) -> dict:
    """Write the vectors of one batch of a bulk import (`index_in_background`); safe to run twice.

    Only the memories whose outbox rows the run still holds: a row a newer change released is
    that change's sync_index's, and a batch delivered again after it finished finds none. An
    unavailable index (or database) is retried with backoff; a batch that still fails releases its rows to
    the sweep and marks the run failed (the other batches go on).
    """
    run = TaskRun.objects.filter(pk=run_id).first()
    if run is None:
        return {"embedded": 0, "abandoned": True}
    indexes = tuple(run.params.get("indexes") or ("vector",))
    held = [
        str(pk)
        for pk in IndexOutbox.objects.filter(memory_id__in=memory_ids, run_id=run_id).values_list(
            "memory_id", flat=True
        )
    ]
    try:
        if held:
            outbox.sync_memories(held, indexes=indexes)
        _advance(run_id, held)
    except Exception as exc:
        if isinstance(exc, IndexUnavailable | DatabaseError) and self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=min(300, 2 ** (self.request.retries + 1))) from exc
        logger.exception("embedding batch %s of task run %s failed", number, run_id)
        IndexOutbox.objects.filter(memory_id__in=held, run_id=run_id).update(run=None)
        _fail(run_id, f"batch {number}: {type(exc).__name__}: {exc}", failed=len(held))
        raise
    return {"embedded": len(held)}


def _advance(run_id: str, held: list[str]) -> None:
    """Clear the batch's outbox rows (its BM25 entries were written before the import answered or,
    the run's `indexes` says, just now), count it, and finish the run once it holds no row: in
    one transaction under the run's row lock, so the last batch to land is the one that sees none."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return
        IndexOutbox.objects.filter(memory_id__in=held, run_id=run_id).delete()
        counts = dict(run.counts)
        if held:
            counts["batches_done"] = counts.get("batches_done", 0) + 1
            counts["embedded"] = counts.get("embedded", 0) + len(held)
        remaining = IndexOutbox.objects.filter(run_id=run_id).count()
        run.advance(max(0, run.progress_total - remaining), counts)
        if remaining == 0 and run.status == TaskRun.Status.RUNNING:
            run.finish({"embedded": counts.get("embedded", 0), "batches": counts.get("batches", 0)})


def _fail(run_id: str, error: str, *, failed: int = 0) -> None:
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return
        if failed:
            run.counts = {**run.counts, "failed": run.counts.get("failed", 0) + failed}
        if run.status != TaskRun.Status.FAILED:
            run.fail(error + " (its memories are left to the index sweep and `reindex`)")
        else:
            run.save(update_fields=["counts"])


@worker_ready.connect
def _repair_when_a_worker_starts(sender=None, **kwargs) -> None:
    # Work lost while no worker ran (a crash between commit and index, or a store imported
    # by an older version) is found and finished as soon as one is up.
    repair_indexes.delay(actor="worker start")
