"""The projected export: `GET /api/transcripts/<id>/?projected=true` and `manage.py
export_transcript ID --projected`, in the format the transcript came in or another; and the
strict OpenAI-format validator the session-log tests rely on, shown to refuse what it must."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ingest.ingestion import ingest as ingest_json
from tests.ingest.sessionlog_support import export, ingest, openai_problems, run

pytestmark = pytest.mark.django_db

LOOKUP_CALL = "toolu_01LookZ3m5Kp7Lq9Wr2Ts4Vx"  # the unanswered call of claude-code/crashed.jsonl
CALL = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def get(client, token: str, transcript, **params):
    if "as_" in params:
        params["as"] = params.pop("as_")
    return client.get(f"/api/transcripts/{transcript.pk}/", params, HTTP_AUTHORIZATION=f"Bearer {token}")


def test_projected_true_answers_the_projection_in_the_format_it_came_in(client, agent_token):
    transcript = ingest("claude-code/crashed.jsonl")

    body = get(client, agent_token, transcript, projected="true").json()

    assert (body["format"], body["external_id"], body["trimmed"]) == ("claude-code", transcript.external_id, [3, 4])
    assert [event["type"] for event in body["messages"]] == ["user", "assistant", "user"]
    assert LOOKUP_CALL not in json.dumps(body["messages"])
    assert any("partly answered" in note for note in body["notes"])


def test_projected_true_as_openai_is_a_valid_request(client, agent_token):
    for name in ("claude-code/crashed.jsonl", "gemini/checkpoint-hotfix.json", "openai/crashed.json"):
        transcript = ingest(name)

        body = get(client, agent_token, transcript, projected="true", as_="openai").json()

        assert body["format"] == "openai"
        assert openai_problems(body["messages"]) == [], name


def test_without_projected_the_detail_is_unchanged_and_shows_the_trimmed_messages(client, agent_token):
    transcript = ingest("openai/crashed.json")

    body = get(client, agent_token, transcript).json()

    assert len(body["messages"]) == 6 and body["projection"]["trimmed"] == [4, 5]
    assert [m["trimmed"] for m in body["messages"]] == [False] * 4 + [True] * 2


def test_a_bad_format_or_flag_is_a_400(client, agent_token):
    transcript = ingest("openai/crashed.json")

    unknown = get(client, agent_token, transcript, projected="true", as_="markdown")
    bad_flag = get(client, agent_token, transcript, projected="maybe")

    assert unknown.status_code == bad_flag.status_code == 400
    assert "as" in unknown.json()["error"]["details"]
    assert "projected" in bad_flag.json()["error"]["details"]


def test_as_without_projected_writes_every_stored_message_in_that_format(client, agent_token):
    transcript = ingest("openai/crashed.json")

    body = get(client, agent_token, transcript, as_="openai").json()

    assert body["format"] == "openai" and body["trimmed"] == []
    assert len(body["messages"]) == 6  # the open exchange too: this is the stored transcript
    assert openai_problems(body["messages"]) != []  # which is why a provider wants the projection


def test_another_scopes_transcript_is_not_found_projected_or_not(client, mallory_token):
    transcript = ingest("openai/crashed.json")

    assert get(client, mallory_token, transcript, projected="true").status_code == 404


def test_the_schema_documents_the_projected_and_as_parameters(alice_client):
    schema = alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()

    parameters = {p["name"]: p for p in schema["paths"]["/api/transcripts/{id}/"]["get"]["parameters"]}
    assert parameters["projected"]["schema"]["type"] == "boolean"
    assert parameters["as"]["schema"]["enum"] == ["claude-code", "gemini", "memoryui", "openai"]


def test_the_command_writes_a_file_and_reports_what_it_wrote(tmp_path):
    transcript = ingest("gemini/checkpoint-hotfix.json")
    path = tmp_path / "resume.json"

    report = run("export_transcript", str(transcript.pk), str(path), "--projected", "--format", "openai")

    notes = report.pop("notes")
    assert report == {
        "transcript_id": str(transcript.pk),
        "format": "openai",
        "projected": True,
        "exported": 5,
        "trimmed": [5, 6],
        "path": str(path),
    }
    assert notes[0].startswith("trimmed message #5: assistant tool calls post_message")  # what the projection did
    assert openai_problems(json.loads(path.read_text())) == []


def test_the_command_finds_a_transcript_by_the_id_it_was_posted_with():
    transcript = ingest("gemini/checkpoint-hotfix.json")

    by_tag = json.loads(export_by_ref("hotfix", "--projected"))

    assert by_tag == json.loads(export(transcript, "--projected"))
    with pytest.raises(CommandError, match="no transcript nowhere"):
        export_by_ref("nowhere")


def export_by_ref(ref: str, *args: str) -> str:
    out = StringIO()
    call_command("export_transcript", ref, *args, stdout=out)
    return out.getvalue()


def test_a_memoryui_transcript_exports_as_memoryui_json_that_ingests_back():
    report = ingest_json(
        {
            "id": "ours-1",
            "scope": "agent:main",
            "messages": [
                {"role": "user", "content": "Look it up."},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "x", "arguments": "{}"}]},
            ],
        }
    )

    document = json.loads(export(report.transcript, "--projected"))

    assert document["id"] == "ours-1" and document["scope"] == "agent:main"
    assert document["messages"] == [{"role": "user", "content": "Look it up."}]  # the dangling call trimmed
    assert ingest_json({**document, "id": "ours-2"}).messages == 1


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "not a non-empty list"),
        ([{"role": "robot", "content": "x"}], "valid role"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "answers no open call"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [CALL],
                },
                {"role": "user", "content": "next"},
            ],
            "a user message before the results of ['a']",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "2"},
            ],
            "answers no open call",
        ),
        ([{"role": "assistant", "content": None, "tool_calls": [CALL]}], "have no result"),
        ([{"role": "assistant", "content": None}], "without content or tool calls"),
        ([{"role": "user", "content": "x", "tool_call_id": "a"}], "not allowed on a user message"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "{"}}],
                }
            ],
            "arguments are not JSON text",
        ),
    ],
)
def test_the_openai_validator_refuses_what_a_provider_refuses(messages, problem):
    assert any(problem in found for found in openai_problems(messages))


def test_drfs_own_format_parameter_with_an_unknown_value_is_a_json_404(client, agent_token):
    transcript = ingest("openai/crashed.json")

    response = get(client, agent_token, transcript, format="openai")

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
