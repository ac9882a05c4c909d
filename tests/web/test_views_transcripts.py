"""Transcript pages (projection, per-message outcomes, dry run, apply), the tasks pages, and the transcripts API."""

from __future__ import annotations

import json
import re

import pytest

from ingest.extraction import extract
from ingest.ingestion import ingest
from memoryui.models import Memory, TaskRun, Transcript

pytestmark = pytest.mark.django_db

DATA = {
    "scope": "agent:main",
    "title": "onboarding",
    "messages": [
        {"role": "user", "content": "我叫东升,幸运数字是 88"},
        {"role": "assistant", "content": "记住了。"},
        {"role": "user", "content": "在吗?"},
        {"role": "assistant", "content": "在。"},
        {"role": "user", "content": "<script>alert(1)</script> 我的手机号是 13800138000"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "crm::save", "arguments": "{}"}]},
    ],
}


@pytest.fixture
def transcript(indexes) -> Transcript:
    return ingest(DATA).transcript


def outcomes(html: str, index: int) -> list[str]:
    row = re.search(rf'<tr data-message="{index}"[^>]*>(.*?)</tr>', html, re.S).group(1)
    return re.findall(r'data-outcome="([a-z]+)"', row)


def test_the_list_and_an_unextracted_transcript_show_the_projection(transcript, alice_client):
    listing = alice_client.get("/transcripts/").content.decode()
    assert f'data-transcript="{transcript.pk}"' in listing and "onboarding" in listing
    html = alice_client.get(transcript.get_absolute_url()).content.decode()
    assert "data-trimmed" in html  # the dangling crm::save call
    assert "data-in-flight" in html  # the round it left in flight
    assert "&lt;script&gt;" in html and "<script>alert(1)" not in html
    assert outcomes(html, 0) == [] and "not extracted yet" in html
    rollup_line = re.search(r"<p class=\"small\" data-rollup>(.*?)</p>", html, re.S).group(1)
    assert "summaries need an LLM" in rollup_line


def test_a_dry_run_shows_what_would_happen_and_apply_queues_the_task(
    transcript, alice_client, django_capture_on_commit_callbacks
):
    html = alice_client.get(transcript.get_absolute_url(), {"dry_run": "1"}).content.decode()
    assert "data-dry-run" in html and "would add" in html
    assert outcomes(html, 0) == ["added", "added"] and outcomes(html, 2) == ["skipped"]
    assert outcomes(html, 4) == ["skipped"]  # in flight
    assert not Memory.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):  # the task runs eagerly once queued
        applied = alice_client.post(f"/transcripts/{transcript.pk}/extract/")
    run = TaskRun.objects.get()
    assert applied.status_code == 302 and applied["Location"] == f"/tasks/{run.pk}/"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.counts == {"added": 2, "merged": 0, "skipped": 2}  # eager tasks
    after = alice_client.get(transcript.get_absolute_url()).content.decode()
    assert outcomes(after, 0) == ["added", "added"]
    assert str(Memory.objects.get(entity_key="name:东升").pk) in after


def test_the_task_pages_show_progress_counts_and_errors(transcript, alice_client):
    extract(transcript)
    run = TaskRun.objects.create(kind="extract", actor="user:alice", params={"transcript": str(transcript.pk)})
    run.start(4)
    run.advance(2, {"added": 1, "merged": 0, "skipped": 1})
    page = alice_client.get(f"/tasks/{run.pk}/").content.decode()
    assert 'data-task-status="running"' in page and 'hx-trigger="every 1s"' in page
    assert 'aria-valuenow="50"' in page and "added 1" in page
    run.fail("OperationalError: database is locked")
    fragment = alice_client.get(f"/tasks/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and 'data-task-status="failed"' in fragment and "every 1s" not in fragment
    assert "database is locked" in fragment
    listing = alice_client.get("/tasks/").content.decode()
    assert f'data-task="{run.pk}" data-status="failed"' in listing


def test_the_api_posts_a_transcript_reads_it_back_and_extracts(
    indexes, client, agent_token, mallory_token, django_capture_on_commit_callbacks
):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {agent_token}"}
    posted = client.post("/api/transcripts/", json.dumps(DATA), content_type="application/json", **auth)
    assert posted.status_code == 201 and posted.json()["messages"] == 6
    pk = posted.json()["transcript_id"]
    again = client.post("/api/transcripts/", json.dumps({**DATA, "id": pk}), content_type="application/json", **auth)
    assert again.status_code == 200 and again.json()["added"] == 0
    detail = client.get(f"/api/transcripts/{pk}/", **auth).json()
    assert detail["projection"]["trimmed"] == [5] and detail["projection"]["in_flight"] == [3]
    dry = client.post(f"/api/transcripts/{pk}/extract/", {"dry_run": True}, content_type="application/json", **auth)
    assert dry.status_code == 200 and len(dry.json()["added"]) == 2 and not Memory.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post(f"/api/transcripts/{pk}/extract/", {}, content_type="application/json", **auth)
    assert queued.status_code == 202
    task = client.get(f"/api/tasks/{queued.json()['id']}/", **auth).json()
    assert task["status"] == "succeeded" and task["counts"]["added"] == 2
    mallory = {"HTTP_AUTHORIZATION": f"Bearer {mallory_token}"}
    assert client.get(f"/api/transcripts/{pk}/", **mallory).status_code == 404
    refused = client.post("/api/transcripts/", json.dumps(DATA), content_type="application/json", **mallory)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_the_api_names_each_bad_message(client, agent_token):
    bad = {"scope": "main", "messages": [{"role": "user", "content": "ok"}, {"role": "bot", "content": "x"}]}
    auth = {"HTTP_AUTHORIZATION": f"Bearer {agent_token}"}
    response = client.post("/api/transcripts/", json.dumps(bad), content_type="application/json", **auth)
    assert response.status_code == 400
    assert list(response.json()["error"]["details"]) == ["messages[1].role"]
    assert not Transcript.objects.exists()


def test_a_round_the_user_went_on_from_without_an_answer_is_marked_interrupted(alice_client, client, agent_token):
    rejected = [
        {"role": "user", "content": "我的手机号是 13800138000"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "crm::save", "arguments": "{}"}]},
        {"role": "tool", "content": "The user doesn't want to proceed with this tool use.", "tool_call_id": "c1"},
        {"role": "user", "content": "先别存"},
        {"role": "assistant", "content": "好的。"},
    ]
    transcript = ingest({"scope": "agent:main", "messages": rejected}).transcript
    html = alice_client.get(transcript.get_absolute_url()).content.decode()
    row = re.search(r'<tr data-message="0"[^>]*>(.*?)</tr>', html, re.S).group(1)
    assert "data-interrupted" in row and "data-in-flight" not in html
    detail = client.get(f"/api/transcripts/{transcript.pk}/", HTTP_AUTHORIZATION=f"Bearer {agent_token}").json()
    assert [m["round_state"] for m in detail["messages"]] == ["interrupted"] * 3 + ["complete"] * 2
    assert detail["projection"]["in_flight"] == []
