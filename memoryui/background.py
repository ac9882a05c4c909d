"""The bookkeeping every background task shares: its TaskRun row, from queue to outcome.

A task built on `TaskRunTask` is sent the id of its TaskRun and given the row itself:

- the row is taken with `select_for_update`, so two deliveries of one message (a worker that
  died after starting it, then a redelivery) see each other's status; a run that already
  succeeded is not done again: its stored result is returned (tasks are idempotent);
- what the task returns is its result, stored with `TaskRun.finish`;
- an exception is recorded on the row (`TaskRun.fail`, with its type and message, and logged)
  and re-raised, so Celery's retry settings apply; `Abandoned` is recorded and not re-raised
  (there is nothing left to do: the transcript was deleted, say).

`enqueue` creates a queued TaskRun and sends the task once the transaction commits, so a
worker never looks for a row it cannot see yet (`dispatch` sends a run created otherwise); the
commands run the same task in the foreground through it, from the same params. A run the broker
refuses is marked failed, never left queued for a worker that will not see it.
"""

from __future__ import annotations

import logging

from celery import Task
from django.db import transaction
from django.utils import timezone

from memoryui.models import TaskRun

logger = logging.getLogger(__name__)


class Abandoned(Exception):
    """The run cannot be done and retrying will not help; its message is the run's error."""


class TaskRunTask(Task):
    """Base class of the tasks that record their work in a TaskRun (see the module docstring).

    `run_kind` names the TaskRun of a task sent without one (the beat schedule sends the decay
    task with no run: one is created, its actor "schedule").
    """

    run_kind: str = ""
    # Callers send the run's id (or nothing, for the schedule); the function is given the row,
    # so Celery's check of the arguments against the function's signature does not apply.
    typing = False

    def __call__(self, run_id: str | None = None, *args, **kwargs):
        run = self.claim(run_id)
        if run.status == TaskRun.Status.SUCCEEDED:
            return run.result
        try:
            result = self.run(run, *args, **kwargs)
        except Abandoned as exc:
            run.fail(str(exc))
            return {}
        except Exception as exc:
            logger.exception("%s failed (task run %s)", self.name, run.pk)
            run.counts = run.counts or {}
            run.fail(f"{type(exc).__name__}: {exc}")
            raise
        run.finish(result)
        return run.result

    def claim(self, run_id: str | None) -> TaskRun:
        """The run's row, read under a row lock (or a new one for a task sent without a run)."""
        if run_id is None:
            return TaskRun.objects.create(kind=self.run_kind or self.name, actor="schedule", params={})
        with transaction.atomic():
            return TaskRun.objects.select_for_update().get(pk=run_id)


def enqueue(task, *, kind: str, actor: str, params: dict, foreground: bool = False) -> TaskRun:
    """A queued TaskRun, sent to `task` on the worker once this transaction commits.

    `foreground` runs the task here and now instead (the commands without --background), from
    the same params, and returns the finished run: one place builds what a run is asked.
    """
    run = TaskRun.objects.create(kind=kind, actor=actor, params=params)
    return dispatch(task, run, foreground=foreground)


def dispatch(task, run: TaskRun, *, foreground: bool = False) -> TaskRun:
    """Send a queued run to `task` on the worker once this transaction commits (or, `foreground`,
    run it now and return it finished)."""
    if foreground:
        task(str(run.pk))
        run.refresh_from_db()
        return run
    transaction.on_commit(lambda: _send(task, run))
    return run


def _send(task, run: TaskRun) -> None:
    try:
        task.delay(str(run.pk))
    except Exception as exc:
        # The broker refused it (down, say): no worker will ever see this run, so it must not
        # look queued (a queued extraction stands in for the next request of its transcript).
        # An eager task that failed has recorded its failure already.
        TaskRun.objects.filter(pk=run.pk, status=TaskRun.Status.QUEUED).update(
            status=TaskRun.Status.FAILED, finished_at=timezone.now(), error=f"not queued: {type(exc).__name__}: {exc}"
        )
        raise
