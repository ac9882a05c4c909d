"""Transcript ingestion: whole or nothing, every bad message named by index, idempotent by id + index."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import CommandError, call_command

from ingest.ingestion import TranscriptError, ingest
from memoryui.models import ConflictError, Message, Transcript

pytestmark = pytest.mark.django_db

TID = "0b6c9a52-3f1e-4c7d-9a11-2f0e5d7c8b90"


def transcript(*messages, **fields) -> dict:
    return {"id": TID, "scope": "main", "messages": list(messages), **fields}


USER = {"role": "user", "content": "我叫东升,幸运数字是 88"}
ANSWER = {"role": "assistant", "content": "好的,记住了。"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "name": "web::fetch", "arguments": {"url": "x"}}],
}
RESULT = {"role": "tool", "content": "200 OK", "tool_call_id": "c1"}


def test_a_transcript_is_stored_with_every_message_in_order():
    report = ingest(transcript(USER, CALL, RESULT, ANSWER, title="onboarding"))
    stored = Transcript.objects.get()
    assert report.created and report.added == 4 and report.to_dict()["external_id"] == TID
    assert report.to_dict()["transcript_id"] == str(stored.pk) and stored.external_id == TID
    assert stored.scope == "agent:main" and stored.title == "onboarding"
    assert [m.role for m in stored.messages.all()] == ["user", "assistant", "tool", "assistant"]
    call = stored.messages.get(index=1)
    assert call.tool_calls == [{"id": "c1", "name": "web::fetch", "arguments": '{"url": "x"}'}]
    assert stored.messages.get(index=2).tool_call_id == "c1"


def test_posting_again_adds_only_the_new_messages_and_changes_none():
    ingest(transcript(USER, ANSWER))
    again = ingest(transcript(USER, ANSWER, {"role": "user", "content": "以后回答简短一点"}))
    assert not again.created and again.added == 1 and again.unchanged == 2
    assert Message.objects.count() == 3
    repeat = ingest(transcript(USER, ANSWER, {"role": "user", "content": "以后回答简短一点"}))
    assert repeat.added == 0 and Message.objects.count() == 3


def test_a_changed_stored_message_is_a_conflict_and_writes_nothing():
    ingest(transcript(USER, ANSWER))
    with pytest.raises(ConflictError, match="messages 1 differ"):
        ingest(transcript(USER, {"role": "assistant", "content": "edited"}, {"role": "user", "content": "new one"}))
    assert Message.objects.count() == 2


def test_the_same_id_in_another_scope_is_another_transcript_and_names_no_scope():
    # A transcript id says nothing about other scopes: posting one that agent:main uses, in
    # agent:other, stores a transcript of agent:other's own, and nothing in the answer names agent:main.
    mine = ingest(transcript(USER, ANSWER))
    theirs = ingest({**transcript(USER, {"role": "assistant", "content": "different"}), "scope": "agent:other"})
    assert theirs.created and theirs.transcript.pk != mine.transcript.pk
    assert theirs.to_dict()["external_id"] == TID and theirs.transcript.scope == "agent:other"
    assert "agent:main" not in json.dumps(theirs.to_dict())
    assert mine.transcript.messages.get(index=1).content == ANSWER["content"]


def test_any_string_names_a_transcript_within_its_scope():
    session = "session 2026-11-25/claude-code:7f3a"
    first = ingest({"id": session, "scope": "main", "messages": [USER]})
    again = ingest({"id": session, "scope": "main", "messages": [USER, ANSWER]})
    assert first.created and not again.created and again.added == 1
    assert again.transcript.pk == first.transcript.pk and again.transcript.external_id == session


def test_without_an_id_a_transcript_is_named_by_its_uuid():
    report = ingest({"scope": "main", "messages": [USER]})
    assert report.transcript.external_id == str(report.transcript.pk)
    again = ingest({"id": str(report.transcript.pk), "scope": "main", "messages": [USER, ANSWER]})
    assert not again.created and again.transcript.pk == report.transcript.pk


def test_every_malformed_message_is_named_by_index_and_nothing_is_stored():
    bad = transcript(
        USER,
        {"role": "robot", "content": "beep"},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "x", "tool_calls": "fetch"},
        {"role": "tool", "content": "ok", "tool_call_id": 7},
        {"role": "user", "content": "hi", "source": "somebody", "created_at": "yesterday", "mood": "happy"},
        "just a string",
    )
    with pytest.raises(TranscriptError) as excinfo:
        ingest(bad)
    errors = excinfo.value.errors
    assert set(errors) == {
        "messages[1].role",
        "messages[2].content",
        "messages[3].tool_calls",
        "messages[4].tool_call_id",
        "messages[5].source",
        "messages[5].created_at",
        "messages[5].mood",
        "messages[6]",
    }
    assert "'robot'" in errors["messages[1].role"][0]
    assert not Transcript.objects.exists() and not Message.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"scope": "main", "messages": []}, "messages"),
        ({"scope": "Not A Scope!", "messages": [USER]}, "scope"),
        ({"messages": [USER]}, "scope"),
        ({"id": "x" * 201, "scope": "main", "messages": [USER]}, "id"),
        ({"id": "\u200b\u200b", "scope": "main", "messages": [USER]}, "id"),
        ({"id": ["a"], "scope": "main", "messages": [USER]}, "id"),
        ([USER], "transcript"),
    ],
)
def test_a_malformed_transcript_names_its_field(data, field):
    with pytest.raises(TranscriptError) as excinfo:
        ingest(data)
    assert field in excinfo.value.errors


def test_without_an_id_each_post_is_a_new_transcript():
    first = ingest({"scope": "main", "messages": [USER]})
    second = ingest({"scope": "main", "messages": [USER]})
    assert first.transcript.pk != second.transcript.pk and uuid.UUID(str(first.transcript.pk))


def test_the_command_stores_a_file_and_reports_json(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(transcript(USER, ANSWER)), encoding="utf-8")
    out = io.StringIO()
    call_command("ingest_transcript", str(path), "--json", stdout=out)
    stored = Transcript.objects.get()
    assert json.loads(out.getvalue()) == {
        "transcript_id": str(stored.pk), "external_id": TID, "scope": "agent:main", "created": True,
        "messages": 2, "added": 2, "unchanged": 0,
    }  # fmt: skip
    path.write_text(json.dumps(transcript({"role": "user"})), encoding="utf-8")
    with pytest.raises(CommandError, match=r"messages\[0\].content: a user message needs content"):
        call_command("ingest_transcript", str(path), stdout=io.StringIO())
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(CommandError, match="is not JSON"):
        call_command("ingest_transcript", str(path), stdout=io.StringIO())
