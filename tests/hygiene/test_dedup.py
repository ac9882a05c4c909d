"""Duplicate clusters over a scope: the three layers, the canonical memory, merging, rejecting,
threshold replay, and undo of a merge."""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from hygiene import dedup, merging, undo
from ingest import jsonl
from memoryui import rules
from memoryui.models import DistinctPair, Memory, MemoryEvent

pytestmark = pytest.mark.django_db

LAYERS_1_2 = ("exact", "entity_key")


def _restore(**fields) -> Memory:
    """Insert a memory as a faithful restore does: no dedup on the way in (a legacy store)."""
    record = jsonl.parse_record({"scope": "agent:main", "kind": "note", **fields})
    memory = jsonl.new_memory(record)
    jsonl.insert_memories([memory], actor="test")
    return Memory.objects.get(pk=memory.pk)


def _records(ids) -> list[dict]:
    return [jsonl.memory_record(m) for m in Memory.objects.filter(pk__in=ids).order_by("id")]


def test_exact_duplicates_form_one_cluster_with_the_best_memory_as_canonical():
    note = _restore(text="Releases go out on Thursdays.", created_at="2026-01-01T00:00:00Z")
    louder = _restore(text="releases  go out on THURSDAYS.", kind="procedure", importance=0.7)
    other = _restore(text="The staging database resets on Sundays.")

    report = dedup.find_clusters("agent:main", layers=LAYERS_1_2)

    [cluster] = report.clusters
    assert cluster.layer == "exact"
    assert cluster.canonical == louder  # typed beats a note
    assert [m.memory for m in cluster.members] == [louder, note]
    assert other.pk not in cluster.ids
    assert report.duplicates == 1


def test_a_note_stating_an_entity_clusters_with_the_memory_holding_its_key():
    entity = _restore(
        text="用户的幸运数字是 88、66 和 99。", kind="entity", entity_key="lucky_number:88-66-99", pinned=True
    )
    note = _restore(text="我的幸运数字是 88 66 99，记一下")
    _restore(text="我的幸运数字是 7")

    [cluster] = dedup.find_clusters("agent:main", layers=LAYERS_1_2).clusters

    assert cluster.layer == "entity_key"
    assert cluster.canonical == entity
    assert cluster.links[0].detail == "lucky_number:88-66-99"
    assert cluster.ids == {str(entity.pk), str(note.pk)}


def test_merging_keeps_the_canonical_and_tombstones_the_rest_with_a_link():
    canonical = _restore(text="Prefers tabs.", kind="preference", importance=0.6, access_count=3)
    twin = _restore(text="prefers tabs.", kind="preference", importance=0.8, access_count=2, pinned=True)
    fuller = _restore(text="PREFERS TABS.", kind="note", importance=0.2, access_count=1)
    [cluster] = dedup.find_clusters("agent:main", layers=LAYERS_1_2).clusters
    assert cluster.canonical == twin  # pinned first

    result = merging.merge("agent:main", cluster.ids, canonical_id=canonical.pk, actor="alice")

    canonical.refresh_from_db()
    assert result.canonical == str(canonical.pk)
    assert canonical.status == "active"
    assert canonical.access_count == 6
    assert canonical.pinned  # a pin is never lost in a merge
    assert canonical.importance == pytest.approx(min(1.0, 0.8 + 2 * rules.MERGE_IMPORTANCE_BUMP))
    assert sorted(canonical.metadata["merged_from"]) == sorted([str(twin.pk), str(fuller.pk)])
    for duplicate in (twin, fuller):
        duplicate.refresh_from_db()
        assert duplicate.status == "tombstoned"
        assert duplicate.metadata["merged_into"] == str(canonical.pk)
        assert str(canonical.pk) in duplicate.tombstone_reason
    actions = sorted(MemoryEvent.objects.filter(batch=result.batch).values_list("action", flat=True))
    assert actions == ["merged", "tombstoned", "tombstoned"]


def test_a_duplicate_adding_information_extends_the_canonical_text_and_passes_on_its_entity_key():
    keyless = _restore(text="The user's phone number is 186 0000 1234", kind="fact", pinned=True)
    keyed = _restore(text="The user's phone number is 186 0000 1234 (work)", kind="entity",
                     entity_key="phone:18600001234")  # fmt: skip

    merging.merge("agent:main", [keyless.pk, keyed.pk], canonical_id=keyless.pk, actor="alice")

    keyless.refresh_from_db()
    assert keyless.entity_key == "phone:18600001234"
    assert keyless.text == "The user's phone number is 186 0000 1234 (work)"


def test_a_merge_of_a_tombstoned_or_foreign_memory_changes_nothing():
    a = _restore(text="Prefers tabs.")
    b = _restore(text="Prefers tabs.")
    elsewhere = _restore(text="Prefers tabs.", scope="agent:other")
    c = _restore(text="Prefers tabs.")
    b.tombstone("gone", actor="alice")
    before = MemoryEvent.objects.count()

    with pytest.raises(merging.DedupError, match="tombstoned"):
        merging.merge("agent:main", [a.pk, b.pk], actor="alice")
    with pytest.raises(merging.DedupError, match="in agent:other"):
        merging.merge("agent:main", [a.pk, elsewhere.pk], actor="alice")
    with pytest.raises(merging.DedupError, match="not one of the members"):
        merging.merge("agent:main", [a.pk, c.pk], canonical_id=elsewhere.pk, actor="alice")

    assert MemoryEvent.objects.count() == before


def test_undoing_a_merge_puts_every_field_back_exactly():
    memories = [
        _restore(text="Prefers tabs.", kind="preference", access_count=4, accessed_at="2026-03-01T08:00:00Z"),
        _restore(text="prefers tabs.", kind="note", entity_key="style:tabs", expires_at="2027-01-01T00:00:00Z"),
        _restore(text="PREFERS TABS.", kind="note", tier="peripheral", importance=0.1),
    ]
    ids = [m.pk for m in memories]
    before = _records(ids)
    report = dedup.find_clusters("agent:main", layers=LAYERS_1_2)
    batch, results = merging.merge_all(report, actor="alice")
    assert _records(ids) != before

    undone = undo.undo_batch(batch, actor="alice")

    assert _records(ids) == before
    assert (undone.restored, undone.reverted, undone.tombstoned) == (2, 1, 0)
    assert undo.is_undone(batch)
    with pytest.raises(undo.UndoError, match="already undone"):
        undo.undo_batch(batch, actor="alice")


def test_rejecting_a_cluster_keeps_its_memories_apart_from_then_on():
    a = _restore(text="Prefers tabs.")
    b = _restore(text="prefers  TABS.")
    [cluster] = dedup.find_clusters("agent:main", layers=LAYERS_1_2).clusters

    assert merging.reject("agent:main", cluster.ids, actor="alice") == 1
    assert merging.reject("agent:main", cluster.ids, actor="alice") == 0  # idempotent

    assert dedup.find_clusters("agent:main", layers=LAYERS_1_2).clusters == []
    pair = DistinctPair.objects.get()
    assert (pair.first, pair.second) == DistinctPair.ordered(b.pk, a.pk)
    assert pair.actor == "alice"


def test_clusters_are_per_scope_and_only_of_active_memories():
    _restore(text="Prefers tabs.")
    _restore(text="Prefers tabs.", scope="agent:other")
    gone = _restore(text="Prefers tabs.")
    gone.tombstone("test", actor="alice")

    assert dedup.find_clusters("agent:main", layers=LAYERS_1_2).clusters == []


def test_bad_thresholds_and_layers_name_the_field():
    with pytest.raises(rules.MemoryValidationError) as error:
        dedup.find_clusters("agent:main", threshold=1.5)
    assert "threshold" in error.value.errors
    with pytest.raises(rules.MemoryValidationError) as error:
        dedup.find_clusters("agent:main", layers=("fuzzy",))
    assert "layers" in error.value.errors


def test_a_restatement_cannot_chain_two_memories_the_guards_keep_apart():
    """Hand-made vectors: the general statement is 0.99 from both counts, which are 0.96 apart."""
    texts = [f"Deploys go out on Fridays after the {n}smoke tests." for n in ("", "3 ", "4 ")]
    general, three, four = (
        Memory(scope="agent:main", kind="procedure", tier="working", importance=0.5, text=text) for text in texts
    )
    memories = [general, three, four]
    for memory in memories:
        memory.content_hash = rules.content_hash(memory.text)
        memory.created_at = timezone.now()
    vectors = np.array([[1.0, 0.0], [0.99, 0.141], [0.99, -0.141]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    report = dedup.find_clusters("agent:main", threshold=0.95, memories=memories, vectors=vectors)

    [cluster] = report.clusters
    assert len(cluster.ids) == 2 and str(general.pk) in cluster.ids
    assert {p.reason.split(" (")[0] for p in report.kept_apart} == {
        "the numbers differ", "would join memories kept apart",
    }  # fmt: skip


# --- what the Duplicates page shows: labels, canonical, links, pairs kept apart -----------------


def _unsaved(texts: list[str], vectors: list[list[float]], **fields) -> tuple[list[Memory], np.ndarray]:
    """Memories as clustering reads them, with hand-made vectors (cosine = their dot product)."""
    memories = []
    for n, text in enumerate(texts):
        memory = Memory(scope="agent:main", kind="note", tier="working", importance=0.5, text=text, **fields)
        memory.content_hash = rules.content_hash(text)
        memory.created_at = timezone.now() + timezone.timedelta(seconds=n)
        memories.append(memory)
    array = np.array(vectors, dtype=np.float32)
    return memories, array / np.linalg.norm(array, axis=1, keepdims=True)


ASK = "Ask me some questions about my preferences and note the answers."
HELLO = "Introduce yourself and say what you can do."


def test_identical_texts_are_linked_as_the_same_text_never_as_similar_meaning():
    copies, vectors = _unsaved([ASK, ASK, ASK], [[1.0, 0.0]] * 3)
    copies[1].importance = 0.9  # the proposed canonical is not the first copy found

    [cluster] = dedup.find_clusters("agent:main", threshold=0.95, memories=copies, vectors=vectors).clusters

    assert cluster.canonical is copies[1]
    assert [member.link.layer for member in cluster.members[1:]] == ["exact", "exact"]
    assert [member.linked_by for member in cluster.members[1:]] == ["same text", "same text"]
    assert {link.layer for link in cluster.links} == {"exact"}
    assert cluster.label == "same text"


def test_a_cluster_of_copies_and_a_similar_text_says_both_and_proposes_one_of_the_copies():
    """At a loose threshold one unrelated text hangs on five copies: the label says what links
    them, the canonical is a copy, and the other text says it joined by similar meaning."""
    hello_vector = [0.93, (1 - 0.93**2) ** 0.5]
    memories, vectors = _unsaved([HELLO, *[ASK] * 5], [hello_vector, *[[1.0, 0.0]] * 5])  # HELLO is the oldest

    [cluster] = dedup.find_clusters("agent:main", threshold=0.928, memories=memories, vectors=vectors).clusters

    assert cluster.label == "same text + similar meaning"
    assert cluster.layers == ["exact", "semantic"]
    assert cluster.canonical.text == ASK
    by_text = {member.memory.text: member for member in cluster.members[1:]}
    assert by_text[HELLO].linked_by == "similar meaning 0.930"
    assert [m.linked_by for m in cluster.members[1:] if m.memory.text == ASK] == ["same text"] * 4


def test_a_pinned_or_typed_memory_is_still_proposed_over_copies_of_a_note():
    typed_vector = [0.96, (1 - 0.96**2) ** 0.5]
    memories, vectors = _unsaved([HELLO, ASK, ASK], [typed_vector, [1.0, 0.0], [1.0, 0.0]])
    memories[0].kind = "preference"

    [cluster] = dedup.find_clusters("agent:main", threshold=0.95, memories=memories, vectors=vectors).clusters

    assert cluster.canonical is memories[0]


def test_a_pair_kept_apart_is_listed_once_for_all_the_copies_of_its_two_texts():
    three = "Ask me 3 questions about my preferences and note the answers."
    close = [0.96, (1 - 0.96**2) ** 0.5]
    memories, vectors = _unsaved([ASK] * 5 + [three] * 2, [[1.0, 0.0]] * 5 + [close] * 2)

    report = dedup.find_clusters("agent:main", threshold=0.95, memories=memories, vectors=vectors)

    [pair] = report.kept_apart
    assert pair.reason == "the numbers differ (3)"
    assert sorted((pair.copies_a, pair.copies_b)) == [2, 5] and pair.pairs == 10
    assert [c.label for c in report.clusters] == ["same text", "same text"]


def test_a_memory_is_never_kept_apart_from_its_own_copy():
    copies, vectors = _unsaved([ASK, ASK], [[1.0, 0.0]] * 2)
    merging.reject("agent:main", [m.pk for m in copies], actor="alice")  # "not duplicates"

    report = dedup.find_clusters("agent:main", threshold=0.95, memories=copies, vectors=vectors)

    assert report.clusters == [] and report.kept_apart == []


def test_merging_all_names_every_layer_of_a_cluster_in_the_reason():
    _restore(text="Prefers tabs.")
    _restore(text="prefers TABS.")
    report = dedup.find_clusters("agent:main", layers=LAYERS_1_2)

    batch, _ = merging.merge_all(report, actor="alice")

    reasons = set(MemoryEvent.objects.filter(batch=batch, action="tombstoned").values_list("reason", flat=True))
    assert [reason.split(":")[0] for reason in reasons] == ["duplicates (same text)"]
