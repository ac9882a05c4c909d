"""A dry-run extraction never holds a web worker for long: a transcript of more user messages than
MEMORYUI_DRY_RUN_INLINE_MESSAGES (or one asked with `background`) is dry-run as a task, whose
result the API and the page show once it is done; one done in the request stops at
MEMORYUI_DRY_RUN_SECONDS and says how far it got. Nothing is written either way."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings

from ingest import tasks
from ingest.ingestion import ingest
from ingest.tasks import DRY_RUN
from memoryui.models import ApiToken, Memory, TaskRun, Transcript

pytestmark = pytest.mark.django_db

MESSAGES = [
    {"role": "user", "content": "My name is Dana Whitfield."},
    {"role": "assistant", "content": "Hello Dana."},
    {"role": "user", "content": "I prefer squash merges on this repo."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Remember that the release job must run on ubuntu-24.04."},
    {"role": "assistant", "content": "Noted."},
]
ADDED = ["The release job must run on ubuntu-24.04.", "The user prefers squash merges on this repo.",
         "The user's name is Dana Whitfield."]  # fmt: skip


@pytest.fixture
def transcript(indexes) -> Transcript:
    return ingest({"scope": "agent:main", "messages": MESSAGES}).transcript


def extract(client, token, transcript, **body):
    return client.post(
        f"/api/transcripts/{transcript.pk}/extract/", body, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )  # fmt: skip


@pytest.fixture
def reader_key(alice):
    return ApiToken.issue(user=alice, name="reader", scopes=["agent:main"], access="read")[1]


def test_a_short_transcript_is_dry_run_in_the_request_and_says_it_is_complete(client, reader_key, transcript):
    answer = extract(client, reader_key, transcript, dry_run=True)

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["complete"] is True and sorted(a["text"] for a in body["added"]) == ADDED
    assert not Memory.objects.exists() and not TaskRun.objects.exists()


def test_a_dry_run_in_the_request_stops_at_its_time_limit_and_says_how_far_it_got(
    client, reader_key, transcript, settings
):
    settings.MEMORYUI_DRY_RUN_SECONDS = 1e-9

    body = extract(client, reader_key, transcript, dry_run=True).json()

    assert body["complete"] is False and body["added"] == []
    assert body["notes"][-1].startswith("stopped after 0 of 3 user messages: a dry run in a request has a bounded")


@pytest.mark.parametrize("why", ["asked", "too long"])
def test_a_long_or_asked_for_dry_run_is_a_task_whose_result_holds_the_decisions(
    client, reader_key, transcript, settings, django_capture_on_commit_callbacks, why
):
    body = {"dry_run": True, "background": True} if why == "asked" else {"dry_run": True}
    if why == "too long":
        settings.MEMORYUI_DRY_RUN_INLINE_MESSAGES = 2

    with django_capture_on_commit_callbacks(execute=True):  # the task runs inline once queued
        answer = extract(client, reader_key, transcript, **body)

    assert answer.status_code == 202, answer.content
    task = client.get(f"/api/tasks/{answer.json()['id']}/", HTTP_AUTHORIZATION=f"Bearer {reader_key}").json()
    assert (task["kind"], task["status"]) == (DRY_RUN, "succeeded")
    assert sorted(a["text"] for a in task["result"]["added"]) == ADDED
    assert [o["action"] for o in task["result"]["outcomes"]] == ["added", "added", "added"]
    assert not Memory.objects.exists()
    assert extract(client, reader_key, transcript, dry_run=False).status_code == 403  # a read token extracts not


def test_asking_again_while_a_dry_run_task_waits_gives_that_task(client, reader_key, transcript):
    first = extract(client, reader_key, transcript, dry_run=True, background=True).json()  # not sent: no commit
    again = extract(client, reader_key, transcript, dry_run=True, background=True).json()

    assert again["id"] == first["id"] and TaskRun.objects.filter(kind=DRY_RUN).count() == 1


def test_the_page_runs_a_long_dry_run_in_the_background_and_shows_its_decisions(
    bob_client, transcript, settings, django_capture_on_commit_callbacks
):
    settings.MEMORYUI_DRY_RUN_INLINE_MESSAGES = 2
    page = bob_client.get(transcript.get_absolute_url(), {"dry_run": "1"}).content.decode()
    assert "data-dry-run-too-long" in page and 'data-action="dry-run-background"' in page
    assert not TaskRun.objects.exists()  # a GET starts nothing

    with django_capture_on_commit_callbacks(execute=True):
        started = bob_client.post(f"/transcripts/{transcript.pk}/dry-run/")  # a viewer may: it writes nothing
    run = TaskRun.objects.get(kind=DRY_RUN)
    assert (
        started.status_code == 302 and started["Location"] == f"{transcript.get_absolute_url()}?dry_run_task={run.pk}"
    )

    shown = bob_client.get(started["Location"]).content.decode()
    assert "data-dry-run" in shown
    for index in (0, 2, 4):
        row = re.search(rf'<tr data-message="{index}"[^>]*>(.*?)</tr>', shown, re.S).group(1)
        assert 'data-outcome="added"' in row and "would add" in row
    task_page = bob_client.get(f"/tasks/{run.pk}/").content.decode()
    assert "data-dry-run-done" in task_page and f"?dry_run_task={run.pk}" in task_page
    assert not Memory.objects.exists()


def test_dry_runs_from_the_page_count_against_the_expensive_rate(bob_client, transcript, settings):
    settings.MEMORYUI_API_EXPENSIVE_RATE = "1/minute"

    first = bob_client.get(transcript.get_absolute_url(), {"dry_run": "1"}).content.decode()
    second = bob_client.get(transcript.get_absolute_url(), {"dry_run": "1"}).content.decode()
    started = bob_client.post(f"/transcripts/{transcript.pk}/dry-run/")

    assert "data-dry-run>" in first or "data-dry-run " in first
    assert "data-dry-run" not in second.replace("data-dry-run-", "") and "Too many dry runs and recalls" in second
    assert started.status_code == 302 and started["Location"] == transcript.get_absolute_url()
    assert not TaskRun.objects.exists()


def test_while_the_process_does_its_share_of_dry_runs_another_is_a_task(client, reader_key, transcript):
    taken = [
        tasks._INLINE_DRY_RUNS.acquire(blocking=False) for _ in range(django_settings.MEMORYUI_DRY_RUN_CONCURRENCY)
    ]
    try:
        answer = extract(client, reader_key, transcript, dry_run=True)
    finally:
        for held in taken:
            if held:
                tasks._INLINE_DRY_RUNS.release()

    assert answer.status_code == 202 and answer.json()["kind"] == DRY_RUN
    assert extract(client, reader_key, transcript, dry_run=True).status_code == 200  # a slot free again
