"""Recall work as Celery tasks: calibrating a golden set (recorded as a TaskRun, memoryui.background),
and pruning recall history past its retention on the schedule."""

from __future__ import annotations

from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from memoryui.background import TaskRunTask, enqueue
from memoryui.models import TaskRun
from recall import calibration
from recall.models import GoldenSet, RecallLogEntry, RecallProfile, RecallTrace
from searchindex.indexes import get_index

CALIBRATE = "calibrate"


def enqueue_calibration(golden_set: GoldenSet, *, profile: str, save_as: str, min_answered, actor: str) -> TaskRun:
    """A queued calibration of one golden set, sent to the worker once this transaction commits."""
    params = {"golden": [golden_set.pk], "profile": profile, "save_as": save_as, "min_answered": min_answered}
    return enqueue(calibrate_golden, kind=CALIBRATE, actor=actor, params=params)


@shared_task(bind=True, base=TaskRunTask, name="recall.tasks.calibrate_golden", max_retries=0)
def calibrate_golden(self, run: TaskRun) -> dict:
    """What `manage.py calibrate --save-profile` does, for the golden set page's Calibrate button.

    Refused sets, an index down or a profile gone fail the run, which says which and why."""
    params = run.params
    golden_sets = list(GoldenSet.objects.filter(pk__in=params["golden"]))
    start = RecallProfile.objects.resolve(params["profile"]).settings
    run.start(sum(g.queries.count() for g in golden_sets))
    samples, skipped = calibration.collect(golden_sets, start.retrieval)
    run.advance(len(samples), {"queries": len(samples)})
    result = calibration.calibrate_recall(samples, start, min_answered=params.get("min_answered"), skipped=skipped)
    embedder = get_index("vector").embedder
    profile = calibration.save_profile(params["save_as"], start, result, [g.name for g in golden_sets], embedder)
    run.counts = {"queries": result.queries, "knobs changed": len(result.changed)}
    return {"profile": profile.name, "embedder": embedder.name, **result.to_dict()}


# --- recall history past its retention ------------------------------------------------------------

# Traces written by agents' recalls, sampled or asked for; traces a person saved (the playground's
# Save, the command's --trace) are kept until deleted.
PRUNED_TRACE_SOURCES = (RecallTrace.Source.API, RecallTrace.Source.MCP)


def prune_recall_history(now: datetime | None = None) -> dict:
    """Delete recall log entries and agents' traces older than MEMORYUI_RECALL_RETENTION_DAYS.

    One retention for both, so a log entry never outlives the trace it links to by design; running
    it twice deletes nothing the second time."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.MEMORYUI_RECALL_RETENTION_DAYS)
    entries, _ = RecallLogEntry.objects.older_than(cutoff).delete()
    traces, _ = RecallTrace.objects.filter(created_at__lt=cutoff, source__in=PRUNED_TRACE_SOURCES).delete()
    return {"log_entries_pruned": entries, "traces_pruned": traces}


@shared_task(name="recall.tasks.prune_recall_history")
def prune_recall_history_task() -> dict:
    """prune_recall_history, on the schedule (CELERY_BEAT_SCHEDULE)."""
    return prune_recall_history()
