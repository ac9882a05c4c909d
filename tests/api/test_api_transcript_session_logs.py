"""`POST /api/transcripts/?as=F`: an agent posts its own session log as the raw request body
(Claude Code's JSONL is not JSON), with the scope and id from the query when the log has none;
the rules, idempotency, errors and answer of the transcript JSON POST."""

from __future__ import annotations

import json

import pytest

from memoryui.models import TaskRun, Transcript
from tests.ingest.sessionlog_support import SESSIONS

pytestmark = pytest.mark.django_db

LIST = "/api/transcripts/"
SESSION_ID = "5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60"  # the sessionId of claude-code/session.jsonl
CLAUDE_CODE = (SESSIONS / "claude-code" / "session.jsonl").read_text()
CHECKPOINT = (SESSIONS / "gemini" / "checkpoint-hotfix.json").read_text()


def post(client, token: str, body: str, content_type: str = "application/x-ndjson", **params):
    query = "&".join(f"{key}={value}" for key, value in {"as": "claude-code", **params}.items() if value is not None)
    return client.post(f"{LIST}?{query}", body, content_type, HTTP_AUTHORIZATION=f"Bearer {token}")


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    return response.json()["error"]


def test_a_claude_code_session_posted_raw_is_stored_with_its_format_and_session_id(client, agent_token):
    response = post(client, agent_token, CLAUDE_CODE, scope="agent:main")

    assert response.status_code == 201, response.content
    body = response.json()
    transcript = Transcript.objects.get(pk=body["transcript_id"])
    assert (body["external_id"], body["scope"], body["format"]) == (SESSION_ID, "agent:main", "claude-code")
    assert body["created"] and body["messages"] == body["added"] == transcript.messages.count() > 0
    assert transcript.metadata["format"] == "claude-code"
    assert any("sidechain" in note for note in body["notes"])  # the subagent's events were left out, and said so


@pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/jsonl", "text/plain"])
def test_auto_detects_a_claude_code_session_in_every_text_content_type(client, agent_token, content_type):
    response = post(client, agent_token, CLAUDE_CODE, content_type, scope="agent:main", **{"as": "auto"})

    assert response.status_code == 201, response.content
    assert response.json()["format"] == "claude-code"


def test_posting_the_same_session_again_adds_nothing_and_a_longer_one_only_its_new_messages(client, agent_token):
    lines = CLAUDE_CODE.splitlines()
    first = post(client, agent_token, "\n".join(lines[:5]) + "\n", scope="agent:main").json()

    again = post(client, agent_token, "\n".join(lines[:5]) + "\n", scope="agent:main")
    grown = post(client, agent_token, CLAUDE_CODE, scope="agent:main")

    assert again.status_code == 200 and grown.status_code == 200
    assert (again.json()["added"], again.json()["unchanged"]) == (0, first["messages"])
    assert grown.json()["unchanged"] == first["messages"]
    assert grown.json()["added"] == grown.json()["messages"] - first["messages"] > 0
    assert Transcript.objects.count() == 1


def test_a_malformed_line_is_a_400_naming_the_line_and_nothing_is_stored(client, agent_token):
    lines = CLAUDE_CODE.splitlines()
    lines[2] = lines[2][:60]  # a line cut in the middle of the log, not the last one a crash leaves

    error = error_of(post(client, agent_token, "\n".join(lines), scope="agent:main"), 400)

    assert error["code"] == "invalid"
    assert list(error["details"]) == ["body"]
    assert error["details"]["body"][0].startswith("is not a Claude Code session (.jsonl): line 3 is not JSON")
    assert error["message"].startswith("Invalid input: the body is not a Claude Code session (.jsonl): line 3")
    assert not Transcript.objects.exists()


def test_a_line_that_is_no_session_event_is_named_too(client, agent_token):
    body = CLAUDE_CODE + '{"role": "user", "content": "not an event"}\n' + CLAUDE_CODE.splitlines()[-1] + "\n"

    error = error_of(post(client, agent_token, body, scope="agent:main"), 400)

    assert "line 19 is not a session event" in error["details"]["body"][0]


def test_a_session_log_without_a_scope_is_a_400_naming_scope(client, agent_token):
    error = error_of(post(client, agent_token, CLAUDE_CODE), 400)

    assert list(error["details"]) == ["scope"] and "?scope=" in error["details"]["scope"][0]
    assert not Transcript.objects.exists()


def test_the_id_parameter_takes_the_place_of_the_sessions_own(client, agent_token):
    body = post(client, agent_token, CLAUDE_CODE, scope="agent:main", id="release-checklist").json()

    assert body["external_id"] == "release-checklist"
    assert Transcript.objects.get().external_id == "release-checklist"


def test_a_gemini_checkpoint_posted_as_json_takes_its_id_and_scope_from_the_query(client, agent_token):
    response = post(
        client, agent_token, CHECKPOINT, "application/json", scope="agent:main", id="hotfix", **{"as": "auto"}
    )

    assert response.status_code == 201, response.content
    assert (response.json()["format"], response.json()["external_id"]) == ("gemini", "hotfix")


def test_a_body_in_another_format_than_as_names_says_so(client, agent_token):
    error = error_of(post(client, agent_token, CHECKPOINT, "application/json", scope="agent:main"), 400)

    assert error["details"]["body"][0].startswith("is not a Claude Code session (.jsonl)")


def test_an_unknown_as_or_a_bad_scope_is_a_400_naming_the_parameter(client, agent_token):
    bad_as = error_of(post(client, agent_token, CLAUDE_CODE, scope="agent:main", **{"as": "slack"}), 400)
    bad_scope = error_of(post(client, agent_token, CLAUDE_CODE, scope="AGENT:main"), 400)

    assert list(bad_as["details"]) == ["as"] and "auto" in bad_as["details"]["as"][0]
    assert list(bad_scope["details"]) == ["scope"]


def test_a_memoryui_transcript_whose_scope_differs_from_the_query_is_refused(client, agent_token):
    transcript = json.dumps({"scope": "agent:ops", "messages": [{"role": "user", "content": "hi"}]})

    error = error_of(
        post(client, agent_token, transcript, "application/json", scope="agent:main", **{"as": "memoryui"}), 400
    )

    assert list(error["details"]) == ["scope"] and "agent:ops" in error["details"]["scope"][0]


def test_an_empty_body_is_a_400_naming_the_body(client, agent_token):
    error = error_of(post(client, agent_token, "", scope="agent:main"), 400)

    assert list(error["details"]) == ["body"]


def test_extract_true_queues_the_extraction_as_the_json_post_does(client, agent_token):
    body = post(client, agent_token, CLAUDE_CODE, scope="agent:main", extract="true").json()

    run = TaskRun.objects.get(pk=body["task_id"])
    assert (run.kind, run.params["transcript"]) == ("extract", body["transcript_id"])


def test_a_token_limited_to_other_scopes_may_not_post_a_session_there(client, mallory_token):
    error = error_of(post(client, mallory_token, CLAUDE_CODE, scope="agent:main"), 403)

    assert "scope" in error["details"]
    assert not Transcript.objects.exists()


def test_without_as_a_text_body_is_detected_and_json_is_still_the_transcript(client, agent_token):
    text = client.post(
        f"{LIST}?scope=agent:main", CLAUDE_CODE, "text/plain", HTTP_AUTHORIZATION=f"Bearer {agent_token}"
    )
    transcript = {"scope": "agent:main", "messages": [{"role": "user", "content": "I deploy on Fridays."}]}
    as_json = client.post(LIST, transcript, "application/json", HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    noise = client.post(f"{LIST}?scope=agent:main", "7g`<", "text/plain", HTTP_AUTHORIZATION=f"Bearer {agent_token}")

    assert text.status_code == 201 and text.json()["format"] == "claude-code"
    assert as_json.status_code == 201 and "format" not in as_json.json()
    assert list(error_of(noise, 400)["details"]) == ["body"]


def test_the_schema_documents_the_transcript_json_and_describes_session_logs(alice_client):
    schema = alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()

    operation = schema["paths"]["/api/transcripts/"]["post"]
    # What a session log body may be depends on ?as=, which a schema cannot state: the schema
    # holds the transcript JSON, and the description the session-log form.
    assert set(operation["requestBody"]["content"]) == {"application/json"}
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/TranscriptInRequest")
    assert "?as=" in operation["description"] and "claude-code" in operation["description"]


def test_a_session_log_over_the_upload_limit_is_a_413(client, agent_token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    error = error_of(post(client, agent_token, CLAUDE_CODE, scope="agent:main"), 413)

    assert error["code"] == "too_large"
    assert not Transcript.objects.exists()


def test_a_body_that_is_not_utf8_is_a_400_naming_the_body(client, agent_token):
    body = CLAUDE_CODE.encode().replace(b"Priya", b"Pr\xffya")

    error = error_of(post(client, agent_token, body, scope="agent:main"), 400)

    assert list(error["details"]) == ["body"] and "utf-8" in error["details"]["body"][0]
