"""Posting a transcript from the transcripts page: pasted JSON or a .json file, validated by the
API's own rules with each problem named as the API names it, idempotent by id as the API is."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memoryui.models import TaskRun, Transcript

pytestmark = pytest.mark.django_db

MESSAGES = [
    {"role": "user", "content": "I deploy on Fridays; remember that."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "calendar::list", "arguments": {}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "2 deploys on Friday"},
    {"role": "assistant", "content": "Noted: you deploy on Fridays."},
]
TRANSCRIPT = {"id": "session-7f3a", "scope": "agent:main", "title": "Deploy questions", "messages": MESSAGES}
BAD = {"scope": "agent:main", "messages": [*MESSAGES[:2], {"role": "user", "tool_call_id": "c1", "content": "x"}]}


def post(client, transcript="", **fields):
    data = {"transcript": json.dumps(transcript) if not isinstance(transcript, str) else transcript, **fields}
    return client.post("/transcripts/", data)


def errors_of(html: str, field: str) -> str:
    block = html[html.index(f'data-field="{field}"') :]
    return block[: block.index('class="help"')]


def test_a_pasted_transcript_is_stored_and_the_page_goes_to_its_projection(erin_client):
    response = post(erin_client, TRANSCRIPT)

    transcript = Transcript.objects.get()
    assert response.status_code == 302 and response["Location"] == transcript.get_absolute_url()
    assert (transcript.external_id, transcript.scope, transcript.messages.count()) == ("session-7f3a", "agent:main", 4)
    page = erin_client.get(response["Location"]).content.decode()
    assert "Stored the transcript, 4 messages." in page and "session-7f3a" in page


def test_a_bad_message_is_named_as_the_api_names_it_and_nothing_is_stored(erin_client, agent_token):
    response = post(erin_client, BAD)

    html = response.content.decode()
    assert response.status_code == 400 and "data-not-stored" in html
    assert "messages[2].tool_call_id: only tool results answer a tool call" in errors_of(html, "transcript")
    assert not Transcript.objects.exists()
    api = erin_client.post("/api/transcripts/", BAD, content_type="application/json")
    assert api.status_code == 400 and api.json()["error"]["details"]
    for name, reasons in api.json()["error"]["details"].items():
        assert f"{name}: {reasons[0]}" in html  # the very same rules, the very same words


def test_an_uploaded_json_file_is_stored(erin_client):
    upload = SimpleUploadedFile("session.json", json.dumps(TRANSCRIPT).encode(), content_type="application/json")

    response = erin_client.post("/transcripts/", {"file": upload, "transcript": ""})

    assert response.status_code == 302
    assert Transcript.objects.get().messages.count() == 4


def test_a_file_that_is_not_json_is_an_error_on_the_file(erin_client):
    upload = SimpleUploadedFile(
        "session.json", b'{"scope": "agent:main", "messages": [', content_type="application/json"
    )

    response = erin_client.post("/transcripts/", {"file": upload})

    assert response.status_code == 400
    assert "Invalid JSON: Expecting value (line 1, column 38)" in errors_of(response.content.decode(), "file")
    assert not Transcript.objects.exists()


def test_paste_or_file_but_not_both_and_not_neither(erin_client):
    upload = SimpleUploadedFile("session.json", json.dumps(TRANSCRIPT).encode())

    both = erin_client.post("/transcripts/", {"file": upload, "transcript": json.dumps(TRANSCRIPT)})
    neither = post(erin_client, "")

    assert "Paste the JSON or choose a file, not both." in errors_of(both.content.decode(), "file")
    assert "Paste the transcript JSON or choose a .json file." in errors_of(neither.content.decode(), "transcript")
    assert not Transcript.objects.exists()


def test_the_scope_and_id_fields_fill_in_what_the_json_leaves_out(erin_client):
    response = post(erin_client, MESSAGES, scope="main", external_id="claude-code/2026-11-25 7f3a")

    assert response.status_code == 302
    transcript = Transcript.objects.get()
    assert (transcript.scope, transcript.external_id) == ("agent:main", "claude-code/2026-11-25 7f3a")


def test_a_scope_field_that_contradicts_the_json_is_refused(erin_client):
    response = post(erin_client, TRANSCRIPT, scope="agent:ops")

    assert response.status_code == 400
    assert "the JSON&#x27;s scope is &#x27;agent:main&#x27;" in errors_of(response.content.decode(), "scope")
    assert not Transcript.objects.exists()


def test_no_scope_anywhere_is_an_error_on_the_scope_field(erin_client):
    response = post(erin_client, {"messages": MESSAGES})

    assert response.status_code == 400
    assert "<b>Scope</b>:" in errors_of(response.content.decode(), "scope")


def test_an_id_over_200_characters_in_the_field_is_refused_there(erin_client):
    response = post(erin_client, {"scope": "agent:main", "messages": MESSAGES}, external_id="x" * 201)

    assert response.status_code == 400
    assert "is 201 characters; at most 200" in errors_of(response.content.decode(), "external_id")
    assert not Transcript.objects.exists()


def test_posting_the_same_id_again_adds_only_the_new_messages_as_the_api_does(erin_client):
    post(erin_client, {**TRANSCRIPT, "messages": MESSAGES[:2]})

    again = post(erin_client, TRANSCRIPT)
    unchanged = post(erin_client, TRANSCRIPT)

    transcript = Transcript.objects.get()
    assert transcript.messages.count() == 4
    assert again["Location"] == unchanged["Location"] == transcript.get_absolute_url()
    page = erin_client.get(transcript.get_absolute_url()).content.decode()
    assert "This transcript was posted before (id &#x27;session-7f3a&#x27; in agent:main) with all 4 messages" in page


def test_a_stored_message_posted_differently_is_refused_and_nothing_changes(erin_client):
    post(erin_client, TRANSCRIPT)
    changed = {**TRANSCRIPT, "messages": [{"role": "user", "content": "I deploy on Mondays."}, *MESSAGES[1:]]}

    response = post(erin_client, changed)

    assert response.status_code == 400
    assert "Not stored: messages 0 differ from the stored ones" in errors_of(response.content.decode(), "transcript")
    assert Transcript.objects.get().messages.get(index=0).content == MESSAGES[0]["content"]


def test_extract_after_storing_queues_the_extraction(erin_client, indexes, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(erin_client, TRANSCRIPT, extract="on")

    transcript = Transcript.objects.get()
    run = TaskRun.objects.get(kind="extract")
    assert run.params["transcript"] == str(transcript.pk) and run.actor == "user:erin"
    assert "Extraction queued." in erin_client.get(response["Location"]).content.decode()


def test_a_viewer_sees_no_form_and_cannot_post(bob_client):
    page = bob_client.get("/transcripts/").content.decode()
    assert "data-post-transcript" not in page and "Posting transcripts needs the editor role." in page

    response = post(bob_client, TRANSCRIPT)

    assert response.status_code == 403
    assert not Transcript.objects.exists()


def test_the_form_is_offered_to_an_editor_with_the_format_and_the_idempotency_said(erin_client):
    html = erin_client.get("/transcripts/").content.decode()

    assert 'enctype="multipart/form-data"' in html and 'accept=".json,.jsonl,application/json"' in html
    assert "Posting the same id in the same scope again adds only the new messages" in html
    assert "Extract memories after storing" in html
