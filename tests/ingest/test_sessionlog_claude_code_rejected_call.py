"""A Claude Code session where the user rejected a tool call and went on: the round is over once the
user speaks again, so what they said in it is extracted."""

from __future__ import annotations

import pytest

from ingest.transcripts import projection_of
from memoryui.models import Memory
from tests.ingest.sessionlog_support import added, ingest, run, skipped, stored

pytestmark = pytest.mark.django_db


def test_the_rejected_edit_is_stored_as_an_answered_call_and_the_interruption_as_system():
    messages = stored(ingest("claude-code/rejected-edit.jsonl"))

    assert [(m["role"], m.get("channel")) for m in messages] == [
        ("user", None), ("assistant", None), ("tool", None), ("user", "system"), ("user", None), ("assistant", None),
    ]  # fmt: skip
    assert messages[1]["tool_calls"][0]["name"] == "Edit"
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["id"]
    assert messages[2]["content"].startswith("The user doesn't want to proceed with this tool use.")


def test_the_round_of_the_rejected_edit_is_interrupted_not_in_flight():
    projection = projection_of(ingest("claude-code/rejected-edit.jsonl"))

    assert projection.trimmed == []
    assert [(r.number, r.state) for r in projection.rounds] == [(1, "interrupted"), (2, "open"), (3, "complete")]
    assert [r.number for r in projection.extractable_rounds] == [1, 2, 3]
    assert any(note.startswith("round 1 was interrupted") for note in projection.notes)
    assert not any("in flight" in note for note in projection.notes)


def test_the_rejected_edit_fixture_gives_what_the_user_said_in_the_extraction_dry_run():
    transcript = ingest("claude-code/rejected-edit.jsonl")
    report = run("extract", "--transcript", str(transcript.pk), "--dry-run", "--l1", "off")

    assert added(report) == [
        ("preference", "The user prefers small pull requests, one change each."),
        ("remember", "The release job must run on ubuntu-24.04."),
    ]
    assert skipped(report) == {3: "system channel"}  # "[Request interrupted by user for tool use]"
    assert not Memory.objects.exists()
