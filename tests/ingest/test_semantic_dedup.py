"""Dedup layer 3: a new memory that says what an active one of its scope says merges into it."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from memoryui import rules
from memoryui.models import IndexOutbox, Memory, MemoryEvent, PendingVector
from searchindex import indexes as search_indexes
from searchindex import outbox

pytestmark = pytest.mark.django_db


def test_a_reworded_memory_merges_into_its_neighbour_and_the_event_records_the_similarity(indexes, write):
    first = write("Deploys go out on Fridays after the smoke tests.", kind="procedure")
    again = write("Deploys happen on Fridays, after the smoke tests pass.", kind="procedure")
    assert again.pk == first.pk
    assert Memory.objects.count() == 1
    again.refresh_from_db()
    assert again.access_count == 1
    event = MemoryEvent.objects.get(memory=first, action="merged")
    assert event.reason.startswith("duplicate by semantic (cosine similarity 0.9")
    assert event.after["similarity"] >= 0.985
    assert event.after["incoming"] == "Deploys happen on Fridays, after the smoke tests pass."


def test_the_threshold_is_tunable_and_off_switches_the_layer(indexes, write, settings):
    write("The user prefers concise answers.", kind="preference")
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = None
    write("User prefers concise answers", kind="preference")
    assert Memory.objects.count() == 2
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.999
    write("The user prefers brief answers.", kind="preference")  # near, but under the threshold
    assert Memory.objects.count() == 3


def test_a_restatement_merges_below_the_threshold_as_dedup_links_it(indexes, write, settings):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.999
    first = write("Releases go out on Thursdays.", kind="procedure")
    more = write("Releases go out on Thursdays, after the QA sign-off.", kind="procedure")

    assert more.pk == first.pk and Memory.objects.count() == 1
    event = MemoryEvent.objects.get(memory=first, action="merged")
    assert event.reason.endswith(": restates with more detail") and event.after["similarity"] < 0.999
    more.refresh_from_db()
    assert more.text == "Releases go out on Thursdays, after the QA sign-off."  # the text that says more


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [
        ("The GPU fleet runs RTX 4070 cards.", "The GPU fleet runs RTX 4090 cards."),
        ("The user's phone number is 18600000000.", "The user's phone number is 18600000001."),
        ("用户喜欢简洁的回答", "用户不喜欢简洁的回答"),
    ],
)
def test_near_identical_sentences_with_other_numbers_or_a_negation_stay_apart(indexes, write, stored, incoming):
    first = write(stored, kind="fact")
    second = write(incoming, kind="fact")
    assert second.pk != first.pk
    assert rules.semantic_merge_blocker(stored, incoming) is not None


def test_other_scopes_and_tombstoned_memories_are_never_merged_into(indexes, write, django_capture_on_commit_callbacks):
    other = write("Deploys go out on Fridays after the smoke tests.", kind="procedure", scope="agent:other")
    main = write("Deploys happen on Fridays, after the smoke tests pass.", kind="procedure")
    assert main.pk != other.pk
    with django_capture_on_commit_callbacks(execute=True):
        main.tombstone("wrong", actor="test")
    again = write("Deploys go out on Fridays after the smoke tests!", kind="procedure")
    assert again.pk not in {main.pk, other.pk}


def test_a_write_succeeds_when_the_vector_index_is_down_and_says_the_layer_was_skipped(indexes, make_memory, settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        settings.CHROMA_URL = f"http://127.0.0.1:{probe.getsockname()[1]}"
    search_indexes.close_indexes()
    memory = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    created = MemoryEvent.objects.get(memory=memory, action="created")
    assert created.reason.startswith("semantic dedup skipped: vector index unavailable")


def test_the_merge_blocker_allows_rewordings_with_the_same_numbers_and_polarity():
    assert rules.semantic_merge_blocker("我的幸运数字是 88", "我的幸运数字是88哦") is None
    assert rules.semantic_merge_blocker("Never add trailers.", "Do not add trailers.") is None
    assert rules.semantic_merge_blocker("Prefers concise answers.", "Prefers no concise answers.") is not None


def test_the_vector_embedded_for_dedup_rides_in_the_outbox_so_the_index_sync_does_not_embed_again(
    indexes, make_memory, monkeypatch
):
    memory = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")  # sync not run yet
    assert IndexOutbox.objects.filter(memory_id=memory.pk).exists()
    row = PendingVector.objects.get(memory_id=memory.pk)
    embedder = search_indexes.get_index("vector").embedder
    assert row.embedder == embedder.name and row.content_hash == memory.content_hash
    stored = np.frombuffer(bytes(row.vector), dtype="<f4")
    assert stored.shape == (embedder.dim,)

    embedder.forget_recent()  # as in a worker process that never saw the write
    embedded = []
    original = embedder._embed_batch
    monkeypatch.setattr(embedder, "_embed_batch", lambda texts, **kw: embedded.append(texts) or original(texts, **kw))
    outbox.sync_memories([str(memory.pk)])
    assert embedded == []
    assert not PendingVector.objects.exists() and not IndexOutbox.objects.exists()
    [hit] = search_indexes.get_index("vector").search_vector(stored, scopes=["agent:main"], k=1)
    assert hit.id == str(memory.pk) and hit.score > 0.999


def test_a_vector_of_an_older_text_is_not_reused(indexes, make_memory, monkeypatch):
    memory = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    memory.edit(actor="test", text="Escalate ata outages to the platform lead.")
    embedder = search_indexes.get_index("vector").embedder
    embedder.forget_recent()
    embedded = []
    original = embedder._embed_batch
    monkeypatch.setattr(embedder, "_embed_batch", lambda texts, **kw: embedded.append(texts) or original(texts, **kw))
    outbox.sync_memories([str(memory.pk)])
    assert embedded == [["Escalate ata outages to the platform lead."]]
