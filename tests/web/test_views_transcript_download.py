"""The transcript page's downloads: the projected export as a file (what the API's
`?projected=true` answers), provider-safe messages and the format the transcript came in."""

from __future__ import annotations

import json
import re

import pytest

from tests.ingest.sessionlog_support import ingest, openai_problems

pytestmark = pytest.mark.django_db

LOOKUP_CALL = "toolu_01LookZ3m5Kp7Lq9Wr2Ts4Vx"  # the unanswered call of claude-code/crashed.jsonl
SESSION_ID = "9a7c4e21-3b5d-4f80-a1c2-d3e4f5a6b7c8"  # its sessionId


def download(client, transcript, fmt: str | None = None):
    return client.get(f"/transcripts/{transcript.pk}/download/", {"as": fmt} if fmt else {})


def test_the_page_links_the_provider_safe_messages_and_the_original_format(bob_client):
    transcript = ingest("claude-code/crashed.jsonl")

    html = bob_client.get(transcript.get_absolute_url()).content.decode()

    links = dict(re.findall(r'<a class="btn" href="([^"]+)" download data-download="([a-z-]+)"', html))
    url = f"/transcripts/{transcript.pk}/download/"
    assert links == {f"{url}?as=openai": "openai", f"{url}?as=claude-code": "claude-code"}
    assert "Download provider-safe messages" in html


def test_an_openai_transcript_has_one_download_only(bob_client):
    transcript = ingest("openai/crashed.json")

    html = bob_client.get(transcript.get_absolute_url()).content.decode()

    assert re.findall(r'data-download="([a-z-]+)"', html) == ["openai"]


def test_provider_safe_messages_are_an_openai_attachment_without_the_open_exchange(bob_client):
    transcript = ingest("claude-code/crashed.jsonl")

    response = download(bob_client, transcript, "openai")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{SESSION_ID}.projected.openai.json"'
    messages = json.loads(response.content)
    assert openai_problems(messages) == []
    assert LOOKUP_CALL not in response.content.decode()
    assert len(messages) < transcript.messages.count()  # the trimmed exchange is not in the file


def test_the_original_format_is_claude_code_jsonl_as_the_api_projects_it(erin_client, client, agent_token):
    transcript = ingest("claude-code/crashed.jsonl")

    response = download(erin_client, transcript)
    api = client.get(
        f"/api/transcripts/{transcript.pk}/", {"projected": "true"}, HTTP_AUTHORIZATION=f"Bearer {agent_token}"
    ).json()

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{SESSION_ID}.projected.claude-code.jsonl"'
    events = [json.loads(line) for line in response.content.decode().splitlines()]
    assert events == api["messages"]
    assert LOOKUP_CALL not in response.content.decode()


def test_a_transcript_without_an_id_is_named_by_memoryuis_own(bob_client):
    transcript = ingest("openai/crashed.json")
    transcript.external_id = ""
    transcript.save(update_fields=["external_id"])

    response = download(bob_client, transcript, "openai")

    assert response["Content-Disposition"] == f'attachment; filename="{transcript.pk}.projected.openai.json"'


def test_an_unknown_format_is_a_400(bob_client):
    transcript = ingest("openai/crashed.json")

    response = download(bob_client, transcript, "slack")

    assert response.status_code == 400 and b"unknown format" in response.content


def test_signing_in_is_needed_to_download(client):
    transcript = ingest("openai/crashed.json")

    response = download(client, transcript, "openai")

    assert response.status_code == 302 and "/login/" in response["Location"]
