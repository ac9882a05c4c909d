"""Posting a transcript from the browser: pasted or uploaded, stored, and its projection opens;
an invalid one is named per field as the API names it, and nothing is stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from memoryui.models import Transcript

pytestmark = pytest.mark.e2e

SESSION = "claude-code/2026-11-25 7f3a"  # an agent's own id: a slash and a space, not a UUID
TRANSCRIPT = {
    "id": SESSION,
    "scope": "agent:main",
    "title": "Deploy questions",
    "messages": [
        {"role": "user", "content": "I deploy on Fridays; remember that."},
        {"role": "assistant", "content": "Noted: you deploy on Fridays."},
        {"role": "user", "content": "Book the release room for Friday."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "rooms::book", "arguments": {"day": "friday"}}],
        },
    ],
}
DETAIL = re.compile(r".*/transcripts/[0-9a-f-]{36}/$")


def test_a_pasted_transcript_is_stored_and_its_projection_opens(signed_in, live_server, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/transcripts/")
    form = page.locator("[data-post-transcript]")
    expect(form).to_be_visible()  # open while there are no transcripts
    form.get_by_label("Transcript JSON").fill(json.dumps(TRANSCRIPT, indent=2))
    screenshot("pasted")

    form.get_by_role("button", name="Post transcript").click()

    page.wait_for_url(DETAIL)
    transcript = Transcript.objects.get()
    assert page.url.endswith(transcript.get_absolute_url())
    assert (transcript.external_id, transcript.scope) == (SESSION, "agent:main")
    expect(page.locator("#alerts")).to_contain_text("Stored the transcript, 4 messages.")
    expect(page.locator("[data-external-id]")).to_have_text(SESSION)
    expect(page.locator("tr[data-message]")).to_have_count(4)
    expect(page.locator('[data-message="3"] [data-trimmed]')).to_be_visible()  # the dangling call, trimmed
    screenshot("projection")

    page.goto(f"{live_server.url}/transcripts/")  # posting it again changes nothing, and says so
    expect(page.locator("[data-post-transcript]")).to_be_hidden()  # folded away above the list
    screenshot("list")
    page.locator("#post-transcript > summary").click()
    page.get_by_label("Transcript JSON").fill(json.dumps(TRANSCRIPT))
    page.get_by_role("button", name="Post transcript").click()
    page.wait_for_url(f"{live_server.url}{transcript.get_absolute_url()}")
    expect(page.locator("#alerts")).to_contain_text("This transcript was posted before")
    assert Transcript.objects.count() == 1


def test_an_invalid_transcript_shows_the_problem_per_field_and_stores_nothing(signed_in, live_server, screenshot):
    page = signed_in
    bad = {
        **TRANSCRIPT,
        "messages": [*TRANSCRIPT["messages"][:2], {"role": "user", "tool_call_id": "c1", "content": "x"}],
    }
    page.goto(f"{live_server.url}/transcripts/")

    page.get_by_label("Transcript JSON").fill(json.dumps(bad, indent=2))
    page.get_by_role("button", name="Post transcript").click()

    expect(page.locator("[data-not-stored]")).to_be_visible()
    errors = page.locator('[data-field="transcript"] .error')
    expect(errors).to_have_count(1)
    expect(errors).to_contain_text("messages[2].tool_call_id: only tool results answer a tool call")
    expect(page.get_by_label("Transcript JSON")).to_have_value(json.dumps(bad, indent=2))  # kept to fix
    assert not Transcript.objects.exists()
    screenshot("invalid")

    page.set_viewport_size({"width": 1024, "height": 900})
    screenshot("invalid-1024")


def test_an_uploaded_file_is_stored_and_its_projection_opens(signed_in, live_server, tmp_path, screenshot):
    page = signed_in
    upload = tmp_path / "session.json"
    upload.write_text(json.dumps({key: value for key, value in TRANSCRIPT.items() if key != "scope"}))
    page.goto(f"{live_server.url}/transcripts/")

    page.get_by_label("Or a file").set_input_files(str(upload))
    page.get_by_label("Scope").first.fill("agent:ops")  # the JSON has none: the field gives it
    page.get_by_label("Extract memories after storing").check()
    screenshot("chosen")
    page.get_by_role("button", name="Post transcript").click()

    page.wait_for_url(DETAIL)
    transcript = Transcript.objects.get()
    assert (transcript.scope, transcript.messages.count()) == ("agent:ops", 4)
    expect(page.locator("#alerts")).to_contain_text("Extraction queued.")
    expect(page.locator("tr[data-message]")).to_have_count(4)
    screenshot("projection")


def test_a_session_log_upload_with_its_format_chosen_opens_its_projection(signed_in, live_server, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/transcripts/")
    session = (
        Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "sessions" / "claude-code" / "crashed.jsonl"
    )

    page.get_by_label("Or a file").set_input_files(str(session))
    page.get_by_label("Format").select_option("claude-code")
    page.get_by_role("button", name="Post transcript").click()  # no scope yet: refused in place
    expect(page.locator("[data-not-stored]")).to_be_visible()
    expect(page.locator('[data-field="scope"] .error')).to_have_count(1)
    screenshot("session-log-no-scope")

    page.get_by_label("Or a file").set_input_files(str(session))  # a file input is never kept
    page.get_by_label("Scope").first.fill("agent:main")
    page.get_by_role("button", name="Post transcript").click()

    page.wait_for_url(DETAIL)
    transcript = Transcript.objects.get()
    assert transcript.metadata["format"] == "claude-code"
    expect(page.locator("tr[data-message]")).to_have_count(5)
    expect(page.locator("[data-trimmed]")).to_have_count(2)  # the partly answered exchange
    screenshot("session-log-projection")
