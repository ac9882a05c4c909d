"""Celery task names are what a queued message is routed by: they outlive the modules the tasks
live in. Moving a task to another module must keep its name, or messages already queued by the
previous release are rejected by the worker as unknown. And the names route the work: index
updates to a queue of their own, the bulk work to another, consumed by the Procfile's workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app
from searchindex.tasks import rebuild_indexes, repair_indexes, sync_index

ROOT = Path(__file__).resolve().parents[1]

# The names as released; a task may move, its name stays.
RELEASED_TASK_NAMES = {
    "memoryui.tasks.decay_expired_memories",
    "memoryui.tasks.extract_transcript",
    "memoryui.tasks.run_cleanup_step",
    "memoryui.tasks.run_dedup",
    "recall.tasks.calibrate_golden",
    "recall.tasks.rebuild_indexes",
    "recall.tasks.repair_indexes",
    "recall.tasks.sync_index",
}


def test_every_released_task_name_is_still_registered():
    app.loader.import_default_modules()  # what a worker does at start: autodiscover every app's tasks
    registered = {name for name in app.tasks if not name.startswith("celery.")}
    assert registered >= RELEASED_TASK_NAMES


def test_the_index_tasks_keep_their_names_in_their_new_home():
    assert (sync_index.name, repair_indexes.name, rebuild_indexes.name) == (
        "recall.tasks.sync_index",
        "recall.tasks.repair_indexes",
        "recall.tasks.rebuild_indexes",
    )


# --- queues -------------------------------------------------------------------------------------

INDEX_TASK_NAMES = {"recall.tasks.sync_index", "recall.tasks.repair_indexes", "recall.tasks.rebuild_indexes"}


def _queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_index_work_and_bulk_work_go_to_queues_of_their_own():
    # Extraction, dedup, clean-up, calibration and decay can be queued by any client for minutes
    # of work: index updates must never wait behind them (`make run` gives each queue a worker).
    assert {_queue_of(name) for name in INDEX_TASK_NAMES} == {settings.MEMORYUI_INDEX_QUEUE}
    assert {_queue_of(name) for name in RELEASED_TASK_NAMES - INDEX_TASK_NAMES} == {settings.MEMORYUI_BULK_QUEUE}
    assert settings.MEMORYUI_INDEX_QUEUE != settings.MEMORYUI_BULK_QUEUE
    # A worker started without -Q consumes every queue (one worker still does all the work).
    assert set(app.amqp.queues) >= {
        settings.CELERY_TASK_DEFAULT_QUEUE,
        settings.MEMORYUI_INDEX_QUEUE,
        settings.MEMORYUI_BULK_QUEUE,
    }


def _procfile_words(name: str, env: dict) -> list[str]:
    """A Procfile line's words as the shell expands them (nothing is run)."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    command = dict(line.split(":", 1) for line in lines if line.strip() and not line.startswith("#"))[name]
    script = f"set -- {command}; printf '%s\\n' \"$@\""
    return subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize(
    "variables",
    [{}, {"CELERY_TASK_DEFAULT_QUEUE": "shared-broker-queue"}, {"MEMORYUI_INDEX_QUEUE": "fast-lane"}],
    ids=["defaults", "another-default-queue", "an-index-queue-of-its-own"],
)
def test_the_procfile_workers_split_the_queues_where_settings_route_the_index_work(tmp_path, variables):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CELERY_", "MEMORYUI_"))}
    env.update(variables, MEMORYUI_DATA_DIR=str(tmp_path))
    routed = subprocess.run(
        [sys.executable, "-c", "from config import settings; print(settings.MEMORYUI_INDEX_QUEUE)"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    index, bulk = _procfile_words("index", env), _procfile_words("bulk", env)
    assert index[index.index("-Q") + 1] == routed  # the index worker consumes that queue only
    assert bulk[bulk.index("-X") + 1] == routed  # the bulk worker every queue but that one
    assert "--beat" in bulk and "--beat" not in index
