"""Decay: expired peripheral memories are tombstoned on a schedule; pinned, core and working
memories never are, and a run is one batch that undo reverts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from config.celery import app
from hygiene import decay, undo
from hygiene.tasks import decay_expired_memories
from memoryui.models import Memory, TaskRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(make_memory):
    past = timezone.now() - timedelta(days=1)
    future = timezone.now() + timedelta(days=1)
    return {
        "expired": make_memory("Asked about hotpot once.", kind="note", expires_at=past),
        "pinned": make_memory("Pinned leftover.", kind="note", expires_at=past, pinned=True),
        "working": make_memory("Deploys on Fridays.", kind="procedure", tier="working", expires_at=past),
        "core": make_memory("The user's name is Dongsheng.", kind="entity", tier="core", expires_at=past),
        "fresh": make_memory("Asked about the weather.", kind="note", expires_at=future),
        "no_ttl": make_memory("A peripheral memory without a TTL.", kind="note", tier="peripheral"),
    }


def test_only_expired_unpinned_peripheral_memories_are_tombstoned(store):
    assert store["expired"].tier == "peripheral"
    Memory.objects.filter(pk=store["pinned"].pk).update(tier="peripheral")

    report = decay.decay(actor="schedule")

    assert report.tombstoned == 1
    status = {name: Memory.objects.get(pk=m.pk).status for name, m in store.items()}
    assert status == {
        "expired": "tombstoned", "pinned": "active", "working": "active", "core": "active",
        "fresh": "active", "no_ttl": "active",
    }  # fmt: skip
    assert Memory.objects.get(pk=store["expired"].pk).tombstone_reason == decay.REASON


def test_a_dry_run_counts_and_changes_nothing(store):
    report = decay.decay(actor="schedule", dry_run=True)

    assert (report.tombstoned, report.batch) == (1, None)
    assert report.examples[0]["id"] == str(store["expired"].pk)
    assert Memory.objects.get(pk=store["expired"].pk).status == "active"


def test_a_decay_run_is_one_batch_that_undo_reverts(store):
    later = timezone.now() + timedelta(days=2)  # "fresh" has expired by then too

    report = decay.decay(actor="schedule", now=later)
    assert report.tombstoned == 2
    undo.undo_batch(report.batch, actor="alice")

    assert Memory.objects.active().count() == len(store)


def test_the_scheduled_task_records_a_task_run(store):
    result = decay_expired_memories.delay().get()

    run = TaskRun.objects.get(kind="decay")
    assert (run.status, run.actor, run.counts) == ("succeeded", "schedule", {"tombstoned": 1})
    assert result["tombstoned"] == 1


def test_decay_is_on_the_beat_schedule_and_the_task_is_registered():
    entry = settings.CELERY_BEAT_SCHEDULE["decay-expired-memories"]
    assert entry["task"] in app.tasks
    assert entry["schedule"] == settings.MEMORYUI_DECAY_INTERVAL_MINUTES * 60
    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE
