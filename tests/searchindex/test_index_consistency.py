"""The indexes follow the database: after-commit sync, the outbox, verify, repair, rebuild."""

from __future__ import annotations

import io
import json
import shutil
import socket

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from memoryui.models import IndexCheck, IndexOutbox, Memory
from searchindex import health, outbox
from searchindex import indexes as search_indexes
from searchindex.documents import IndexedMemory, IndexUnavailable

pytestmark = pytest.mark.django_db


def entries(name: str) -> dict[str, str]:
    return search_indexes.get_index(name).entries()


def test_a_new_memory_reaches_both_indexes_after_commit(indexes, write):
    memory = write("Deploys go out on Fridays after the smoke tests.", kind="fact")
    for name in search_indexes.INDEX_NAMES:
        assert str(memory.pk) in entries(name)
    assert not IndexOutbox.objects.exists()


def test_tombstoned_memory_leaves_both_indexes_and_restore_brings_it_back(
    indexes, write, django_capture_on_commit_callbacks
):
    memory = write("The user's lucky number is 88.", kind="entity", entity_key="lucky_number:88")
    with django_capture_on_commit_callbacks(execute=True):
        memory.tombstone("wrong person", actor="test")
    assert all(str(memory.pk) not in entries(name) for name in search_indexes.INDEX_NAMES)
    assert search_indexes.get_index("bm25").search("88", scopes=["agent:main"], k=5) == []
    with django_capture_on_commit_callbacks(execute=True):
        memory.restore(actor="test")
    assert all(str(memory.pk) in entries(name) for name in search_indexes.INDEX_NAMES)


def test_an_edit_or_a_pin_refreshes_the_entry(indexes, write, django_capture_on_commit_callbacks):
    memory = write("Deploys go out on Fridays.", kind="fact")
    before = entries("vector")[str(memory.pk)]
    with django_capture_on_commit_callbacks(execute=True):
        memory.pin(actor="test")
    pinned = entries("vector")[str(memory.pk)]
    with django_capture_on_commit_callbacks(execute=True):
        memory.edit(actor="test", text="Deploys go out on Thursdays.")
    assert len({before, pinned, entries("vector")[str(memory.pk)]}) == 3
    hits = search_indexes.get_index("bm25").search("thursdays", scopes=["agent:main"], k=5)
    assert [hit.id for hit in hits] == [str(memory.pk)]


def test_a_crash_between_the_write_and_the_index_is_found_by_verify_and_repaired(indexes, make_memory):
    # No after-commit callbacks run here: as if the process died right after the commit.
    memory = make_memory("Runs 1000 RTX 4070s in an IDC.", kind="fact")
    assert IndexOutbox.objects.filter(memory_id=memory.pk).exists()
    diffs = {diff.index: diff for diff in health.verify()}
    # An index written in the memory's own transaction (PostgreSQL lexical) lost nothing.
    for name in search_indexes.INDEX_NAMES:
        lost = name in search_indexes.drained_by_outbox()
        assert (diffs[name].missing, diffs[name].ok) == (([str(memory.pk)], False) if lost else ([], True))

    health.repair()
    assert all(diff.ok for diff in health.verify())
    assert not IndexOutbox.objects.exists()


def test_orphaned_and_stale_entries_are_reported_and_repaired(indexes, write):
    memory = write("Prefers terse answers without recaps.")
    ghost = IndexedMemory(
        id="00000000-0000-0000-0000-000000000001", scope="agent:main", kind="fact", tier="working",
        pinned=False, text="a memory the database never had", content_hash="x",
    )  # fmt: skip
    stale = IndexedMemory.from_memory(memory)
    stale = IndexedMemory(**{**stale.__dict__, "content_hash": "outdated"})
    for name in search_indexes.INDEX_NAMES:
        search_indexes.get_index(name).upsert([ghost, stale])
    for diff in health.verify():
        assert (diff.orphaned, diff.stale, diff.missing) == ([ghost.id], [str(memory.pk)], [])
    health.repair()
    assert all(diff.ok for diff in health.verify())


def test_a_memory_written_while_verify_ran_is_not_removed_by_the_repair(indexes, write):
    # verify reads the database, then the index: a memory committed in between has an entry the
    # database snapshot lacks. The repair must ask the database again, not remove the entry.
    diffs = health.verify()
    memory = write("Runs 1000 RTX 4070s in an IDC.", kind="fact")
    for diff in diffs:
        diff.orphaned.append(str(memory.pk))
    done = health.repair(diffs)
    assert {name: done[name] for name in search_indexes.INDEX_NAMES} == {
        name: {"reindexed": 1, "removed": 0} for name in search_indexes.INDEX_NAMES
    }
    assert all(str(memory.pk) in entries(name) for name in search_indexes.INDEX_NAMES)
    assert all(diff.ok for diff in health.verify())


def test_deleting_the_index_directory_loses_nothing_and_rebuild_restores_it(indexes, write):
    kept = [write(f"Fact number {n}: the staging cluster has {n} nodes.", kind="fact") for n in (3, 5)]
    search_indexes.close_indexes()
    shutil.rmtree(indexes)
    assert Memory.objects.count() == 2
    diffs = health.verify()
    for diff in diffs:
        in_the_directory = not search_indexes.kept_in_step(diff.index)  # not the PostgreSQL lexical table
        assert not diff.error
        assert sorted(diff.missing) == (sorted(str(m.pk) for m in kept) if in_the_directory else [])
    search_indexes.close_indexes()
    assert health.rebuild() == {"vector": 2, "bm25": 2}
    assert all(diff.ok for diff in health.verify())


def test_rebuild_replaces_a_torn_or_stale_index_and_clears_the_outbox_it_did(indexes, write, settings):
    kept = [write(f"Fact number {n}: the staging cluster has {n} nodes.", kind="fact") for n in (3, 5, 8)]
    gone = write("The old staging cluster had 2 nodes.", kind="fact")
    Memory.objects.filter(pk=gone.pk).update(
        status=Memory.Status.TOMBSTONED
    )  # as a crash between commit and sync leaves it
    IndexOutbox.objects.create(memory_id=gone.pk)
    if not search_indexes.kept_in_step("bm25"):
        search_indexes.close_indexes()
        for toc in (indexes / "bm25").glob("_MAIN_*.toc"):
            toc.write_bytes(b"not a whoosh table of contents")
        with pytest.raises(IndexUnavailable):
            entries("bm25")
    assert health.rebuild() == {"vector": 3, "bm25": 3}
    for name in search_indexes.INDEX_NAMES:
        assert sorted(entries(name)) == sorted(str(m.pk) for m in kept), name
    assert all(diff.ok for diff in health.verify())
    assert not IndexOutbox.objects.exists()
    hits = search_indexes.get_index("bm25").search("staging cluster nodes", scopes=["agent:main"], k=5)
    assert sorted(hit.id for hit in hits) == sorted(str(m.pk) for m in kept)


def test_an_unreachable_vector_server_keeps_the_work_pending_and_bm25_current(
    indexes, settings, make_memory, django_capture_on_commit_callbacks
):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CHROMA_URL = f"http://127.0.0.1:{port}"
    search_indexes.close_indexes()
    memory = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    with pytest.raises(IndexUnavailable):
        outbox.sync_memories([str(memory.pk)])
    pending = IndexOutbox.objects.get(memory_id=memory.pk)
    assert pending.attempts == 1 and "vector" in pending.last_error
    assert str(memory.pk) in entries("bm25")


def test_reindex_command_verifies_with_json_and_exit_status_then_repairs(indexes, make_memory):
    make_memory("Birthday is 1988-12-12.", kind="entity", entity_key="birthday:1988-12-12")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("reindex", "--verify", "--json", stdout=out)
    report = json.loads(out.getvalue())
    lost_bm25 = int("bm25" in search_indexes.drained_by_outbox())  # not when written in the transaction
    assert [(d["index"], d["missing"]) for d in report["indexes"]] == [("vector", 1), ("bm25", lost_bm25)]

    out = io.StringIO()
    call_command("reindex", "--json", stdout=out)
    repaired = json.loads(out.getvalue())["repaired"]
    assert (repaired["vector"]["reindexed"], repaired["bm25"]["reindexed"]) == (1, lost_bm25)
    assert not IndexOutbox.objects.exists()
    out = io.StringIO()
    call_command("reindex", "--verify", "--json", stdout=out)
    assert all(d["ok"] for d in json.loads(out.getvalue())["indexes"])
    checks = list(IndexCheck.objects.order_by("started_at", "id").values_list("action", "actor", "ok"))
    cli = "cli:reindex"
    assert checks == [("verify", cli, False), ("repair", cli, True), ("verify", cli, True)]


def test_reindex_refusing_its_options_still_prints_one_json_document(indexes):
    out = io.StringIO()
    with pytest.raises(CommandError, match="--background"):
        call_command("reindex", "--verify", "--background", "--json", stdout=out)
    assert "--background" in json.loads(out.getvalue())["error"]


def test_one_transaction_of_many_writes_enqueues_one_index_sync(
    indexes, make_memory, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        written = [make_memory(f"Fact number {n}: host-{n} runs k3s.", kind="fact") for n in range(5)]
        with pytest.raises(ValueError), transaction.atomic():  # a savepoint rolled back
            make_memory("This one is undone.", kind="fact")
            raise ValueError
        written.append(make_memory("And one more after the savepoint.", kind="fact"))
    assert len(callbacks) == 1
    assert {str(m.pk) for m in written} <= set(callbacks[0].ids)
    assert not IndexOutbox.objects.exists()  # the one sync indexed all six
    assert {str(m.pk) for m in written} == set(search_indexes.get_index("bm25").entries())
