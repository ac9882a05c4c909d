"""The store tells the indexes what changed without importing them: after commit it sends
`outbox_committed`, and searchindex answers with `sync_index` tasks, one per batch."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import transaction

from ingest import writing
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


def test_a_sync_takes_the_oldest_pending_memories_along_and_skips_what_is_done(django_capture_on_commit_callbacks):
    # Six memories written and not yet indexed (their tasks still queued): the first task to run
    # indexes the five that never failed in one sync, and a task behind it finds nothing to do.
    with django_capture_on_commit_callbacks(execute=False):
        memories = [
            writing.write(actor="test", scope="agent:main", kind="fact", text=f"Deploy window {n} is at 0{n}:00.")[0]
            for n in range(5)
        ]
        failed, _ = writing.write(actor="test", scope="agent:main", kind="fact", text="This one failed to index.")
    IndexOutbox.objects.filter(memory_id=failed.pk).update(attempts=1, last_error="index down")
    assert IndexOutbox.objects.count() == 6

    assert tasks.sync_index.run([str(memories[0].pk)]) == {"indexed": 5, "removed": 0, "along": 4}
    # The one that failed before is left to its own task (and the sweep), not taken along.
    assert list(IndexOutbox.objects.values_list("memory_id", flat=True)) == [failed.pk]
    assert tasks.sync_index.run([str(memories[3].pk)]) == {"indexed": 0, "removed": 0, "already": 1}
    assert tasks.sync_index.run([str(failed.pk)]) == {"indexed": 1, "removed": 0, "along": 0}
    assert not IndexOutbox.objects.exists()
