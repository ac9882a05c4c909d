"""Claude Code logs of one feature each, written from its documented format
(tests/fixtures/formats/sessions/README.md): a subagent's sidechain, extended thinking, and a
compacted session. Each one's extraction dry run finds what the user said, and only that."""

from __future__ import annotations

import pytest

from ingest.transcripts import projection_of
from memoryui.models import Memory, Transcript
from tests.ingest.sessionlog_support import SESSIONS, added, run, skipped, stored

pytestmark = pytest.mark.django_db


def ingest(name: str) -> tuple[Transcript, list[str]]:
    """The fixture ingested as a script would (the format detected): the transcript, the read's notes."""
    report = run("ingest_transcript", str(SESSIONS / "claude-code" / name), "--scope", "agent:main")
    assert report["format"] == "claude-code"
    return Transcript.objects.get(pk=report["transcript_id"]), report["notes"]


def dry_run(transcript: Transcript) -> dict:
    report = run("extract", "--transcript", str(transcript.pk), "--dry-run", "--l1", "off")
    assert not Memory.objects.exists()
    return report


def test_a_subagents_sidechain_is_left_out_and_its_prompt_is_not_taken_for_the_users_words():
    transcript, notes = ingest("sidechain.jsonl")
    messages = stored(transcript)

    assert notes == ["left out 4 sidechain event(s)"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                                             "assistant"]  # fmt: skip
    task = messages[1]["tool_calls"][0]
    assert task["name"] == "Task" and messages[2]["tool_call_id"] == task["id"]
    assert messages[2]["content"].startswith("Found 3 call sites of billing_legacy:")  # the subagent's answer
    # The main agent's prompt to the subagent says "Remember that the user prefers …": not the user's words.
    assert not any("Report file paths" in m["content"] for m in messages if m["role"] == "user")

    report = dry_run(transcript)

    assert added(report) == [
        ("entity", "The user's name is Marco Bianchi."),
        ("preference", "The user prefers results grouped by directory."),
        ("remember", "The legacy billing client is removed on March 31."),
    ]
    assert skipped(report) == {}
    assert [item["message"] for item in report["added"] if item["kind"] == "preference"] == [4]  # the user's turn


def test_thinking_blocks_are_left_out_and_what_the_model_thought_is_not_the_users():
    transcript, notes = ingest("thinking.jsonl")
    messages = stored(transcript)

    assert notes == ["left out 4 thinking block(s)"]  # three thinking blocks and a redacted one
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert messages[1]["content"] == "" and messages[1]["tool_calls"][0]["name"] == "Bash"
    assert not any("I prefer to read the cron table" in m["content"] for m in messages)
    assert [round_.state for round_ in projection_of(transcript).rounds] == ["complete", "complete"]

    report = dry_run(transcript)

    # The model's "I prefer to read the cron table…" and "Remember that…" are its thoughts, not memories.
    assert added(report) == [
        ("entity", "The user's name is Aiko Tanaka."),
        ("remember", "The nightly export must start after the backup has finished."),
    ]
    assert skipped(report) == {}


def test_a_compacted_session_keeps_every_turn_and_the_summary_is_not_extracted_again():
    transcript, notes = ingest("compacted.jsonl")
    messages = stored(transcript)

    assert notes == []
    assert transcript.title == "Refactor payments service tests"
    system = [(m["role"], m.get("source"), m["content"][:40]) for m in messages if m.get("channel") == "system"]
    assert system == [
        ("system", "compaction", "Refactor payments service tests"),
        ("user", "internal", "<command-name>/compact</command-name>\n  "),
        ("system", "internal", "Conversation compacted"),
        ("user", "compaction", "This session is being continued from a p"),
        ("user", "internal", "<local-command-stdout>Compacted (ctrl+o "),
    ]
    # The turns before /compact are still in the file, and they are what is extracted.
    report = dry_run(transcript)

    assert added(report) == [
        ("entity", "The user's name is Noor Haddad."),
        ("preference", "The user prefers table-driven tests in Go."),
        ("remember", "The staging deploy needs the VPN."),  # "Now convert refund_test.go." is a task
    ]
    assert skipped(report) == {5: "system channel", 7: "system channel", 8: "system channel"}
