"""Background work of the write path, as Celery tasks that record a TaskRun.

Tasks take ids, re-fetch their rows, and are safe to run twice: a run that already succeeded
does nothing, and an extraction retried after its worker died skips the messages it had done
(memoryui.extraction). They are enqueued after the transaction that created their TaskRun
commits, so a worker never looks for a row it cannot see yet.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from memoryui import extraction, rollup
from memoryui.models import TaskRun, Transcript

logger = logging.getLogger(__name__)

EXTRACT = "extract"


def enqueue_extraction(transcript: Transcript, *, actor: str, l1: str = "auto") -> TaskRun:
    """A queued TaskRun for extracting `transcript`, sent to the worker once this transaction commits."""
    run = TaskRun.objects.create(
        kind=EXTRACT,
        actor=actor,
        params={"transcript": str(transcript.pk), "scope": transcript.scope, "l1": l1},
    )
    transaction.on_commit(lambda: extract_transcript.delay(str(run.pk)))
    return run


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

    try:
        report = extraction.extract(
            transcript,
            actor=f"task:{run.actor}",
            run_id=str(run.pk),
            progress=progress,
            l1=run.params.get("l1", "auto"),
        )
    except Exception as exc:
        logger.exception("extraction of transcript %s failed", transcript.pk)
        run.counts = run.counts or {}
        run.fail(f"{type(exc).__name__}: {exc}")
        raise
    result = report.to_dict()
    # Older complete rounds become the transcript's summary once the messages are done (needs an LLM).
    result["rollup"] = rollup.rollup(transcript, actor=f"task:{run.actor}").to_dict()
    run.counts = report.counts
    run.finish(result)
    return run.result
