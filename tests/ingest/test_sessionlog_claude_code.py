"""Claude Code session JSONL as a transcript: merged assistant blocks, paired tool results, meta
lines on the system channel, the crashed session's open exchange trimmed, extraction (L0)."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError

from ingest import sessionlogs
from ingest.transcripts import projection_of
from tests.ingest.sessionlog_support import (
    SESSIONS,
    added,
    export,
    extract_l0,
    ingest,
    openai_problems,
    run,
    skipped,
    stored,
)

pytestmark = pytest.mark.django_db

SESSION_ID = "5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60"


def test_a_session_is_stored_under_its_session_id_with_its_format_remembered():
    transcript = ingest("claude-code/session.jsonl")

    assert transcript.external_id == SESSION_ID and transcript.scope == "agent:main"
    assert transcript.title == "Release checklist and pytest setup"
    assert transcript.metadata["format"] == "claude-code"
    assert transcript.metadata["cwd"] == "/home/priya/src/shop"
    # Left out: the subagent's sidechain, the file snapshot, the thinking block.
    assert transcript.metadata["left_out"] == {
        "sidechain event": 2,
        "file-history-snapshot event": 1,
        "thinking block": 1,
    }


def test_one_assistant_message_per_message_id_with_its_tool_uses_as_calls_and_results_paired():
    messages = stored(ingest("claude-code/session.jsonl"))

    assert [m["role"] for m in messages] == [
        "system", "user", "user", "user", "user", "assistant", "tool", "tool", "system", "assistant", "user",
        "assistant",
    ]  # fmt: skip
    merged = messages[5]
    assert merged["content"] == "I'll read the release workflow and the Makefile."
    assert [(c["id"], c["name"]) for c in merged["tool_calls"]] == [
        ("toolu_01RkP7x2Vd9aQe4mWb6sLc3N", "Read"),
        ("toolu_01BsH4k8Tn2cWq7eYx5dMf1G", "Bash"),
    ]
    assert json.loads(merged["tool_calls"][1]["arguments"])["command"] == "grep -n pytest Makefile"
    assert [m["tool_call_id"] for m in messages[6:8]] == [c["id"] for c in merged["tool_calls"]]
    assert messages[7]["content"] == "14:test:\n15:\tpytest -q tests/"  # text blocks of a result, as text
    assert messages[4]["created_at"].startswith("2026-11-25T09:00:41.507")


def test_meta_lines_go_to_the_system_channel_and_the_source_filter_skips_them():
    transcript = ingest("claude-code/session.jsonl")
    messages = stored(transcript)

    assert [(m.get("channel"), m.get("source")) for m in messages[1:4]] == [("system", "internal")] * 3
    assert (messages[0]["source"], messages[8]["source"]) == ("compaction", "internal")  # summary, system event
    assert "channel" not in messages[4] and "source" not in messages[4]  # the user's own words
    report = extract_l0(transcript)
    assert skipped(report) == {1: "system channel", 2: "system channel", 3: "system channel"}


def test_extraction_gives_the_users_name_preference_and_remember_request():
    report = extract_l0(ingest("claude-code/session.jsonl"))

    assert added(report) == [
        ("entity", "The user's name is Priya Raman."),
        ("preference", "The user prefers pytest over unittest for every new test."),
        ("remember", "Releases go out on Thursdays after the 14:00 standup."),
    ]


def test_a_crashed_session_projects_without_its_partly_answered_exchange():
    transcript = ingest("claude-code/crashed.jsonl")
    messages = stored(transcript)
    assert [c["name"] for c in messages[3]["tool_calls"]] == ["mcp__slack__post", "mcp__slack__lookup"]

    projection = projection_of(transcript)

    assert [m.index for m in projection.trimmed] == [3, 4]
    assert [m.index for m in projection.messages] == [0, 1, 2]
    assert [r.state for r in projection.rounds] == ["complete", "in_flight"]
    assert any("mcp__slack__lookup" in note and "no result" in note for note in projection.notes)
    report = extract_l0(transcript)
    assert added(report) == [("entity", "The user's name is Tomás Ortega.")]
    assert skipped(report)[2].startswith("in-flight round")  # the preference waits for the round


def test_the_projected_export_of_a_crashed_session_is_a_valid_openai_request():
    transcript = ingest("claude-code/crashed.jsonl")

    projected = json.loads(export(transcript, "--projected", "--format", "openai"))
    everything = json.loads(export(transcript, "--format", "openai"))

    assert openai_problems(projected) == []
    assert [m["role"] for m in projected] == ["user", "assistant", "user"]
    assert any("toolu_01LookZ3m5Kp7Lq9Wr2Ts4Vx" in problem for problem in openai_problems(everything))


def test_the_projection_is_written_back_as_claude_code_events_that_read_back_the_same():
    transcript = ingest("claude-code/session.jsonl")

    text = export(transcript, "--projected")  # in the format it came in
    events = [json.loads(line) for line in text.splitlines()]
    again = sessionlogs.read(text, filename="again.jsonl")

    assert again.format == "claude-code"
    assert {event["sessionId"] for event in events if "sessionId" in event} == {SESSION_ID}
    # One event per content block, as Claude Code writes them: text + 2 tool uses share an id.
    assert len({e["message"]["id"] for e in events if e["type"] == "assistant"}) == 3
    assert [{k: v for k, v in m.items() if k != "created_at"} for m in again.transcript["messages"]] == [
        {k: v for k, v in m.items() if k != "created_at"} for m in stored(transcript)
    ]


def test_the_id_option_names_the_transcript_and_a_missing_scope_is_refused():
    transcript = ingest("claude-code/session.jsonl", "--id", "priya/release-setup")
    assert transcript.external_id == "priya/release-setup"

    with pytest.raises(CommandError, match="names no scope: give --scope"):
        run("ingest_transcript", str(SESSIONS / "claude-code" / "session.jsonl"))


def test_ingesting_the_same_session_again_adds_nothing():
    first = run("ingest_transcript", str(SESSIONS / "claude-code" / "session.jsonl"), "--scope", "agent:main")
    again = run("ingest_transcript", str(SESSIONS / "claude-code" / "session.jsonl"), "--scope", "agent:main")

    assert (first["created"], again["created"], again["added"], again["unchanged"]) == (True, False, 0, 12)
    assert again["format"] == "claude-code" and "left out 2 sidechain event(s)" in again["notes"]


def test_a_hook_line_between_a_call_and_its_results_waits_until_the_results_are_in():
    # In the file the PreToolUse hook's system event comes after the Bash tool_use and before
    # both tool_results; stored, it follows them, so the exchange stays whole.
    transcript = ingest("claude-code/session.jsonl")
    lines = (SESSIONS / "claude-code" / "session.jsonl").read_text().splitlines()
    order = [json.loads(line).get("type") for line in lines]
    assert order.index("system") < order.index("user", order.index("system"))

    assert [m["role"] for m in stored(transcript)[5:9]] == ["assistant", "tool", "tool", "system"]
    assert openai_problems(json.loads(export(transcript, "--projected", "--format", "openai"))) == []


def test_a_last_line_cut_short_by_the_crash_is_left_out_with_a_note():
    text = (SESSIONS / "claude-code" / "crashed.jsonl").read_text()
    cut = text + '{"type":"assistant","message":{"id":"msg_01Zz","role":"assist'

    session = sessionlogs.read(cut, filename="crashed.jsonl")

    assert len(session.transcript["messages"]) == 5
    assert any("line 8 left out: cut short" in note for note in session.notes)
    with pytest.raises(sessionlogs.SessionLogError, match="line 1 is not JSON"):
        sessionlogs.read('{"type": "user", "message": \n' + text, "claude-code")
