"""A projected export to a provider's format is a request that provider accepts: a tool result
with no call before it becomes a note of the user's turn, a call left unanswered mid-transcript
gets a stated "no result", and the notes say so. Checked against each provider's rules, written
as validators (the validators shown to refuse what the providers refuse)."""

from __future__ import annotations

import json

import pytest

from ingest import sessionlogs
from ingest.ingestion import ingest as ingest_json
from tests.ingest.sessionlog_support import claude_problems, export, gemini_problems, ingest, openai_problems

pytestmark = pytest.mark.django_db

PROBLEMS = {"openai": openai_problems, "claude-code": claude_problems, "gemini": gemini_problems}
FIXTURES = (
    "claude-code/session.jsonl",
    "claude-code/crashed.jsonl",
    "claude-code/rejected-edit.jsonl",
    "claude-code/reminders.jsonl",
    "gemini/checkpoint-hotfix.json",
    "gemini/checkpoint-staging-db.json",
    "openai/session.json",
    "openai/crashed.json",
)
LEADING_ORPHAN = [
    {"role": "tool", "tool_call_id": "call_old", "content": "42 rows"},
    {"role": "user", "content": "What did the query return?"},
    {"role": "assistant", "content": "It returned 42 rows."},
]


def call(id_: str, name: str = "query") -> dict:
    return {"id": id_, "name": name, "arguments": "{}"}


def stored(messages: list[dict], id_: str = "t-1"):
    return ingest_json({"id": id_, "scope": "agent:main", "messages": messages}).transcript


def get(client, token: str, transcript, fmt: str) -> dict:
    params = {"projected": "true", "as": fmt}
    return client.get(f"/api/transcripts/{transcript.pk}/", params, HTTP_AUTHORIZATION=f"Bearer {token}").json()


@pytest.mark.parametrize("fmt", ["openai", "claude-code", "gemini"])
def test_a_leading_orphan_result_is_exported_as_a_request_the_provider_accepts(client, agent_token, fmt):
    body = get(client, agent_token, stored(LEADING_ORPHAN), fmt)

    assert PROBLEMS[fmt](body["messages"]) == []
    assert "[tool result for call call_old, whose call is not in this transcript] 42 rows" in json.dumps(
        body["messages"]
    )
    assert any("call_old answers no call" in note and "user note" in note for note in body["notes"])


def test_a_leading_orphan_result_becomes_the_users_note_in_openai_messages():
    export_ = sessionlogs.export(stored(LEADING_ORPHAN), "openai")

    assert export_.items[0] == {
        "role": "user",
        "content": "[tool result for call call_old, whose call is not in this transcript] 42 rows",
    }
    assert [item["role"] for item in export_.items] == ["user", "user", "assistant"]


def test_the_command_writes_a_valid_openai_request_for_a_leading_orphan(tmp_path):
    path = tmp_path / "resume.json"

    export(stored(LEADING_ORPHAN), str(path), "--projected", "--format", "openai")

    assert openai_problems(json.loads(path.read_text())) == []


def test_an_orphan_among_an_exchanges_results_goes_after_them():
    transcript = stored(
        [
            {"role": "user", "content": "Count the rows."},
            {"role": "assistant", "content": "", "tool_calls": [call("a")]},
            {"role": "tool", "tool_call_id": "stray", "content": "from another exchange"},
            {"role": "tool", "tool_call_id": "a", "content": "42"},
            {"role": "assistant", "content": "42 rows."},
        ]
    )

    for fmt, problems in PROBLEMS.items():
        assert problems(sessionlogs.export(transcript, fmt).items) == [], fmt
    roles = [item["role"] for item in sessionlogs.export(transcript, "openai").items]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]


def test_a_call_left_unanswered_mid_transcript_gets_a_stated_no_result():
    transcript = stored(
        [
            {"role": "user", "content": "Look both up."},
            {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b", "lookup")]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "user", "content": "Never mind, go on."},
            {"role": "assistant", "content": "Going on."},
        ]
    )

    for fmt, problems in PROBLEMS.items():
        export_ = sessionlogs.export(transcript, fmt)
        assert problems(export_.items) == [], fmt
        assert any("lookup (b) got no result" in note for note in export_.notes), fmt
    answer = sessionlogs.export(transcript, "openai").items[3]
    assert answer == {"role": "tool", "tool_call_id": "b", "content": sessionlogs.pairing.NO_RESULT}


def test_the_memoryui_format_keeps_the_orphan_as_the_projection_has_it():
    document = json.loads(sessionlogs.export(stored(LEADING_ORPHAN), "memoryui").text())

    assert document["messages"][0] == {"role": "tool", "tool_call_id": "call_old", "content": "42 rows"}


def test_the_export_of_every_stored_message_is_left_as_stored():
    items = sessionlogs.export(stored(LEADING_ORPHAN), "openai", projected=False).items

    assert items[0] == {"role": "tool", "tool_call_id": "call_old", "content": "42 rows"}


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("fmt", ["openai", "claude-code", "gemini"])
def test_every_session_log_projected_to_a_provider_format_passes_its_rules(name, fmt):
    assert PROBLEMS[fmt](sessionlogs.export(ingest(name), fmt).items) == []


TOOL_USE = {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}}
PROMPT = {"type": "user", "message": {"role": "user", "content": "go on"}}


def result(id_: str) -> dict:
    return {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id_}]}}


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([result("t")], "answers no tool_use"),
        ([PROMPT, TOOL_USE, result("x")], "answers no tool_use"),
        ([PROMPT, TOOL_USE, PROMPT, result("t")], "text before the tool results"),
        ([PROMPT, TOOL_USE, PROMPT], "without a tool_result"),
        ([PROMPT, TOOL_USE], "without a tool_result"),
    ],
)
def test_the_claude_validator_refuses_what_the_messages_api_refuses(events, problem):
    assert any(problem in found for found in claude_problems(events))


FUNCTION_CALL = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
ASK = {"role": "user", "parts": [{"text": "go on"}]}


def response(name: str) -> dict:
    return {"role": "user", "parts": [{"functionResponse": {"name": name, "response": {}}}]}


@pytest.mark.parametrize(
    ("contents", "problem"),
    [
        ([response("f")], "0 function call part(s)"),
        ([ASK, FUNCTION_CALL, response("g")], "answers no function call"),
        ([ASK, FUNCTION_CALL, ASK], "0 function response part(s) for 1"),
        ([ASK, FUNCTION_CALL], "without their responses"),
        ([{"role": "model", "parts": [{"text": "hi"}]}, FUNCTION_CALL, response("f")], "not right after a user"),
    ],
)
def test_the_gemini_validator_refuses_what_generate_content_refuses(contents, problem):
    assert any(problem in found for found in gemini_problems(contents))
