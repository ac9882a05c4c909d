"""Background work of the write path, as Celery tasks that record a TaskRun.

Tasks take ids, re-fetch their rows, and are safe to run twice: a run that already succeeded
does nothing, and an extraction retried after its worker died skips the messages it had done
(memoryui.extraction). They are enqueued after the transaction that created their TaskRun
commits, so a worker never looks for a row it cannot see yet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from celery import shared_task
from django.db import transaction

from memoryui import extraction, rollup
from memoryui.models import TaskRun, Transcript

logger = logging.getLogger(__name__)

EXTRACT = "extract"
DECAY = "decay"
CLEANUP = "cleanup"
DEDUP = "dedup"


def _queue(task, *, kind: str, actor: str, params: dict) -> TaskRun:
    """A queued TaskRun, sent to `task` on the worker once this transaction commits."""
    run = TaskRun.objects.create(kind=kind, actor=actor, params=params)
    transaction.on_commit(lambda: task.delay(str(run.pk)))
    return run


@contextmanager
def _failure_recorded(run: TaskRun, what: str) -> Iterator[None]:
    """Record an exception of the block as the run's failure (with its cause), then re-raise."""
    try:
        yield
    except Exception as exc:
        logger.exception("%s failed (task run %s)", what, run.pk)
        run.counts = run.counts or {}
        run.fail(f"{type(exc).__name__}: {exc}")
        raise


def enqueue_extraction(transcript: Transcript, *, actor: str, l1: str = "auto") -> TaskRun:
    """A queued TaskRun for extracting `transcript`, sent to the worker once this transaction commits."""
    params = {"transcript": str(transcript.pk), "scope": transcript.scope, "l1": l1}
    return _queue(extract_transcript, kind=EXTRACT, actor=actor, params=params)


@shared_task(bind=True, max_retries=3, default_retry_delay=5)
def extract_transcript(self, run_id: str) -> dict:
    run = TaskRun.objects.get(pk=run_id)
    if run.status == TaskRun.Status.SUCCEEDED:
        return run.result
    transcript = Transcript.objects.filter(pk=run.params.get("transcript")).first()
    if transcript is None:
        run.fail(f"transcript {run.params.get('transcript')} no longer exists")
        return {}
    total = transcript.messages.filter(role="user").count()
    run.start(total)

    def progress(done: int, counts: dict) -> None:
        run.advance(done, counts)

    with _failure_recorded(run, f"extraction of transcript {transcript.pk}"):
        report = extraction.extract(
            transcript,
            actor=f"task:{run.actor}",
            run_id=str(run.pk),
            progress=progress,
            l1=run.params.get("l1", "auto"),
        )
    result = report.to_dict()
    # Older complete rounds become the transcript's summary once the messages are done (needs an LLM).
    result["rollup"] = rollup.rollup(transcript, actor=f"task:{run.actor}").to_dict()
    run.counts = report.counts
    run.finish(result)
    return run.result


# --- store hygiene ---------------------------------------------------------------------------


@shared_task
def decay_expired_memories(run_id: str | None = None) -> dict:
    """Tombstone expired peripheral memories (the beat schedule sends this without a run)."""
    from memoryui import decay

    if run_id is None:
        run = TaskRun.objects.create(kind=DECAY, actor="schedule", params={})
    else:
        run = TaskRun.objects.get(pk=run_id)
        if run.status == TaskRun.Status.SUCCEEDED:
            return run.result
    run.start(decay.expired().count())
    with _failure_recorded(run, "decay"):
        report = decay.decay(actor=f"task:{run.actor}", progress=lambda done: run.advance(done, {"tombstoned": done}))
    run.counts = {"tombstoned": report.tombstoned}
    run.finish(report.to_dict())
    return run.result


def enqueue_cleanup_step(scope: str, step: str, *, actor: str, l1: str = "auto", cleanup: str | None = None) -> TaskRun:
    """A queued clean-up step (memoryui.cleanup) for the worker, sent once this transaction commits."""
    params = {"scope": scope, "step": step, "l1": l1, "cleanup": cleanup}
    return _queue(run_cleanup_step, kind=CLEANUP, actor=actor, params=params)


@shared_task(bind=True, max_retries=0)
def run_cleanup_step(self, run_id: str) -> dict:
    """Apply one clean-up step. Not retried: a step is recomputed against the store as it is, so
    running it again after a failure is safe and is left to the person driving the wizard."""
    from memoryui import cleanup

    run = TaskRun.objects.get(pk=run_id)
    if run.status == TaskRun.Status.SUCCEEDED:
        return run.result
    run.start(0)

    def progress(done: int, total: int, counts: dict) -> None:
        if run.progress_total != total:
            run.progress_total = total
            TaskRun.objects.filter(pk=run.pk).update(progress_total=total)
        run.advance(done, counts)

    with _failure_recorded(run, f"clean-up step {run.params.get('step')}"):
        report = cleanup.run_step(
            run.params["scope"],
            run.params["step"],
            dry_run=False,
            actor=f"task:{run.actor}",
            l1=run.params.get("l1", "auto"),
            progress=progress,
        )
    run.counts = report.counts
    run.finish(report.to_dict())
    return run.result


def enqueue_dedup(scope: str, *, actor: str, threshold: float) -> TaskRun:
    return _queue(run_dedup, kind=DEDUP, actor=actor, params={"scope": scope, "threshold": threshold})


def enqueue_decay(*, actor: str) -> TaskRun:
    """Decay now, as the schedule runs it."""
    return _queue(decay_expired_memories, kind=DECAY, actor=actor, params={})


@shared_task(bind=True, max_retries=0)
def run_dedup(self, run_id: str) -> dict:
    """Merge every duplicate cluster of a scope at the run's threshold, as one batch."""
    from memoryui import dedup

    run = TaskRun.objects.get(pk=run_id)
    if run.status == TaskRun.Status.SUCCEEDED:
        return run.result
    with _failure_recorded(run, "dedup"):
        report = dedup.find_clusters(run.params["scope"], threshold=run.params.get("threshold"))
        run.start(len(report.clusters))
        batch, results = dedup.merge_all(
            report,
            actor=f"task:{run.actor}",
            progress=lambda done: run.advance(done, {"clusters": done}),
        )
    run.counts = {"clusters": len(results), "merged": sum(len(r.merged) for r in results)}
    run.finish({**run.counts, "batch": str(batch) if results else None, "threshold": report.threshold})
    return run.result
