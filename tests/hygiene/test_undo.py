"""Undo of a batch: every memory back exactly as before, never over a later change unless forced,
recorded as a batch of its own (so it can be undone too)."""

from __future__ import annotations

import uuid

import pytest

from hygiene import undo
from ingest import jsonl
from ingest.ingestion import ingest
from ingest.tasks import enqueue_extraction
from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db


def _record(memory: Memory) -> dict:
    return jsonl.memory_record(Memory.objects.get(pk=memory.pk))


def test_a_bulk_action_batch_is_undone_exactly_including_updated_at(make_memory):
    a = make_memory("Prefers tabs.", kind="preference")
    b = make_memory("Deploys on Fridays.", kind="procedure")
    before = [_record(a), _record(b)]
    batch = uuid.uuid4()
    a.apply_action("tombstone", actor="alice", batch=batch, reason="cleaning")
    b.apply_action("set_tier", actor="alice", batch=batch, tier="peripheral")

    report = undo.undo_batch(batch, actor="alice")

    assert [_record(a), _record(b)] == before
    assert (report.restored, report.reverted, report.tombstoned) == (1, 1, 0)
    events = MemoryEvent.objects.filter(batch=report.undo_batch)
    assert {e.reason for e in events} == {f"undo of batch {batch}"}


def test_a_memory_changed_after_the_batch_is_not_overwritten_unless_forced(make_memory):
    memory = make_memory("Prefers tabs.", kind="preference")
    batch = uuid.uuid4()
    memory.apply_action("pin", actor="alice", batch=batch)
    memory.edit(actor="bob", text="Prefers tabs, width 4.")

    with pytest.raises(undo.UndoError, match=f"1 memory changed after batch {batch}: {memory.pk}"):
        undo.undo_batch(batch, actor="alice")
    assert Memory.objects.get(pk=memory.pk).pinned

    undo.undo_batch(batch, actor="alice", force=True)
    memory.refresh_from_db()
    assert (memory.pinned, memory.text) == (False, "Prefers tabs, width 4.")


def test_memories_a_batch_created_are_tombstoned_and_the_undo_itself_can_be_undone(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"scope": "agent:main", "kind": "fact", "text": "Runs 1000 RTX 4070s."}\n', encoding="utf-8")
    with path.open("rb") as lines:
        imported = jsonl.import_lines(lines)
    memory = Memory.objects.get()

    report = undo.undo_batch(imported.batch, actor="alice")
    assert report.tombstoned == 1
    assert Memory.objects.get(pk=memory.pk).status == "tombstoned"

    undo.undo_batch(report.undo_batch, actor="alice")
    assert Memory.objects.get(pk=memory.pk).status == "active"


@pytest.mark.parametrize(
    ("batch", "message"),
    [("not-a-batch", "is not a batch id"), ("5b0c7c4e-0000-4000-8000-00000000ba7c", "no changes were recorded")],
)
def test_an_unknown_batch_is_a_clear_error(batch, message):
    with pytest.raises(undo.UndoError, match=message):
        undo.undo_batch(batch, actor="alice")


def test_an_extraction_task_records_one_batch_whose_undo_tombstones_what_it_added_and_unmerges_the_rest(
    make_memory, django_capture_on_commit_callbacks
):
    known = make_memory("The user prefers terse answers.", kind="preference")
    before = _record(known)
    messages = []
    for text in ("我的幸运数字是88", "/remember the build server lives in rack R12", "I prefer terse answers"):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    transcript = ingest({"scope": "agent:main", "messages": messages}).transcript
    with django_capture_on_commit_callbacks(execute=True):
        run = enqueue_extraction(transcript, actor="test", foreground=True)
    assert run.counts == {"added": 2, "merged": 1, "skipped": 0}
    assert run.result["batch"] == str(run.pk)

    preview = undo.preview([run.result["batch"]])
    assert (preview.restored, preview.reverted, preview.tombstoned) == (0, 1, 2)
    assert Memory.objects.active().count() == 3  # the preview changed nothing

    report = undo.undo_batch(run.result["batch"], actor="alice")

    assert (report.restored, report.reverted, report.tombstoned) == (0, 1, 2)
    assert [m.text for m in Memory.objects.active()] == [known.text]
    assert _record(known) == before
    assert undo.state(run.result["batch"]) == "undone"


def test_a_preview_of_an_undo_says_what_it_would_do_and_changes_nothing(make_memory):
    memory = make_memory("Prefers tabs.", kind="preference")
    batch = uuid.uuid4()
    memory.apply_action("tombstone", actor="alice", batch=batch, reason="cleaning")
    events = MemoryEvent.objects.count()

    preview = undo.preview([batch])

    assert (preview.restored, preview.reverted, preview.tombstoned) == (1, 0, 0)
    assert MemoryEvent.objects.count() == events
    assert Memory.objects.get(pk=memory.pk).status == "tombstoned"
    assert undo.state(batch) == "undoable" and undo.state(None) is None
