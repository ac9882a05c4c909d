"""Recall work as Celery tasks that record a TaskRun (memoryui.background): calibrating a golden set."""

from __future__ import annotations

from celery import shared_task

from memoryui.background import TaskRunTask, enqueue
from memoryui.models import TaskRun
from recall import calibration
from recall.models import GoldenSet, RecallProfile
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
