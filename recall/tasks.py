"""Index work as Celery tasks: small, idempotent, keyed by memory ids."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready
from django.db import transaction

from memoryui.models import TaskRun
from recall import calibration, health, index
from recall.documents import IndexUnavailable
from recall.models import GoldenSet, RecallProfile

CALIBRATE = "calibrate"


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


def enqueue_calibration(golden_set: GoldenSet, *, profile: str, save_as: str, min_answered, actor: str) -> TaskRun:
    """A queued calibration of one golden set, sent to the worker once this transaction commits."""
    params = {"golden": [golden_set.pk], "profile": profile, "save_as": save_as, "min_answered": min_answered}
    run = TaskRun.objects.create(kind=CALIBRATE, actor=actor, params=params)
    transaction.on_commit(lambda: calibrate_golden.delay(str(run.pk)))
    return run


@shared_task(bind=True, max_retries=0)
def calibrate_golden(self, run_id: str) -> dict:
    """What `manage.py calibrate --save-profile` does, for the golden set page's Calibrate button."""
    run = TaskRun.objects.get(pk=run_id)
    if run.status == TaskRun.Status.SUCCEEDED:
        return run.result
    params = run.params
    try:
        golden_sets = list(GoldenSet.objects.filter(pk__in=params["golden"]))
        start = RecallProfile.objects.resolve(params["profile"]).settings
        run.start(sum(g.queries.count() for g in golden_sets))
        samples, skipped = calibration.collect(golden_sets, start.retrieval)
        run.advance(len(samples), {"queries": len(samples)})
        result = calibration.calibrate(
            samples, start.retrieval, k=start.retrieval.limit, min_answered=params.get("min_answered"), skipped=skipped
        )
        embedder = index.get_index("vector").embedder
        profile = calibration.save_profile(params["save_as"], start, result, [g.name for g in golden_sets], embedder)
    except Exception as exc:  # refused, an index down, a profile gone: the run says which and why
        run.fail(f"{type(exc).__name__}: {exc}")
        raise
    run.counts = {"queries": result.queries, "knobs changed": len(result.changed)}
    run.finish({"profile": profile.name, "embedder": embedder.name, **result.to_dict()})
    return run.result
