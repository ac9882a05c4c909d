"""Claude Code's `<system-reminder>` blocks in a user event: the runtime's context goes to the
system channel, the user's own words stay a user message that extraction reads, in the order
they came."""

from __future__ import annotations

import json

import pytest

from ingest import sessionlogs
from ingest.transcripts import Msg, project
from memoryui.models import Memory
from tests.ingest.sessionlog_support import added, export, ingest, run, skipped, stored

pytestmark = pytest.mark.django_db

REMINDER = "<system-reminder>\nThe user opened the file /home/dana/src/billing/Makefile in the IDE.\n</system-reminder>"
TODO = "<system-reminder>\nThis is a reminder that your todo list is currently empty.\n</system-reminder>"
MODIFIED = "<system-reminder>\nNote: /home/dana/src/billing/Makefile was modified by a linter.\n</system-reminder>"
PHONE = "My phone number is 186 0000 1234, remember it."
SYSTEM = {"role": "system", "channel": "system", "source": "internal"}


def event(kind: str, content, n: int, **extra) -> str:
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message["id"] = f"msg_{n}"
    line = {"type": kind, "sessionId": "s1", "uuid": f"u{n}", "timestamp": f"2026-12-02T10:00:0{n}Z"}
    return json.dumps({**line, "message": message, **extra})


def read(*contents) -> list[dict]:
    """A user event of each content (a string or blocks) read as Claude Code's, without created_at."""
    text = "\n".join(event("user", content, n) for n, content in enumerate(contents))
    messages = sessionlogs.read(text, "claude-code").transcript["messages"]
    return [{k: v for k, v in message.items() if k != "created_at"} for message in messages]


def blocks(*texts: str) -> list[dict]:
    return [{"type": "text", "text": text} for text in texts]


def test_a_reminder_block_before_the_users_text_is_system_context_and_the_text_stays_the_users():
    assert read(blocks(REMINDER, PHONE)) == [{**SYSTEM, "content": REMINDER}, {"role": "user", "content": PHONE}]


def test_a_reminder_and_the_users_text_in_one_string_are_split_the_same_way():
    assert read(f"{REMINDER}\n\n{PHONE}") == [{**SYSTEM, "content": REMINDER}, {"role": "user", "content": PHONE}]


def test_several_reminders_and_one_after_the_text_keep_their_order():
    as_blocks = read(blocks(TODO, REMINDER, PHONE, MODIFIED))
    in_one_string = read(f"{TODO}\n{REMINDER}\n{PHONE}\n{MODIFIED}\n")

    assert as_blocks == [
        {**SYSTEM, "content": f"{TODO}\n{REMINDER}"},
        {"role": "user", "content": PHONE},
        {**SYSTEM, "content": MODIFIED},
    ]
    assert in_one_string == as_blocks


def test_a_user_event_of_nothing_but_a_reminder_stays_system_context():
    assert read(blocks(REMINDER)) == read(REMINDER) == [{**SYSTEM, "content": REMINDER}]
    assert read(blocks(TODO, MODIFIED)) == [{**SYSTEM, "content": f"{TODO}\n{MODIFIED}"}]


def test_text_without_a_reminder_is_kept_as_it_was_written():
    # Stored messages never change: a session posted again must read the same as before.
    assert read("  Use tabs.\n", blocks("one", "two")) == [
        {"role": "user", "content": "  Use tabs.\n"},
        {"role": "user", "content": "one\ntwo"},
    ]


def test_a_reminder_beside_a_tool_result_leaves_the_round_whole():
    read_makefile = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "Makefile"}}
    its_result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "lint: ruff check ."}
    lines = [
        event("user", "What does the lint target run?", 1),
        event("assistant", [read_makefile], 2),
        event("user", [its_result, *blocks(TODO)], 3),
        event("assistant", blocks("It runs `ruff check .`."), 4),
    ]
    messages = sessionlogs.read("\n".join(lines), "claude-code").transcript["messages"]

    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "system", "assistant"]
    projection = project([Msg.from_dict(index, message) for index, message in enumerate(messages)])
    assert [round_.state for round_ in projection.rounds] == ["complete"]


def test_the_reminders_fixture_gives_what_the_user_said_in_the_extraction_dry_run():
    transcript = ingest("claude-code/reminders.jsonl")
    report = run("extract", "--transcript", str(transcript.pk), "--dry-run", "--l1", "off")

    assert added(report) == [
        ("entity", "The user's name is Dana Whitfield."),
        ("entity", "The user's phone number is 18600001234."),
        ("preference", "The user prefers squash merges on this repo."),
    ]
    assert skipped(report) == {}  # the reminders are system messages: no user message to skip
    assert not Memory.objects.exists()
    roles = [(m["role"], m.get("channel")) for m in stored(transcript)]
    assert roles == [
        ("system", "system"), ("user", None), ("assistant", None),
        ("system", "system"), ("user", None), ("assistant", None),
        ("system", "system"), ("user", None), ("system", "system"), ("assistant", None),
        ("system", "system"),
    ]  # fmt: skip
    assert "make lint" in stored(transcript)[0]["content"]  # the CLAUDE.md context, not the user's words


def test_the_reminders_fixture_is_written_back_as_claude_code_events_that_read_back_the_same():
    transcript = ingest("claude-code/reminders.jsonl")

    again = sessionlogs.read(export(transcript, "--projected"), "claude-code").transcript["messages"]

    def without_times(messages):
        return [{k: v for k, v in m.items() if k != "created_at"} for m in messages]

    assert without_times(again) == without_times(stored(transcript))
