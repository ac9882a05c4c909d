"""Runs that outlive their worker: who holds a TaskRun, when it counts as stalled, and how it is
sent again, retried or cancelled.

A background task's message may be lost with the process that took it: the embedded broker
(kombu's SQLAlchemy transport) hides a message once a worker takes it and never shows it again,
acknowledged or not, and a Redis broker gives an unacknowledged one back only after its visibility
timeout. So memoryui does not count on the broker to redeliver; the TaskRun row says what is owed:

- a worker that takes a run writes itself into it (`worker`: host, pid and the process's start
  time, so a reused pid is not mistaken for it) and moves `progressed_at` at every step;
- `sweep()` (every MEMORYUI_RUN_SWEEP_SECONDS, and when a worker starts) finds runs that are owed:
  a running run whose worker on this host is gone (at once), or that has not advanced for
  MEMORYUI_RUN_STALL_SECONDS (a worker on another host, or one that hangs), is marked `stalled`
  and sent again, until it has been tried MEMORYUI_RUN_MAX_ATTEMPTS times, when it is `failed`
  with a retry offered; a queued or stalled run that no worker took within that limit is sent
  again too (its message may be lost);
- a worker given a run that another live worker holds, or that is done or cancelled, leaves it
  (a second delivery of one message, or a run sent again that turned out only slow);
- a worker whose run was cancelled, or handed to another worker, stops at its next step
  (`TaskRun.advance` raises `Withdrawn`).

A person may `retry` a failed, stalled or cancelled run, or `cancel` one that is not finished, on
the task's page or with `manage.py task`.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
from datetime import timedelta
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memoryui import security
from memoryui.models import TaskRun

logger = logging.getLogger(__name__)

RETRYABLE = (TaskRun.Status.FAILED, TaskRun.Status.STALLED, TaskRun.Status.CANCELLED)


class RunStateError(Exception):
    """A retry or cancel asked of a run in a state that has none (a finished run cannot be cancelled)."""


def _started(pid: int) -> str:
    """When process `pid` started, in clock ticks since boot (Linux), or "" where that is unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22, counted after the command's name


def holder(pid: int | None = None) -> str:
    """This process as a run's `worker`: "host/pid/start"."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}/{pid}/{_started(pid)}"


def holder_alive(worker: str) -> bool | None:
    """Whether the process a run names is still running: True or False on this host, None for a
    process of another host (or a run no process holds), which only its progress can tell."""
    host, _, rest = worker.partition("/")
    pid, _, started = rest.partition("/")
    if not worker or host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user's
    return not started or _started(int(pid)) == started


def stall_limit() -> timedelta | None:
    seconds = settings.MEMORYUI_RUN_STALL_SECONDS
    return timedelta(seconds=seconds) if seconds else None


def held_elsewhere(run: TaskRun) -> bool:
    """Whether another process is doing `run` now: it is running, and its worker is alive (on this
    host), or advanced within the stall limit (on another)."""
    if run.status != TaskRun.Status.RUNNING or not run.worker or run.worker == holder():
        return False
    alive = holder_alive(run.worker)
    if alive is not None:
        return alive
    limit = stall_limit()
    return limit is None or (run.progressed_at is not None and run.progressed_at > timezone.now() - limit)


def take(run_id: str) -> TaskRun | None:
    """The run for this process to do, taken under its row lock, or None when it is not this
    process's: done, cancelled, or held by another live worker. A run already done is given back
    as it is (its stored result is the task's answer)."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().get(pk=run_id)
        if run.status == TaskRun.Status.SUCCEEDED:
            return run
        if run.status == TaskRun.Status.CANCELLED or held_elsewhere(run):
            logger.info("task run %s left alone: %s (%s)", run.pk, run.status, run.worker or "no worker")
            return None
        run.status, run.worker, run.progressed_at = TaskRun.Status.RUNNING, holder(), timezone.now()
        run.save(update_fields=["status", "worker", "progressed_at"])
        return run


def send(run: TaskRun) -> None:
    """Send the run's task again, once the transaction commits. A broker that refuses leaves the
    run as it is: the next sweep sends it again."""

    def _send() -> None:
        task = current_app.tasks.get(run.task_name)
        try:
            if task is not None:
                task.apply_async(args=[str(run.pk)])  # its routes, and run here under always_eager
            else:
                current_app.send_task(run.task_name, args=[str(run.pk)])
        except Exception as exc:
            logger.warning("task run %s not sent again (%s: %s); the next sweep tries again", run.pk,
                           type(exc).__name__, exc)  # fmt: skip

    transaction.on_commit(_send)


def sweep() -> dict:
    """Send again what is owed (see the module docstring); the counts of what was done."""
    now = timezone.now()
    limit = stall_limit()
    counts = {"stalled": 0, "failed": 0, "resent": 0}
    owed = TaskRun.objects.filter(status__in=TaskRun.ACTIVE).exclude(task_name="")
    for run_id in owed.values_list("pk", flat=True):
        with transaction.atomic():
            run = TaskRun.objects.select_for_update().filter(pk=run_id, status__in=TaskRun.ACTIVE).first()
            if run is None:
                continue
            waited = now - (run.progressed_at or run.created_at)
            if run.status == TaskRun.Status.RUNNING:
                alive = holder_alive(run.worker)
                if alive is False:
                    reason = f"its worker ({run.worker}) is gone"
                elif limit is not None and waited > limit and run.worker != holder():
                    reason = f"no progress for {int(waited.total_seconds())} s"
                else:
                    continue
                counts[_stall(run, reason, now)] += 1
            elif limit is not None and waited > limit:  # queued or stalled, and no worker took it
                run.progressed_at = now
                run.save(update_fields=["progressed_at"])
                send(run)
                counts["resent"] += 1
    if any(counts.values()):
        logger.warning("stalled task runs: %s", counts)
    return counts


DELIVERED_KEPT = timedelta(days=1)


def trim_embedded_broker(now=None) -> int:
    """Delete the embedded broker's rows of messages delivered more than DELIVERED_KEPT ago; how many.

    kombu's SQLAlchemy transport marks a message invisible when a worker takes it and never deletes
    it, acknowledged or not, so the broker file would grow by a row per task for ever. Such a row is
    never delivered again (a run a dead worker held is sent again from its TaskRun), so it is only
    weight. A broker that is not the embedded SQLite file is left alone."""
    path = security.sqlite_path_of_url(settings.CELERY_BROKER_URL)
    if path is None or not path.exists():
        return 0
    before = ((now or timezone.now()) - DELIVERED_KEPT).strftime("%Y-%m-%d %H:%M:%S")
    with sqlite3.connect(path, timeout=5) as broker:
        tables = {name for (name,) in broker.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "kombu_message" not in tables:
            return 0
        return broker.execute("DELETE FROM kombu_message WHERE visible = 0 AND timestamp < ?", (before,)).rowcount


def _stall(run: TaskRun, reason: str, now) -> str:
    attempts = settings.MEMORYUI_RUN_MAX_ATTEMPTS
    if run.attempts >= attempts:
        run.status, run.finished_at = TaskRun.Status.FAILED, now
        run.error = (
            f"stalled: {reason}, on attempt {run.attempts} of {attempts}; retry it from its task page or with "
            f"`manage.py task retry {run.pk}`"
        )
        run.save(update_fields=["status", "finished_at", "error"])
        return "failed"
    run.status, run.worker, run.progressed_at = TaskRun.Status.STALLED, "", now
    run.error = (
        f"stalled: {reason}; sent again at {now:%Y-%m-%d %H:%M:%S} UTC (attempt {run.attempts + 1} of {attempts})"
    )
    run.save(update_fields=["status", "worker", "progressed_at", "error"])
    send(run)
    return "stalled"


def cancel(run: TaskRun, *, actor: str) -> TaskRun:
    """Cancel a run that is not finished: a queued one is never started, a running one stops at its
    next step. What it already wrote stays (its batch can be undone on its page)."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().get(pk=run.pk)
        if run.status not in TaskRun.ACTIVE:
            raise RunStateError(
                f"task run {run.pk} is {run.status}: only a queued, running or stalled run is cancelled"
            )
        run.status, run.finished_at = TaskRun.Status.CANCELLED, timezone.now()
        run.error = f"cancelled by {actor}"
        run.save(update_fields=["status", "finished_at", "error"])
    return run


def retry(run: TaskRun, *, actor: str) -> TaskRun:
    """Send a failed, stalled or cancelled run again, as a new round of attempts. An extraction
    goes on from the messages it had done."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().get(pk=run.pk)
        if run.status not in RETRYABLE:
            raise RunStateError(
                f"task run {run.pk} is {run.status}: only a failed, stalled or cancelled run is retried"
            )
        if not run.task_name:
            raise RunStateError(f"task run {run.pk} ({run.kind}) is not one a worker can be sent again")
        twin = (
            TaskRun.objects.filter(kind=run.kind, params=run.params, status__in=TaskRun.ACTIVE)
            .exclude(pk=run.pk)
            .first()
        )
        if twin is not None:
            raise RunStateError(f"task run {twin.pk} does the same work and is {twin.status}: wait for it or cancel it")
        run.status, run.worker, run.finished_at, run.attempts = TaskRun.Status.QUEUED, "", None, 0
        run.progressed_at = timezone.now()
        run.error = f"retried by {actor}"
        run.save(update_fields=["status", "worker", "finished_at", "attempts", "progressed_at", "error"])
        send(run)
    return run
