"""The store's own background work: runs that outlive their worker (memoryui.runs) are sent again.

The tasks of the other apps live beside their work (ingest.tasks, hygiene.tasks, searchindex.tasks,
recall.tasks) and keep the names they were released with.
"""

from __future__ import annotations

import logging
import sqlite3

from celery import shared_task
from celery.signals import worker_ready

from memoryui import runs

logger = logging.getLogger(__name__)


# --- runs that outlive their worker ---------------------------------------------------------------


@shared_task(name="memoryui.tasks.sweep_stalled_runs")
def sweep_stalled_runs() -> dict:
    """Send again the runs a dead or stuck worker left (memoryui.runs), on the schedule; and trim the
    embedded broker's rows of messages delivered long ago."""
    counts = runs.sweep()
    try:
        counts["broker_rows_trimmed"] = runs.trim_embedded_broker()
    except sqlite3.Error as exc:  # busy: the next sweep trims
        logger.info("the embedded broker was not trimmed this time: %s", exc)
    return counts


@worker_ready.connect
def _sweep_when_a_worker_starts(sender=None, **kwargs) -> None:
    # A worker that starts after one died (`make run` restarts it) sends its runs again at once,
    # not at the next sweep: their worker on this host is gone.
    try:
        runs.sweep()
    except Exception:
        logger.exception("the sweep of stalled runs at worker start failed; the schedule's sweep will retry")
