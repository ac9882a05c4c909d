"""The store tells the indexes what changed without importing them: after commit it sends
`outbox_committed`, and searchindex answers with `sync_index` tasks, one per batch."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import transaction

from memoryui import writing
from memoryui.models import IndexOutbox, Memory, outbox_committed
from searchindex import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """The memory ids of every sync_index task queued."""
    batches: list[list[str]] = []
    monkeypatch.setattr(tasks.sync_index, "delay", lambda ids: batches.append(list(ids)))
    return batches


def test_searchindex_listens_to_the_store():
    # disconnect() says whether the receiver was connected (by searchindex's AppConfig.ready).
    assert outbox_committed.disconnect(dispatch_uid="searchindex.enqueue_sync")
    try:
        assert not outbox_committed.has_listeners(IndexOutbox)
    finally:
        outbox_committed.connect(tasks.enqueue_sync, dispatch_uid="searchindex.enqueue_sync")


def test_a_write_is_announced_after_commit_and_queues_its_sync(sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        memory, _ = writing.write(actor="test", scope="agent:main", kind="fact", text="The deploy runs at 09:00.")
    assert IndexOutbox.objects.filter(memory_id=memory.pk).exists()  # written in the same transaction
    assert sent == []  # nothing before commit
    for callback in callbacks:
        callback()
    assert sent == [[str(memory.pk)]]


def test_many_writes_in_one_transaction_are_announced_once_in_batches(sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        for n in range(tasks.SYNC_BATCH + 5):
            writing.write(actor="test", scope="agent:main", kind="fact", text=f"Fact number {n}.", semantic=False)
    assert [len(batch) for batch in sent] == [tasks.SYNC_BATCH, 5]
    assert {pk for batch in sent for pk in batch} == {str(pk) for pk in Memory.objects.values_list("pk", flat=True)}


def test_a_receiver_that_fails_leaves_the_change_committed_and_the_outbox_row_for_repair(
    django_capture_on_commit_callbacks,
):
    with (
        mock.patch.object(tasks.sync_index, "delay", side_effect=ConnectionError("broker down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        memory, _ = writing.write(actor="test", scope="agent:main", kind="fact", text="The broker is down today.")
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert IndexOutbox.objects.filter(memory_id=memory.pk).exists()
