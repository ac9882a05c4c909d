"""Celery task names are what a queued message is routed by: they outlive the modules the tasks
live in. Moving a task to another module must keep its name, or messages already queued by the
previous release are rejected by the worker as unknown."""

from __future__ import annotations

from memoryui.celery import app
from searchindex.tasks import rebuild_indexes, repair_indexes, sync_index

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
