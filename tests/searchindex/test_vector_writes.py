"""Vector writes: an entry holds the vector and its fingerprint only, one chromadb call takes a
whole batch of a scope, and a memory that moves scope leaves the collections its outbox row
names, without the index asking any other scope's collection for it."""

from __future__ import annotations

import json

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings
from django.db import transaction

from hygiene.dedup import passage_vectors
from ingest import jsonl
from memoryui.models import IndexOutbox, Memory
from searchindex import health, outbox, vector
from searchindex.documents import IndexedMemory
from searchindex.indexes import get_index
from searchindex.vector import VectorIndex
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.django_db


def item(pk: int, *, scope: str = "agent:main", text: str = "") -> IndexedMemory:
    return IndexedMemory(
        id=f"00000000-0000-0000-0000-{pk:012d}",
        scope=scope,
        kind="fact",
        tier="working",
        pinned=False,
        text=text or f"memory number {pk}",
        content_hash=f"h-{pk}",
    )


def held(pk) -> set[str]:
    """The scopes whose collections hold this memory's entry."""
    return set(get_index("vector").scopes_holding([str(pk)]).get(str(pk), []))


def moved(memory: Memory, scope: str) -> None:
    """Edit the memory into `scope` and commit, without running the after-commit sync."""
    with transaction.atomic():
        memory.edit(actor="test", scope=scope)


@pytest.fixture
def hashed(tmp_path):
    index = VectorIndex(path=tmp_path / "chroma", embedder=HashEmbedder())
    yield index
    index.close()


def test_an_entry_stores_the_vector_and_its_fingerprint_and_nothing_else(hashed, tmp_path):
    hashed.upsert([item(1)])
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    stored = client.get_collection(hashed.scope_collection_name("agent:main")).get(include=["documents", "metadatas"])
    assert stored["documents"] == [None]
    assert stored["metadatas"] == [{"content_hash": "h-1"}]
    assert hashed.entries() == {item(1).id: "h-1"}


def test_one_upsert_writes_every_memory_of_every_scope_across_batches(hashed, monkeypatch):
    monkeypatch.setattr(vector, "BATCH", 3)
    monkeypatch.setattr(vector, "EMBED_BATCH", 5)
    items = [item(n, scope="agent:main" if n % 3 else "agent:other") for n in range(1, 15)]
    hashed.upsert(items)
    assert hashed.entries() == {i.id: i.content_hash for i in items}
    assert {scope: len(ids) for scope, ids in _by_scope(hashed).items()} == {"agent:main": 10, "agent:other": 4}
    stored = hashed.vectors("agent:other")
    assert np.allclose(stored[item(3).id], hashed.embedder.embed_passages([item(3).text])[0], atol=1e-6)


def _by_scope(index: VectorIndex) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for pk, scopes in index.scopes_holding(list(index.entries())).items():
        for scope in scopes:
            found.setdefault(scope, []).append(pk)
    return found


def test_upsert_removes_a_moved_memory_from_the_scopes_named_and_from_no_other(hashed):
    hashed.upsert([item(1, scope="agent:a")])
    hashed.upsert([item(1, scope="agent:b")])  # a move nobody named: the entry in agent:a stays
    assert set(hashed.scopes_holding([item(1).id])[item(1).id]) == {"agent:a", "agent:b"}
    hashed.upsert([item(1, scope="agent:c")], moved={item(1).id: ["agent:b", "agent:c", "agent:gone"]})
    assert set(hashed.scopes_holding([item(1).id])[item(1).id]) == {"agent:a", "agent:c"}


def test_a_moved_memory_leaves_its_old_collection_and_a_stray_elsewhere_is_left_to_repair(indexes, write):
    memory = write("Deploys go out on Fridays after the smoke tests.", kind="fact", scope="agent:main")
    pk = str(memory.pk)
    # An entry of the same id left in a third scope by hand: only a lookup of every collection finds it.
    get_index("vector").upsert([IndexedMemory.from_memory(Memory(**{**_fields(memory), "scope": "agent:third"}))])
    assert held(pk) == {"agent:main", "agent:third"}

    moved(memory, "agent:other")
    assert IndexOutbox.objects.get(memory_id=memory.pk).moved_from_scopes == ["agent:main"]
    outbox.sync_memories([pk])
    assert held(pk) == {"agent:other", "agent:third"}, "the sync asked no collection but the one the row named"
    assert not IndexOutbox.objects.exists()

    diff = {diff.index: diff for diff in health.verify()}["vector"]
    assert (diff.stale, diff.missing, diff.orphaned) == ([pk], [], [])
    health.repair()
    assert held(pk) == {"agent:other"}
    assert all(diff.ok for diff in health.verify())


def _fields(memory: Memory) -> dict:
    return {f.attname: getattr(memory, f.attname) for f in Memory._meta.concrete_fields}


def test_a_memory_moved_twice_before_its_sync_leaves_every_scope_it_passed_through(indexes, write):
    memory = write("The staging database is read-only on Fridays.", kind="fact", scope="agent:a")
    pk = str(memory.pk)
    moved(memory, "agent:b")
    # A sync that began before the second move: it wrote agent:b and, the row being queued again
    # meanwhile, leaves the row behind.
    get_index("vector").upsert([IndexedMemory.from_memory(memory)], moved={pk: ["agent:a"]})
    assert held(pk) == {"agent:b"}
    moved(memory, "agent:c")
    assert IndexOutbox.objects.get(memory_id=memory.pk).moved_from_scopes == ["agent:a", "agent:b"]
    outbox.sync_memories([pk])
    assert held(pk) == {"agent:c"}


def test_a_memory_moved_away_and_back_before_its_sync_stays_in_its_scope(indexes, write):
    memory = write("The backup job runs on Sundays.", kind="fact", scope="agent:a")
    moved(memory, "agent:b")
    moved(memory, "agent:a")
    assert IndexOutbox.objects.get(memory_id=memory.pk).moved_from_scopes == ["agent:a", "agent:b"]
    outbox.sync_memories([str(memory.pk)])
    assert held(memory.pk) == {"agent:a"}


def test_an_edit_that_keeps_the_scope_records_no_move(indexes, write):
    memory = write("The backup job runs on Sundays.", kind="fact", scope="agent:a")
    with transaction.atomic():
        memory.edit(actor="test", text="The backup job runs on Saturdays.")
    assert IndexOutbox.objects.get(memory_id=memory.pk).moved_from_scopes == []


def test_a_reimport_that_moves_a_memory_records_the_scope_it_left(indexes, write):
    memory = write("The user runs 1000 RTX 4070s in an IDC.", kind="fact", scope="agent:main")
    line = json.dumps(jsonl.memory_record(memory) | {"scope": "agent:test-w"})
    with transaction.atomic():
        report = jsonl.import_lines([line], allow_move=True)
    assert report.updated == 1
    assert IndexOutbox.objects.get(memory_id=memory.pk).moved_from_scopes == ["agent:main"]
    outbox.sync_memories([str(memory.pk)])
    assert held(memory.pk) == {"agent:test-w"}


def test_dedup_reads_current_vectors_from_the_index_and_embeds_what_it_is_behind_on(indexes, write):
    first = write("Deploys go out on Fridays.", kind="fact")
    second = write("The user prefers black coffee.", kind="preference")
    index = get_index("vector")
    embedder = index.embedder
    stored = index.vectors("agent:main")
    vectors = passage_vectors("agent:main", [first, second])
    assert np.allclose(vectors, np.stack([stored[str(first.pk)], stored[str(second.pk)]]), atol=1e-6)

    with transaction.atomic():  # committed, not yet synced: the index still holds the old text's vector
        second.edit(actor="test", text="The user prefers green tea.")
    vectors = passage_vectors("agent:main", [first, second])
    assert np.allclose(vectors[1], embedder.embed_passages(["The user prefers green tea."])[0], atol=1e-5)
    assert not np.allclose(vectors[1], stored[str(second.pk)], atol=1e-3)


def test_a_move_no_outbox_row_recorded_is_found_by_verify_and_repaired(indexes, write):
    memory = write("The on-call phone is 18600000000.", kind="entity", scope="agent:a")
    Memory.objects.filter(pk=memory.pk).update(scope="agent:b")  # behind the store's back: no outbox row
    diff = {diff.index: diff for diff in health.verify()}["vector"]
    assert diff.stale == [str(memory.pk)], "the entry's fingerprint names the scope it was written for"
    health.repair()
    assert held(memory.pk) == {"agent:b"}
    assert all(diff.ok for diff in health.verify())


def test_delete_asks_the_scopes_named_and_every_scope_only_for_an_id_it_does_not_name(hashed, monkeypatch):
    hashed.upsert([item(1, scope="agent:a"), item(2, scope="agent:c")])
    hashed.upsert([item(1, scope="agent:b")])  # a stray entry of memory 1 nobody named
    asked: list[str] = []
    real_delete = chromadb.api.models.Collection.Collection.delete

    def counting(collection, *args, **kwargs):
        asked.append(collection.name)
        return real_delete(collection, *args, **kwargs)

    monkeypatch.setattr(chromadb.api.models.Collection.Collection, "delete", counting)
    hashed.delete([item(1).id], scopes={item(1).id: ["agent:a", "agent:gone"]})
    assert asked == [hashed.scope_collection_name("agent:a")]
    assert hashed.scopes_holding([item(1).id, item(2).id]) == {item(1).id: ["agent:b"], item(2).id: ["agent:c"]}

    asked.clear()
    hashed.delete([item(1).id, item(2).id])  # no scope named: every collection is asked
    assert len(asked) == 3
    assert hashed.entries() == {}


def test_a_tombstoned_memory_leaves_its_scope_and_those_it_moved_out_of(indexes, write):
    memory = write("The release train leaves every other Tuesday.", kind="fact", scope="agent:a")
    pk = str(memory.pk)
    moved(memory, "agent:b")
    get_index("vector").upsert([IndexedMemory.from_memory(memory)])  # a sync that named no move
    assert held(pk) == {"agent:a", "agent:b"}
    with transaction.atomic():
        memory.tombstone("wrong", actor="test")
    outbox.sync_memories([pk])
    assert held(pk) == set(), "the row named agent:a, the memory agent:b"


def test_repair_removes_a_gone_memorys_entry_from_a_scope_nothing_recorded(indexes, write):
    memory = write("The VPN needs the hardware token after 20:00.", kind="fact", scope="agent:a")
    pk = str(memory.pk)
    get_index("vector").upsert([IndexedMemory.from_memory(Memory(**{**_fields(memory), "scope": "agent:third"}))])
    with transaction.atomic():
        memory.tombstone("wrong", actor="test")
    outbox.sync_memories([pk])
    assert held(pk) == {"agent:third"}, "no record names agent:third"
    diff = {diff.index: diff for diff in health.verify()}["vector"]
    assert diff.orphaned == [pk]
    health.repair()
    assert held(pk) == set()
    assert all(diff.ok for diff in health.verify())
