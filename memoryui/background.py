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

Every message to the broker goes through `send`: a broker that is down refuses each write's task
(and each write's index sync, which the outbox keeps for the sweep), so instead of a warning (or a
traceback) per write, each process logs one line per period, once the period that began with a
refusal has passed: how many sends the broker refused in it, and its error once (`outage`).
"""

from __future__ import annotations

import logging
import threading

from celery import Task
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from memoryui import runs
from memoryui.models import TaskRun
from memoryui.models.taskrun import Withdrawn

logger = logging.getLogger(__name__)

OUTAGE_LOG_SECONDS = 60.0


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
        if run is None:  # another live worker has it, or it was cancelled (memoryui.runs)
            return {}
        if run.status == TaskRun.Status.SUCCEEDED:
            return run.result
        try:
            result = self.run(run, *args, **kwargs)
            run.finish(result)
        except Withdrawn:
            logger.info("%s stopped: task run %s was cancelled or taken over", self.name, run.pk)
            return {}
        except Abandoned as exc:
            run.fail(str(exc))
            return {}
        except Exception as exc:
            logger.exception("%s failed (task run %s)", self.name, run.pk)
            run.counts = run.counts or {}
            try:
                run.fail(f"{type(exc).__name__}: {exc}")
            except Withdrawn:
                return {}
            raise
        return run.result

    def claim(self, run_id: str | None) -> TaskRun | None:
        """The run's row, taken for this process under its row lock (`memoryui.runs.take`: None when
        it is not this process's to do), or a new one for a task sent without a run."""
        if run_id is None:
            return TaskRun.objects.create(
                kind=self.run_kind or self.name, actor="schedule", params={}, task_name=self.name,
                status=TaskRun.Status.RUNNING, worker=runs.holder(), progressed_at=timezone.now(),
            )  # fmt: skip
        return runs.take(run_id)


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
    if run.task_name != task.name:
        run.task_name = task.name  # what the sweep and a retry send it to again
        TaskRun.objects.filter(pk=run.pk).update(task_name=task.name)
    if foreground:
        task(str(run.pk))
        run.refresh_from_db()
        return run
    transaction.on_commit(lambda: _send(task, run))
    return run


class BrokerOutage:
    """Sends the broker refused, counted and logged as one warning per period (the period that began
    with the first refusal), with the first refusal's error, instead of one line per refused send."""

    def __init__(self, period: float = OUTAGE_LOG_SECONDS):
        self.period = period
        self._refused = 0
        self._error = ""
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def refused(self, exc: Exception) -> None:
        """One send the broker refused with `exc`."""
        with self._lock:
            self._refused += 1
            if self._timer is None:
                self._error = f"{type(exc).__name__}: {exc}"
                self._timer = threading.Timer(self.period, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Log the refusals counted so far, if any, in one line, and start counting afresh."""
        with self._lock:
            refused, error, self._refused, self._error = self._refused, self._error, 0, ""
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if refused:
            logger.warning(
                "%s found the broker down in the last %g s (their tasks were not queued: runs are marked "
                "failed, index updates wait in the outbox for the sweep): %s",
                "1 write" if refused == 1 else f"{refused} writes",
                self.period,
                error,
            )


outage = BrokerOutage()


def send(task, *args, **kwargs):
    """`task.delay(*args, **kwargs)`; a broker that refuses (BrokerError) is counted in `outage`, then
    the error is raised for the caller to answer (a 503, a page's message, or the outbox's sweep)."""
    try:
        return task.delay(*args, **kwargs)
    except BrokerError as exc:
        outage.refused(exc)
        raise


def _send(task, run: TaskRun) -> None:
    try:
        send(task, str(run.pk))
    except Exception as exc:
        # The broker refused it (down, say): no worker will ever see this run, so it must not
        # look queued (a queued extraction stands in for the next request of its transcript).
        # An eager task that failed has recorded its failure already.
        TaskRun.objects.filter(pk=run.pk, status=TaskRun.Status.QUEUED).update(
            status=TaskRun.Status.FAILED, finished_at=timezone.now(), error=f"not queued: {type(exc).__name__}: {exc}"
        )
        raise
