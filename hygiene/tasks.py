"""Background work of store hygiene (decay, clean-up, dedup), as Celery tasks that record a TaskRun
(memoryui.background). Their names are the ones they were released with (memoryui.tasks.*): a
queued message is routed by its task's name.
"""

from __future__ import annotations

from celery import shared_task

from hygiene import cleanup, decay, dedup, merging
from memoryui.background import TaskRunTask, enqueue
from memoryui.models import TaskRun

DECAY = "decay"
CLEANUP = "cleanup"
DEDUP = "dedup"


# --- store hygiene ---------------------------------------------------------------------------


@shared_task(bind=True, base=TaskRunTask, name="memoryui.tasks.decay_expired_memories", run_kind=DECAY)
def decay_expired_memories(self, run: TaskRun) -> dict:
    """Tombstone expired peripheral memories (the beat schedule sends this without a run)."""
    run.start(decay.expired().count())
    report = decay.decay(actor=f"task:{run.actor}", progress=lambda done: run.advance(done, {"tombstoned": done}))
    run.counts = {"tombstoned": report.tombstoned}
    return report.to_dict()


def enqueue_decay(*, actor: str) -> TaskRun:
    """Decay now, as the schedule runs it."""
    return enqueue(decay_expired_memories, kind=DECAY, actor=actor, params={})


def enqueue_cleanup_step(
    scope: str, step: str, *, actor: str, l1: str = "auto", cleanup: str | None = None, foreground: bool = False
) -> TaskRun:
    """A clean-up step (hygiene.cleanup) for the worker, sent once this transaction commits (or run now)."""
    params = {"scope": scope, "step": step, "l1": l1, "cleanup": cleanup}
    return enqueue(run_cleanup_step, kind=CLEANUP, actor=actor, params=params, foreground=foreground)


@shared_task(bind=True, base=TaskRunTask, name="memoryui.tasks.run_cleanup_step", max_retries=0)
def run_cleanup_step(self, run: TaskRun) -> dict:
    """Apply one clean-up step. Not retried: a step is recomputed against the store as it is, so
    running it again after a failure is safe and is left to the person driving the wizard."""
    run.start(0)

    def progress(done: int, total: int, counts: dict) -> None:
        if run.progress_total != total:
            run.progress_total = total
            TaskRun.objects.filter(pk=run.pk).update(progress_total=total)
        run.advance(done, counts)

    report = cleanup.run_step(
        run.params["scope"],
        run.params["step"],
        dry_run=False,
        actor=f"task:{run.actor}",
        l1=run.params.get("l1", "auto"),
        progress=progress,
    )
    run.counts = report.counts
    return report.to_dict()


def enqueue_dedup(scope: str, *, actor: str, threshold: float, foreground: bool = False) -> TaskRun:
    """Merging every duplicate cluster of `scope` at `threshold`, as a task (or run now)."""
    params = {"scope": scope, "threshold": threshold}
    return enqueue(run_dedup, kind=DEDUP, actor=actor, params=params, foreground=foreground)


@shared_task(bind=True, base=TaskRunTask, name="memoryui.tasks.run_dedup", max_retries=0)
def run_dedup(self, run: TaskRun) -> dict:
    """Merge every duplicate cluster of a scope at the run's threshold, as one batch."""
    report = dedup.find_clusters(run.params["scope"], threshold=run.params.get("threshold"))
    run.start(len(report.clusters))
    batch, results = merging.merge_all(
        report,
        actor=f"task:{run.actor}",
        progress=lambda done: run.advance(done, {"clusters": done}),
    )
    run.counts = {"clusters": len(results), "merged": sum(len(r.merged) for r in results)}
    return {**run.counts, "batch": str(batch) if results else None, "threshold": report.threshold}
