"""OpenAI chat-completions messages as a transcript: developer/system on the system channel,
content parts as text, tool calls and results paired by id, the crashed list's open exchange
trimmed, extraction (L0)."""

from __future__ import annotations

import json

import pytest

from ingest import sessionlogs
from ingest.extraction import guards
from ingest.transcripts import projection_of
from memoryui.models import Transcript
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


def test_a_request_body_is_stored_under_its_id_with_system_roles_on_the_system_channel():
    transcript = ingest("openai/session.json")
    messages = stored(transcript)

    assert transcript.external_id == "chatcmpl-session-8841"
    assert transcript.metadata == {"format": "openai", "model": "gpt-4.1"}
    assert [(m["role"], m.get("channel")) for m in messages if m["role"] == "system"] == [("system", "system")] * 2
    assert messages[4]["tool_calls"] == [
        {
            "id": "call_Kx1bT9qLw2",
            "name": "calendar_add",
            "arguments": '{"date": "2026-12-15", "title": "Payments freeze"}',
        }
    ]
    assert (messages[5]["role"], messages[5]["tool_call_id"]) == ("tool", "call_Kx1bT9qLw2")
    assert messages[8]["content"] == "I prefer Celsius in weather reports."  # from content parts


def test_extraction_gives_the_users_name_remember_request_and_preference():
    report = extract_l0(ingest("openai/session.json"))

    assert added(report) == [
        ("entity", "The user's name is Sam Okafor."),
        ("preference", "The user prefers Celsius in weather reports."),
        ("remember", "The payments freeze starts on December 15."),
    ]
    assert skipped(report) == {}  # system messages are not the user's: never even candidates


def test_the_source_filter_refuses_developer_and_system_messages():
    system = [m for m in stored(ingest("openai/session.json")) if m["role"] == "system"]

    assert [guards.source_filter(m["role"], m.get("channel"), m.get("source")) for m in system] == [
        "system message",
        "system message",
    ]
    # Were one of them given the user role, its channel would still keep it out.
    assert guards.source_filter("user", system[0]["channel"], None) == "system channel"


def test_a_bare_list_without_an_id_needs_the_scope_and_gets_a_new_id():
    transcript = ingest("openai/crashed.json", scope="agent:ops")

    assert transcript.scope == "agent:ops" and transcript.external_id == str(transcript.pk)
    assert transcript.metadata == {"format": "openai"}


def test_a_crashed_list_projects_without_its_partly_answered_exchange():
    transcript = ingest("openai/crashed.json")

    projection = projection_of(transcript)

    assert [m.index for m in projection.trimmed] == [4, 5]
    assert [r.state for r in projection.rounds] == ["complete", "in_flight"]
    assert any("mcp__slack__lookup (call_lookup_9Rz) has no result" in note for note in projection.notes)
    report = extract_l0(transcript)
    assert added(report) == [("entity", "The user's name is Sam Okafor.")]
    assert skipped(report)[3].startswith("in-flight round")


def test_the_projected_export_is_a_valid_request_in_the_format_it_came_in():
    transcript = ingest("openai/crashed.json")

    projected = json.loads(export(transcript, "--projected"))  # openai: the format it came in
    everything = json.loads(export(transcript))

    assert openai_problems(projected) == []
    assert [m["role"] for m in projected] == ["system", "user", "assistant", "user"]
    assert openai_problems(everything) == ["end: calls ['call_lookup_9Rz'] have no result"]


def test_a_complete_session_round_trips_through_the_writer():
    transcript = ingest("openai/session.json")

    written = json.loads(export(transcript, "--projected"))
    again = sessionlogs.read(json.dumps(written))

    assert openai_problems(written) == []
    assert written[4] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_Kx1bT9qLw2",
                "type": "function",
                "function": {"name": "calendar_add", "arguments": '{"date": "2026-12-15", "title": "Payments freeze"}'},
            }
        ],
    }
    assert again.transcript["messages"] == stored(transcript)


def test_legacy_function_calls_pair_with_their_function_results_by_name():
    session = sessionlogs.read(
        json.dumps(
            [
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {"role": "function", "name": "weather", "content": "3 °C"},
                {"role": "assistant", "content": "3 °C in Oslo."},
            ]
        ),
        "openai",
    )

    call, result = session.transcript["messages"][1:3]
    assert result == {"role": "tool", "content": "3 °C", "tool_call_id": call["tool_calls"][0]["id"]}


def test_extract_stores_and_extracts_a_session_log_file_given_its_scope():
    report = run("extract", str(SESSIONS / "openai" / "session.json"), "--scope", "agent:main", "--l1", "off")

    assert added(report) == [
        ("entity", "The user's name is Sam Okafor."),
        ("preference", "The user prefers Celsius in weather reports."),
        ("remember", "The payments freeze starts on December 15."),
    ]
    assert Transcript.objects.get().metadata["format"] == "openai"
