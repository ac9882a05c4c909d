"""Background work of extraction, as Celery tasks that record a TaskRun (memoryui.background).

Tasks take ids, re-fetch their rows, and are safe to run twice: a run that already succeeded
does nothing, and an extraction retried after its worker died skips the messages it had done
(ingest.extraction). They are enqueued after the transaction that created their TaskRun
commits, so a worker never looks for a row it cannot see yet. Their names are the ones they were
released with (memoryui.tasks.*): a queued message is routed by its task's name.
"""

from __future__ import annotations

import threading
import time

from celery import shared_task
from django.conf import settings
from django.db import transaction

from ingest import extraction, rollup
from memoryui.background import Abandoned, TaskRunTask, dispatch
from memoryui.models import MemoryEvent, TaskRun, Transcript

EXTRACT = "extract"
DRY_RUN = "extract_dry_run"


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
    return TaskRun.objects.filter(
        kind=EXTRACT, params__transcript=str(transcript.pk), status__in=TaskRun.ACTIVE
    ).first()


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


# --- dry runs --------------------------------------------------------------------------------


# Dry runs a web process does in its requests at once; more wait in the bulk queue as tasks, so a
# flood of them never takes every thread a web process has (gunicorn's --threads).
_INLINE_DRY_RUNS = threading.BoundedSemaphore(max(1, settings.MEMORYUI_DRY_RUN_CONCURRENCY))


def dry_run_fits_a_request(transcript: Transcript) -> bool:
    """Whether a dry run of `transcript` is short enough for a request, or is a task."""
    return transcript.messages.filter(role="user").count() <= settings.MEMORYUI_DRY_RUN_INLINE_MESSAGES


def dry_run_now(transcript: Transcript, *, actor: str, l1: str = "auto") -> extraction.ExtractionReport | None:
    """A dry run done here, in the request, within MEMORYUI_DRY_RUN_SECONDS; None when it is to be a
    task instead: the transcript is too long, or this process is doing as many dry runs as it may."""
    if not dry_run_fits_a_request(transcript) or not _INLINE_DRY_RUNS.acquire(blocking=False):
        return None
    try:
        deadline = time.monotonic() + settings.MEMORYUI_DRY_RUN_SECONDS
        return extraction.extract(transcript, dry_run=True, actor=actor, l1=l1, deadline=deadline)
    finally:
        _INLINE_DRY_RUNS.release()


def enqueue_dry_run(transcript: Transcript, *, actor: str, l1: str = "auto") -> TaskRun:
    """A dry run of `transcript` as a task (writes nothing; its result is the decisions), sent once
    this transaction commits. One at a time per transcript and L1 mode: asking again while one is
    queued or running gives that run back, `reused` set."""
    if l1 not in extraction.L1_MODES:
        raise ValueError(f"l1 must be one of {', '.join(extraction.L1_MODES)}, got {l1!r}")
    params = {"transcript": str(transcript.pk), "scope": transcript.scope, "l1": l1}
    with transaction.atomic():
        Transcript.objects.select_for_update().filter(pk=transcript.pk).first()
        run = TaskRun.objects.filter(kind=DRY_RUN, params=params, status__in=TaskRun.ACTIVE).first()
        if run is not None:
            run.reused = True
            return run
        run = TaskRun.objects.create(kind=DRY_RUN, actor=actor, params=params)
    run.reused = False
    return dispatch(dry_run_transcript, run)


@shared_task(bind=True, base=TaskRunTask, name="memoryui.tasks.dry_run_transcript", max_retries=0)
def dry_run_transcript(self, run: TaskRun) -> dict:
    """What an extraction of the transcript would do now, written nowhere: the report, and every
    outcome (for the transcript page to show beside its message)."""
    transcript = Transcript.objects.filter(pk=run.params.get("transcript")).first()
    if transcript is None:
        raise Abandoned(f"transcript {run.params.get('transcript')} no longer exists")
    run.start(transcript.messages.filter(role="user").count())
    report = extraction.extract(
        transcript, dry_run=True, actor=f"task:{run.actor}", progress=run.advance, l1=run.params.get("l1", "auto")
    )
    run.counts = report.counts
    return {**report.to_dict(), "outcomes": [outcome.to_dict() for outcome in report.outcomes]}
