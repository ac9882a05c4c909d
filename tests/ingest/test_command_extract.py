"""`manage.py extract`: the run it records carries the options it was given, in the foreground
as in the background, so the task does what the command line asked."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ingest.ingestion import ingest
from memoryui.models import Memory, TaskRun

pytestmark = pytest.mark.django_db

# Nothing here for L0 (no name, number or preference rule fires), so in the default `auto` mode
# this turn is sent to L1.
MIGRATION = "我们下周三要把支付服务迁到新机房,负责人是王芳"


@pytest.fixture
def server(l1_server):
    l1_server.chat_reply = json.dumps(
        {"memories": [{"kind": "project_state", "text": "支付服务下周三迁到新机房。", "confidence": 0.8}]},
        ensure_ascii=False,
    )
    return l1_server


@pytest.fixture
def transcript():
    messages = [{"role": "user", "content": MIGRATION}, {"role": "assistant", "content": "好的"}]
    return ingest({"scope": "agent:main", "messages": messages}).transcript


def extract(*args: str) -> dict:
    out = StringIO()
    call_command("extract", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_l1_off_in_the_foreground_sends_nothing_to_the_configured_llm(server, transcript):
    report = extract("--transcript", str(transcript.pk), "--l1", "off")
    assert server.requests == []
    assert report["added"] == []
    assert TaskRun.objects.get(pk=report["task_id"]).params["l1"] == "off"
    assert not Memory.objects.exists()


def test_the_default_mode_asks_the_llm_about_a_turn_l0_found_nothing_in(server, transcript):
    # The counterpart of the test above: without --l1 off the same turn does reach the model,
    # so the silence there is the option's doing.
    report = extract("--transcript", str(transcript.pk))
    assert len(server.requests) == 1
    assert [item["kind"] for item in report["added"]] == ["project_state"]
    assert TaskRun.objects.get(pk=report["task_id"]).params["l1"] == "auto"


def test_l1_off_in_the_background_is_recorded_on_the_queued_run(server, transcript, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        report = extract("--transcript", str(transcript.pk), "--l1", "off", "--background")
    assert TaskRun.objects.get(pk=report["task_id"]).params["l1"] == "off"


def test_the_transcript_is_named_by_the_id_the_agent_posted_it_with_and_scope_picks_between_scopes(server):
    turn = [{"role": "user", "content": MIGRATION}, {"role": "assistant", "content": "好的"}]
    main = ingest({"id": "session-7f3a", "scope": "agent:main", "messages": turn}).transcript
    other = ingest({"id": "session-7f3a", "scope": "agent:ops", "messages": turn}).transcript

    with pytest.raises(
        CommandError, match=r"session-7f3a names transcripts in several scopes \(agent:main, agent:ops\)"
    ):
        extract("--transcript", "session-7f3a", "--dry-run", "--l1", "off")
    picked = extract("--transcript", "session-7f3a", "--scope", "agent:ops", "--dry-run", "--l1", "off")
    assert picked["transcript_id"] == str(other.pk)
    by_uuid = extract("--transcript", str(main.pk), "--dry-run", "--l1", "off")
    assert by_uuid["transcript_id"] == str(main.pk)
    with pytest.raises(CommandError, match="--transcript: no transcript session-7f3a in agent:none"):
        extract("--transcript", "session-7f3a", "--scope", "agent:none", "--dry-run")
    with pytest.raises(CommandError, match="--format is for a file"):
        extract("--transcript", "session-7f3a", "--format", "claude-code")
