"""Background work of the write path, as Celery tasks that record a TaskRun (memoryui.background).

Tasks take ids, re-fetch their rows, and are safe to run twice: a run that already succeeded
does nothing, and an extraction retried after its worker died skips the messages it had done
(memoryui.extraction). They are enqueued after the transaction that created their TaskRun
commits, so a worker never looks for a row it cannot see yet.
"""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from memoryui import cleanup, decay, dedup, extraction, merging, rollup
from memoryui.background import Abandoned, TaskRunTask, dispatch, enqueue
from memoryui.models import MemoryEvent, TaskRun, Transcript

EXTRACT = "extract"
DECAY = "decay"
CLEANUP = "cleanup"
DEDUP = "dedup"


def enqueue_extraction(transcript: Transcript, *, actor: str, l1: str = "auto", foreground: bool = False) -> TaskRun:
    """A TaskRun extracting `transcript` with the L1 mode `l1` (auto, always, off), sent to the worker
    once this transaction commits, or run now with `foreground`.

    One extraction of a transcript at a time: while one is queued or running, asking again (with
    whatever `l1`) gives that run back, `reused` set, instead of queueing another. The transcript's
    row lock (on SQLite, the write lock every transaction takes first: transaction_mode IMMEDIATE)
    makes two requests at once see each other.
    """
    if l1 not in extraction.L1_MODES:
        raise ValueError(f"l1 must be one of {', '.join(extraction.L1_MODES)}, got {l1!r}")
    params = {"transcript": str(transcript.pk), "scope": transcript.scope, "l1": l1}
    with transaction.atomic():
        Transcript.objects.select_for_update().filter(pk=transcript.pk).first()
        run = extraction_in_progress(transcript)
        if run is not None:
            run.reused = True
            return run
        run = TaskRun.objects.create(kind=EXTRACT, actor=actor, params=params)
    run.reused = False
    # A foreground run starts once the row is committed: the transcript's lock is not held meanwhile.
    return dispatch(extract_transcript, run, foreground=foreground)


def extraction_in_progress(transcript: Transcript) -> TaskRun | None:
    """The transcript's extraction that is queued or running, if there is one."""
    active = [TaskRun.Status.QUEUED, TaskRun.Status.RUNNING]
    return TaskRun.objects.filter(kind=EXTRACT, params__transcript=str(transcript.pk), status__in=active).first()


@shared_task(
    bind=True, base=TaskRunTask, name="memoryui.tasks.extract_transcript", max_retries=3, default_retry_delay=5
)
def extract_transcript(self, run: TaskRun) -> dict:
    transcript = Transcript.objects.filter(pk=run.params.get("transcript")).first()
    if transcript is None:
        raise Abandoned(f"transcript {run.params.get('transcript')} no longer exists")
    run.start(transcript.messages.filter(role="user").count())
    # The run's id is the batch of what it writes: a retried run keeps adding to the same batch,
    # and the task's page undoes the whole extraction.
    report = extraction.extract(
        transcript,
        actor=f"task:{run.actor}",
        run_id=str(run.pk),
        progress=run.advance,
        l1=run.params.get("l1", "auto"),
        batch=run.pk,
    )
    result = report.to_dict()
    result["batch"] = str(run.pk) if MemoryEvent.objects.filter(batch=run.pk).exists() else None
    # Older complete rounds become the transcript's summary once the messages are done (needs an LLM).
    result["rollup"] = rollup.rollup(transcript, actor=f"task:{run.actor}").to_dict()
    run.counts = report.counts
    return result


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
    """A clean-up step (memoryui.cleanup) for the worker, sent once this transaction commits (or run now)."""
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
