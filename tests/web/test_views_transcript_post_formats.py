"""The Post a transcript form's format choice: a session log pasted or uploaded, detected or
chosen, as a plain POST and with htmx (problems come back as the form alone, a success
redirects the page)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memoryui.models import Transcript
from tests.ingest.sessionlog_support import SESSIONS

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def upload(name: str) -> SimpleUploadedFile:
    path = SESSIONS / name
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/octet-stream")


def test_an_uploaded_claude_code_session_is_detected_and_stored_with_its_format(erin_client):
    response = erin_client.post(
        "/transcripts/", {"transcript": "", "file": upload("claude-code/session.jsonl"), "scope": "agent:main"}
    )

    transcript = Transcript.objects.get()
    assert response.status_code == 302 and response["Location"] == transcript.get_absolute_url()
    assert (transcript.external_id, transcript.metadata["format"]) == (
        "5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60",
        "claude-code",
    )
    assert transcript.messages.count() == 12


def test_a_pasted_checkpoint_takes_its_tag_from_the_file_name_only_so_the_form_id_names_it(erin_client):
    text = (SESSIONS / "gemini" / "checkpoint-hotfix.json").read_text()

    response = erin_client.post(
        "/transcripts/", {"transcript": text, "format": "gemini", "scope": "agent:main", "external_id": "lena/hotfix"}
    )

    transcript = Transcript.objects.get()
    assert response.status_code == 302
    assert (transcript.external_id, transcript.metadata["format"]) == ("lena/hotfix", "gemini")


def test_the_id_given_in_the_form_takes_the_place_of_a_sessions_own(erin_client):
    response = erin_client.post(
        "/transcripts/",
        {"transcript": "", "file": upload("openai/session.json"), "scope": "agent:main", "external_id": "sam-1"},
    )

    assert response.status_code == 302
    assert Transcript.objects.get().external_id == "sam-1"  # not chatcmpl-session-8841, and no conflict


def test_a_session_log_without_a_scope_is_refused_on_the_scope_field(erin_client):
    response = erin_client.post("/transcripts/", {"transcript": "", "file": upload("openai/crashed.json")})

    html = response.content.decode()
    assert response.status_code == 400 and "data-not-stored" in html
    block = html[html.index('data-field="scope"') :]
    assert 'class="error"' in block[: block.index('class="help"')]
    assert not Transcript.objects.exists()


def test_a_format_chosen_that_the_text_is_not_in_says_so(erin_client):
    response = erin_client.post(
        "/transcripts/", {"transcript": json.dumps([{"role": "user", "content": "hi"}]), "format": "claude-code"}
    )

    assert response.status_code == 400
    assert "Not a Claude Code session (.jsonl): line 1 is not a session event" in response.content.decode()
    assert not Transcript.objects.exists()


def test_with_htmx_a_problem_answers_the_form_alone_marked_for_swapping(erin_client):
    response = erin_client.post(
        "/transcripts/", {"transcript": "", "file": upload("gemini/checkpoint-hotfix.json")}, headers=HTMX
    )

    html = response.content.decode()
    assert response.status_code == 400 and response["X-Memoryui-State"] == "invalid"
    assert 'id="post-transcript-form"' in html
    assert "<html" not in html and "data-not-stored" in html
    assert 'name="format"' in html
    assert not Transcript.objects.exists()


def test_with_htmx_a_stored_session_redirects_the_page_to_its_projection(erin_client):
    response = erin_client.post(
        "/transcripts/",
        {"transcript": "", "file": upload("claude-code/crashed.jsonl"), "format": "claude-code", "scope": "agent:main"},
        headers=HTMX,
    )

    transcript = Transcript.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == transcript.get_absolute_url()
    page = erin_client.get(transcript.get_absolute_url()).content.decode()
    assert "Stored the transcript, 5 messages." in page
    assert page.count("data-trimmed") == 2  # the partly answered exchange: shown, marked trimmed


def test_the_form_offers_every_format_and_detection(erin_client):
    html = erin_client.get("/transcripts/").content.decode()

    for value in ("", "memoryui", "claude-code", "gemini", "openai"):
        assert f'<option value="{value}"' in html
    assert 'hx-post="/transcripts/"' in html and 'action="/transcripts/"' in html
