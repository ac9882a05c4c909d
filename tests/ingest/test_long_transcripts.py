"""A conversation longer than one post holds (MAX_MESSAGES): posted in parts, each naming where it
starts, with no gap; a session log read from a file or uploaded is stored whole."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from ingest.ingestion import MAX_MESSAGES, TranscriptError, ingest
from memoryui.models import ConflictError, Transcript

pytestmark = pytest.mark.django_db

LIST = "/api/transcripts/"
LONG = MAX_MESSAGES + 1000


def turns(count: int, first: int = 0) -> list[dict]:
    """`count` messages, user and assistant in turn, numbered from `first`."""
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: the build number is {n}"}
        for n in range(first, first + count)
    ]


def post(client, token: str, body: dict):
    return client.post(LIST, json.dumps(body), "application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_post_over_the_limit_says_how_to_post_it_in_parts(client, agent_token):
    response = post(client, agent_token, {"id": "long-1", "scope": "agent:main", "messages": turns(LONG)})
    assert response.status_code == 400, response.content
    assert not Transcript.objects.exists()
    with pytest.raises(TranscriptError) as refused:
        ingest({"id": "long-1", "scope": "agent:main", "messages": turns(LONG)})
    assert "post a longer conversation in parts" in refused.value.errors["messages"][0]
    assert "start" in refused.value.errors["messages"][0]


def test_a_part_that_would_leave_a_gap_is_a_conflict_and_null_is_a_whole_transcript(client, agent_token):
    gap = post(client, agent_token, {"id": "long-4", "scope": "agent:main", "start": 7, "messages": turns(1, 7)})
    assert gap.status_code == 409, gap.content
    assert "a part starts at 0 or earlier" in gap.json()["error"]["message"]
    whole = post(client, agent_token, {"id": "long-4", "scope": "agent:main", "start": None, "messages": turns(2)})
    assert whole.status_code == 201, whole.content


def test_parts_with_their_start_make_one_transcript_in_order(client, agent_token):
    first = post(client, agent_token, {"id": "long-1", "scope": "agent:main", "messages": turns(MAX_MESSAGES)})
    assert first.status_code == 201, first.content
    rest = {"id": "long-1", "scope": "agent:main", "start": MAX_MESSAGES, "messages": turns(1000, MAX_MESSAGES)}
    second = post(client, agent_token, rest)
    assert second.status_code == 200, second.content
    assert (second.json()["added"], second.json()["transcript_id"]) == (1000, first.json()["transcript_id"])
    stored = Transcript.objects.get().messages.order_by("index")
    assert stored.count() == LONG
    assert [m.index for m in stored] == list(range(LONG))
    assert stored.last().content == f"turn {LONG - 1}: the build number is {LONG - 1}"


def test_a_part_may_overlap_what_is_stored_but_not_leave_a_gap_or_change_it():
    ingest({"id": "long-2", "scope": "agent:main", "messages": turns(10)})
    again = ingest({"id": "long-2", "scope": "agent:main", "start": 8, "messages": turns(4, 8)})
    assert (again.added, again.unchanged) == (2, 2)
    with pytest.raises(ConflictError, match="holds 12 messages, so a part starts at 12 or earlier"):
        ingest({"id": "long-2", "scope": "agent:main", "start": 20, "messages": turns(1, 20)})
    with pytest.raises(ConflictError, match="messages 9 differ"):
        ingest({"id": "long-2", "scope": "agent:main", "start": 9, "messages": turns(1, 0)})
    with pytest.raises(ConflictError, match="holds 0 messages"):  # a part of no stored transcript
        ingest({"scope": "agent:main", "start": 3, "messages": turns(1)})
    assert ingest({"id": "long-2", "scope": "agent:main", "start": 12.0, "messages": turns(1, 12)}).added == 1
    assert ingest({"id": "long-2", "scope": "agent:main", "start": None, "messages": turns(2)}).unchanged == 2
    with pytest.raises(TranscriptError) as bad:
        ingest({"id": "long-2", "scope": "agent:main", "start": -1, "messages": turns(1)})
    assert "an integer from 0" in bad.value.errors["start"][0]
    with pytest.raises(TranscriptError, match="got 1.5"):
        ingest({"id": "long-2", "scope": "agent:main", "start": 1.5, "messages": turns(1)})
    assert Transcript.objects.get().messages.count() == 13


def test_a_bad_message_of_a_part_is_named_by_its_index_in_the_transcript():
    ingest({"id": "long-3", "scope": "agent:main", "messages": turns(4)})
    with pytest.raises(TranscriptError) as bad:
        ingest({"id": "long-3", "scope": "agent:main", "start": 4, "messages": [*turns(2, 4), {"role": "robot"}]})
    assert list(bad.value.errors) == ["messages[6].role"]


def test_a_long_file_is_stored_whole_by_the_command_and_the_upload_form(tmp_path, erin_client):
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"id": "long-file", "scope": "agent:main", "messages": turns(LONG)}), encoding="utf-8")
    out = io.StringIO()
    call_command("ingest_transcript", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue())["messages"] == LONG

    upload = SimpleUploadedFile(
        "long.json", json.dumps({"id": "long-form", "scope": "agent:main", "messages": turns(LONG)}).encode()
    )
    response = erin_client.post("/transcripts/", {"file": upload, "transcript": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Transcript.objects.get(external_id="long-form").messages.count() == LONG
