"""Extracting a transcript again changes nothing: a message is one source of its facts, however
often its transcript is extracted. A second source of the same fact (another message, another
transcript) still merges and counts."""

from __future__ import annotations

import pytest

from ingest.extraction import extract
from ingest.ingestion import ingest
from ingest.tasks import enqueue_extraction
from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

FACTS = [
    "我的幸运数字是88",
    "/remember the build server lives in rack R12 of the Dongguan IDC",
    "I prefer terse answers",
]


def conversation(*texts: str) -> dict:
    messages = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    return {"scope": "agent:main", "messages": messages}


def state() -> dict:
    return {m.text: (m.access_count, m.importance, m.accessed_at) for m in Memory.objects.all()}


def extract_as_a_task(transcript, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # and the index sync it queues
        return enqueue_extraction(transcript, actor="test", foreground=True)


def test_extracting_a_transcript_three_times_counts_each_fact_once(indexes, django_capture_on_commit_callbacks):
    transcript = ingest(conversation(*FACTS)).transcript
    first = extract_as_a_task(transcript, django_capture_on_commit_callbacks)
    assert first.counts == {"added": 3, "merged": 0, "skipped": 0}
    after_first = state()
    assert len(after_first) == 3 and all(count == 0 for count, _, _ in after_first.values())

    again = [extract_as_a_task(transcript, django_capture_on_commit_callbacks) for _ in range(2)]

    assert state() == after_first  # access counts, importance, accessed_at: unchanged
    for memory in Memory.objects.all():
        assert list(memory.events.values_list("action", flat=True)) == ["created"]
    assert not MemoryEvent.objects.filter(action="merged").exists()
    for run in again:
        assert run.counts == {"added": 0, "merged": 0, "skipped": 3}
        assert {s["reason"].split(":")[0] for s in run.result["skipped"]} == {"already extracted from this message"}
    # Each message still says which memory it gave.
    given = {o["memory_id"] for m in transcript.messages.filter(role="user") for o in m.extraction["outcomes"]}
    assert given == {str(pk) for pk in Memory.objects.values_list("pk", flat=True)}


def test_a_second_source_of_the_same_fact_still_merges_and_counts(indexes):
    first = ingest(conversation(FACTS[0])).transcript
    extract(first)
    extract(first)
    [memory] = Memory.objects.all()
    assert memory.access_count == 0

    extract(ingest(conversation("记一下,我的幸运数字是 88")).transcript)  # another transcript
    memory.refresh_from_db()
    assert memory.access_count == 1

    # The first transcript goes on: its new message is another source; its first one is not.
    ingest({**conversation(FACTS[0], "my lucky number is 88"), "id": str(first.pk)})
    report = extract(first)
    assert [o.action for o in report.outcomes] == ["skipped", "merged"]
    memory.refresh_from_db()
    assert memory.access_count == 2
    actions = memory.events.order_by("created_at").values_list("action", flat=True)
    assert list(actions) == ["created", "merged", "merged"]


def test_a_dry_run_after_an_extraction_says_nothing_would_change(indexes):
    transcript = ingest(conversation(*FACTS)).transcript
    extract(transcript)
    before = state()
    report = extract(transcript, dry_run=True)
    assert report.counts == {"added": 0, "merged": 0, "skipped": 3}
    assert state() == before
