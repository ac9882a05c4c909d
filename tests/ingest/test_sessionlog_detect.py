"""Which format a file is in, from its content: every session-log fixture, memoryui's own JSON
(which keeps reading as it did), and files that are none of them."""

from __future__ import annotations

import json

import pytest

from ingest import sessionlogs
from ingest.sessionlogs import SessionLogError, detect
from tests.ingest.sessionlog_support import SESSIONS


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-code/session.jsonl", "claude-code"),
        ("claude-code/crashed.jsonl", "claude-code"),
        ("gemini/checkpoint-staging-db.json", "gemini"),
        ("gemini/checkpoint-hotfix.json", "gemini"),
        ("qwen-code/checkpoint-release-notes.json", "gemini"),
        ("openai/session.json", "openai"),
        ("openai/crashed.json", "openai"),
    ],
)
def test_every_fixture_is_detected_as_its_format(name, expected):
    assert detect((SESSIONS / name).read_text(encoding="utf-8")) == expected


def test_memoryui_transcript_json_is_detected_as_memoryui_and_read_unchanged():
    ours = {
        "id": "s-1",
        "scope": "agent:main",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "x", "arguments": {}}]},
        ],
    }

    assert detect(json.dumps(ours)) == "memoryui"
    assert detect(json.dumps(ours["messages"])) == "memoryui"  # a bare list of our messages
    session = sessionlogs.read(json.dumps(ours))
    assert session.transcript == ours and session.format == "memoryui"
    assert sessionlogs.read(json.dumps(ours["messages"])).transcript == {"messages": ours["messages"]}


def test_openai_marks_win_over_memoryui_only_without_a_scope():
    openai_call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [openai_call]}]

    assert detect(json.dumps({"messages": messages})) == "openai"
    assert detect(json.dumps([{"role": "developer", "content": "Be brief."}])) == "openai"
    assert detect(json.dumps({"scope": "agent:main", "messages": messages})) == "memoryui"


def test_a_single_claude_code_line_is_a_session():
    line = {"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": "hi"}}

    assert detect(json.dumps(line)) == "claude-code"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty"),
        ("{not json", "Invalid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
        ('{"a": ' * 100_000 + "{}" + "}" * 100_000, "is nested more than 32 levels deep"),
    ],
)
def test_a_file_in_no_format_says_why(text, says):
    with pytest.raises(SessionLogError, match=says.replace("(", r"\(").replace(")", r"\)")):
        sessionlogs.read(text)


def test_a_format_asked_for_that_the_file_is_not_in_says_so():
    with pytest.raises(SessionLogError, match="line 1 is not JSON"):
        sessionlogs.read("[{\n", "claude-code")
    with pytest.raises(SessionLogError, match="role must be user or model"):
        sessionlogs.read(json.dumps([{"role": "assistant", "parts": [{"text": "hi"}]}]), "gemini")
    with pytest.raises(SessionLogError, match="unknown format 'markdown'"):
        sessionlogs.read("{}", "markdown")


def test_a_session_opening_with_a_file_snapshot_is_still_claude_code():
    lines = (SESSIONS / "claude-code" / "crashed.jsonl").read_text().splitlines()
    snapshot = {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}, "isSnapshotUpdate": False}

    assert detect("\n".join([json.dumps(snapshot), *lines])) == "claude-code"
    with pytest.raises(SessionLogError, match="Invalid JSON: Extra data"):
        detect("\n".join([json.dumps(snapshot), json.dumps(snapshot)]))  # no session event in it
