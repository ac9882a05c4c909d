"""Transcript ids are the agent's own: any string of up to 200 characters is accepted, posting it
again is idempotent, and it round-trips through the API; memoryui's own UUID stays beside it."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest

from memoryui.models import Transcript
from memoryui.models.transcripts import EXTERNAL_ID_MAX_LENGTH

pytestmark = pytest.mark.django_db

PREFIX = "claude-code/2026-11-25 session: 7f3a/"  # a slash, spaces, a colon: not a UUID
LONGEST = PREFIX + "x" * (EXTERNAL_ID_MAX_LENGTH - len(PREFIX))
MESSAGES = [{"role": "user", "content": "Remember that I deploy on Fridays."}]


def post(client, token: str, body: dict):
    return client.post(
        "/api/transcripts/", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_a_200_character_id_with_slashes_and_spaces_is_accepted_idempotent_and_round_trips(client, agent_token):
    assert len(LONGEST) == 200

    first = post(client, agent_token, {"id": LONGEST, "scope": "agent:main", "messages": MESSAGES})
    again = post(client, agent_token, {"id": LONGEST, "scope": "agent:main", "messages": MESSAGES})
    more = post(
        client,
        agent_token,
        {"id": LONGEST, "scope": "agent:main", "messages": [*MESSAGES, {"role": "assistant", "content": "Noted."}]},
    )

    assert first.status_code == 201, first.content
    body = first.json()
    assert body["external_id"] == LONGEST
    assert str(uuid.UUID(body["transcript_id"])) == body["transcript_id"] != LONGEST  # the UUID is memoryui's own
    assert again.status_code == 200 and again.json()["transcript_id"] == body["transcript_id"]
    assert (again.json()["added"], again.json()["unchanged"]) == (0, 1)
    assert more.status_code == 200 and more.json()["added"] == 1
    assert Transcript.objects.count() == 1

    auth = {"HTTP_AUTHORIZATION": f"Bearer {agent_token}"}
    by_id = client.get(f"/api/transcripts/{quote(LONGEST)}/", **auth)
    assert by_id.status_code == 200, by_id.content
    assert by_id.json()["external_id"] == LONGEST and by_id.json()["id"] == body["transcript_id"]
    assert len(by_id.json()["messages"]) == 2
    listed = client.get("/api/transcripts/", **auth).json()
    assert [t["external_id"] for t in listed] == [LONGEST]


def test_a_201_character_id_is_refused_with_a_field_error_and_nothing_stored(client, agent_token):
    response = post(client, agent_token, {"id": LONGEST + "x", "scope": "agent:main", "messages": MESSAGES})

    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"id": ["is 201 characters; at most 200"]}
    assert not Transcript.objects.exists()


def test_the_same_id_from_the_browser_names_the_same_transcript(client, agent_token, erin_client):
    posted = post(client, agent_token, {"id": LONGEST, "scope": "agent:main", "messages": MESSAGES})

    response = erin_client.post(
        "/transcripts/",
        {"transcript": json.dumps({"id": LONGEST, "scope": "agent:main", "messages": MESSAGES})},
    )

    assert response.status_code == 302
    assert response["Location"] == f"/transcripts/{posted.json()['transcript_id']}/"
    assert Transcript.objects.count() == 1
