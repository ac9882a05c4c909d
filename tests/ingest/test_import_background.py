"""A bulk import in the background: rows and BM25 entries before it answers, vectors in batches
over the workers (tasks run eagerly here), tracked by a TaskRun; nothing lost when a batch fails."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from memoryui.models import IndexOutbox, Memory, TaskRun, queue_index_sync
from searchindex import indexes as search_indexes
from searchindex import tasks
from searchindex.documents import IndexUnavailable
from searchindex.indexes import get_index
from tests.postgres import needs_postgres

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def whoosh(settings):
    """The BM25 index the outbox drains (whoosh), whatever the database."""
    settings.MEMORYUI_LEXICAL = "whoosh"


COLOURS = ("amber", "cobalt", "crimson", "jade", "ochre", "teal", "violet")


def lines(count: int) -> bytes:
    """`count` JSONL memories, each with a word of its own (`word<n>`) to search for."""
    return "".join(
        json.dumps(
            {
                "id": str(uuid.UUID(int=n + 1)),
                "scope": "agent:main",
                "kind": "fact",
                "text": f"The {COLOURS[n % len(COLOURS)]} server word{n} restarts at {n % 24}:00.",
            }
        )
        + "\n"
        for n in range(count)
    ).encode()


def import_in_background(tmp_path, count: int, *extra: str) -> dict:
    path = tmp_path / "store.jsonl"
    path.write_bytes(lines(count))
    out = io.StringIO()
    call_command("import_memories", str(path), "--background", "--json", *extra, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def bm25_finds(n: int) -> bool:
    return str(uuid.UUID(int=n + 1)) in {hit.id for hit in get_index("bm25").search(f"word{n}", k=5)}


def test_the_rows_are_searchable_by_keyword_when_the_command_returns_and_by_vector_when_the_task_ends(
    indexes, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_in_background(tmp_path, 30)
    ids = {str(pk) for pk in Memory.objects.values_list("pk", flat=True)}
    assert report["imported"] == 30 and report["bm25_searchable"] is True and report["vector_pending"] == 30
    run = TaskRun.objects.get(pk=report["task"])
    assert run.kind == tasks.EMBED_RUN_KIND and run.status == TaskRun.Status.RUNNING
    assert run.progress_total == 30 and run.progress_done == 0
    # Keyword search answers at once; the vectors wait for their batches, their outbox rows with them.
    assert set(get_index("bm25").entries()) == ids
    assert all(bm25_finds(n) for n in (0, 17, 29))
    assert get_index("vector").entries() == {}
    assert set(IndexOutbox.objects.filter(run=run).values_list("memory_id", flat=True)) == {uuid.UUID(i) for i in ids}

    for callback in callbacks:  # the batches are sent after commit; eager here
        callback()

    run.refresh_from_db()
    assert run.status == TaskRun.Status.SUCCEEDED, run.error
    assert run.progress_done == run.progress_total == 30
    assert run.counts == {"batches": 1, "batches_done": 1, "embedded": 30}
    assert set(get_index("vector").entries()) == ids
    hits = get_index("vector").search("The jade server word3 restarts", k=3)
    assert str(uuid.UUID(int=4)) in {hit.id for hit in hits}
    assert not IndexOutbox.objects.exists()


def test_the_embedding_is_split_in_batches_and_no_outbox_sync_is_announced(
    indexes, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(tasks, "EMBED_BATCH", 8)
    synced: list[list[str]] = []
    monkeypatch.setattr(tasks.sync_index, "delay", lambda ids: synced.append(ids))
    with django_capture_on_commit_callbacks(execute=True):
        report = import_in_background(tmp_path, 20)
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.SUCCEEDED
    assert run.params["batches"] == 3 and run.counts == {"batches": 3, "batches_done": 3, "embedded": 20}
    assert synced == []  # the per-transaction sync of both indexes would have done it all twice
    assert len(get_index("vector").entries()) == 20 and not IndexOutbox.objects.exists()


def test_a_batch_delivered_again_changes_nothing(indexes, tmp_path, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        report = import_in_background(tmp_path, 5)
    run = TaskRun.objects.get(pk=report["task"])
    ids = [str(pk) for pk in Memory.objects.values_list("pk", flat=True)]
    assert tasks.embed_batch.apply(args=[str(run.pk), 1, ids]).get() == {"embedded": 0}
    run.refresh_from_db()
    assert run.status == TaskRun.Status.SUCCEEDED and run.counts["batches_done"] == 1 and run.counts["embedded"] == 5


def test_an_unavailable_vector_index_is_retried_and_the_batch_lands(
    indexes, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    vector = get_index("vector")
    upsert = vector.upsert

    def unavailable(items, **options):
        raise IndexUnavailable("vector", "disk full for a moment")

    monkeypatch.setattr(vector, "upsert", unavailable)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_in_background(tmp_path, 6)
    with pytest.raises(Retry):  # a worker sends it again later (eager tasks only say so)
        for callback in callbacks:
            callback()
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.RUNNING and IndexOutbox.objects.filter(run=run).count() == 6
    assert IndexOutbox.objects.get(memory_id=uuid.UUID(int=1)).attempts == 1  # recorded on the row

    monkeypatch.setattr(vector, "upsert", upsert)
    ids = [str(uuid.UUID(int=n + 1)) for n in range(6)]
    assert tasks.embed_batch.apply(args=[str(run.pk), 1, ids], retries=1).get() == {"embedded": 6}
    run.refresh_from_db()
    assert run.status == TaskRun.Status.SUCCEEDED and len(vector.entries()) == 6
    assert not IndexOutbox.objects.exists()


def test_a_batch_that_fails_for_good_is_recorded_and_its_memories_are_left_to_the_sweep(
    indexes, tmp_path, monkeypatch, settings, django_capture_on_commit_callbacks
):
    vector = get_index("vector")
    upsert = vector.upsert
    monkeypatch.setattr(tasks, "EMBED_BATCH", 4)

    def broken(items, **options):
        raise ValueError("a bug in the embedder")

    monkeypatch.setattr(vector, "upsert", broken)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_in_background(tmp_path, 4)
    with pytest.raises(ValueError, match="a bug in the embedder"):
        for callback in callbacks:
            callback()
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.FAILED and "batch 1: ValueError: a bug in the embedder" in run.error
    assert run.counts["failed"] == 4
    # Nothing lost: the rows wait in the outbox, no longer held by the run, and the sweep finishes them.
    assert IndexOutbox.objects.filter(run__isnull=True).count() == 4
    monkeypatch.setattr(vector, "upsert", upsert)
    settings.MEMORYUI_INDEX_SWEEP_SECONDS = 0.0001
    assert tasks.sync_pending() == {"synced": 4, "batches_resent": 0}
    assert len(vector.entries()) == 4 and not IndexOutbox.objects.exists()


def test_the_sweep_and_other_syncs_leave_a_running_import_its_rows(
    indexes, tmp_path, settings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        report = import_in_background(tmp_path, 5)
    settings.MEMORYUI_INDEX_SWEEP_SECONDS = 0.0001
    assert tasks.sync_pending() == {"synced": 0, "batches_resent": 0}
    assert tasks.sync_index([]) == {"indexed": 0, "removed": 0, "already": 0}
    assert IndexOutbox.objects.filter(run_id=report["task"]).count() == 5


def stall(run_id: str, seconds: float) -> None:
    TaskRun.objects.filter(pk=run_id).update(progressed_at=timezone.now() - timedelta(seconds=seconds))


def test_batches_whose_messages_were_lost_are_sent_again_once_the_run_has_stalled(
    indexes, tmp_path, monkeypatch, settings, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(tasks, "EMBED_BATCH", 4)
    with django_capture_on_commit_callbacks(execute=False):  # the broker lost every batch
        report = import_in_background(tmp_path, 10)
    settings.MEMORYUI_INDEX_SWEEP_SECONDS, settings.MEMORYUI_EMBED_STALL_SECONDS = 0.0001, 600
    stall(report["task"], 60)  # slow, not stalled: left alone
    assert tasks.sync_pending() == {"synced": 0, "batches_resent": 0}
    stall(report["task"], 601)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sync_pending() == {"synced": 0, "batches_resent": 3}
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.SUCCEEDED, run.error
    assert run.counts == {"batches": 3, "batches_done": 3, "embedded": 10, "batches_resent": 3}
    assert len(get_index("vector").entries()) == 10 and not IndexOutbox.objects.exists()
    settings.MEMORYUI_EMBED_STALL_SECONDS = 0  # off: a stalled run waits for `reindex`
    stall(report["task"], 10**6)
    assert tasks.sync_pending() == {"synced": 0, "batches_resent": 0}


def test_a_stalled_run_whose_rows_reindex_embedded_is_finished_by_the_sweep(
    indexes, tmp_path, settings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        report = import_in_background(tmp_path, 5)
    call_command("reindex", stdout=io.StringIO())  # embeds the held rows, knows nothing of the run
    assert not IndexOutbox.objects.exists()
    assert TaskRun.objects.get(pk=report["task"]).status == TaskRun.Status.RUNNING
    settings.MEMORYUI_INDEX_SWEEP_SECONDS, settings.MEMORYUI_EMBED_STALL_SECONDS = 0.0001, 600
    stall(report["task"], 601)
    assert tasks.sync_pending() == {"synced": 0, "batches_resent": 0}
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.SUCCEEDED and run.progress_done == run.progress_total == 5


def test_a_dry_run_in_the_background_starts_no_task(indexes, tmp_path):
    report = import_in_background(tmp_path, 3, "--dry-run")
    assert "task" not in report and "bm25_searchable" not in report
    assert not TaskRun.objects.exists() and not Memory.objects.exists()


def test_the_command_says_what_is_searchable_now(indexes, tmp_path, django_capture_on_commit_callbacks):
    path = tmp_path / "store.jsonl"
    path.write_bytes(lines(3))
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_memories", str(path), "--background", stdout=out, stderr=io.StringIO())
    run = TaskRun.objects.get()
    said = out.getvalue()
    assert f"Task {run.pk}: searchable by keyword now; vector search follows as the embedding batches land" in said


def test_the_import_page_says_keyword_search_works_now_and_links_the_task(
    erin_client, indexes, django_capture_on_commit_callbacks
):
    url = reverse("memory_import")
    preview = erin_client.post(url, {"file": SimpleUploadedFile("store.jsonl", lines(4))})
    assert preview.status_code == 200
    token = erin_client.session["pending_import"]["token"]
    with django_capture_on_commit_callbacks(execute=False):
        done = erin_client.post(url, {"confirmed": "1", "token": token}, follow=True)
    body = done.content.decode()
    run = TaskRun.objects.get()
    assert Memory.objects.count() == 4 and set(get_index("bm25").entries()) == {
        str(pk) for pk in Memory.objects.values_list("pk", flat=True)
    }
    assert "Searchable by keyword now; vector search follows as the embedding batches land" in body
    assert reverse("task_detail", args=[run.pk]) in body


@needs_postgres
def test_a_bm25_index_kept_in_step_by_the_write_is_not_synced_again_and_the_vectors_clear_the_rows(
    indexes, tmp_path, settings, django_capture_on_commit_callbacks
):
    settings.MEMORYUI_LEXICAL = "postgres"  # written in each memory's own transaction: nothing to sync after
    search_indexes.close_indexes()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_in_background(tmp_path, 5)
    assert len(get_index("bm25").entries()) == 5  # before any task ran: written with the rows
    for callback in callbacks:
        callback()
    run = TaskRun.objects.get(pk=report["task"])
    assert report["bm25_searchable"] is True and run.params["indexes"] == ["vector"]
    assert run.status == TaskRun.Status.SUCCEEDED and len(get_index("vector").entries()) == 5
    assert not IndexOutbox.objects.exists()


def test_a_change_made_while_its_batch_waits_takes_the_row_back_for_its_own_sync(
    indexes, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_in_background(tmp_path, 5)
    edited = uuid.UUID(int=1)
    with django_capture_on_commit_callbacks(execute=False) as edit_callbacks:
        queue_index_sync([edited])  # what an edit writes in its transaction
    assert IndexOutbox.objects.get(memory_id=edited).run_id is None
    for callback in callbacks:
        callback()
    run = TaskRun.objects.get(pk=report["task"])
    assert run.status == TaskRun.Status.SUCCEEDED and run.counts["embedded"] == 4 and run.progress_done == 5
    assert list(IndexOutbox.objects.values_list("memory_id", flat=True)) == [edited]  # its own sync's to clear
    for callback in edit_callbacks:
        callback()
    assert not IndexOutbox.objects.exists() and len(get_index("vector").entries()) == 5


def test_the_tasks_page_shows_the_embedding_with_its_progress(
    erin_client, indexes, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        report = import_in_background(tmp_path, 7)
    body = erin_client.get(reverse("task_list")).content.decode()
    assert tasks.EMBED_RUN_KIND in body and 'role="progressbar" aria-valuenow="0"' in body and "0/7" in body
    assert "batches_done 0" in body
    detail = erin_client.get(reverse("task_detail", args=[report["task"]])).content.decode()
    assert "0/7" in detail and 'hx-trigger="every 1s"' in detail  # it polls while the batches land
