"""Other scopes cannot be detected: a transcript id or a golden-set name used in a scope the
caller cannot see is neither refused nor reported, and cannot be squatted from another scope."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memoryui.models import Transcript
from recall.models import GoldenSet

pytestmark = pytest.mark.django_db

SESSION = "a3f1c2-session"  # an agent's own session id: not a UUID
MESSAGES = [{"role": "user", "content": "Remember that I deploy on Fridays."}]


def _post(client, path: str, body: dict, token: str):
    return client.post(
        path, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def _get(client, path: str, token: str):
    return client.get(path, HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_transcript_id_used_in_another_scope_is_a_new_transcript_of_the_callers_scope(
    client, agent_token, mallory_token
):
    mine = _post(client, "/api/transcripts/", {"id": SESSION, "scope": "agent:main", "messages": MESSAGES}, agent_token)
    assert mine.status_code == 201, mine.content
    theirs = _post(
        client,
        "/api/transcripts/",
        {"id": SESSION, "scope": "agent:other", "messages": [{"role": "user", "content": "something else"}]},
        mallory_token,
    )
    assert theirs.status_code == 201, theirs.content
    assert "agent:main" not in theirs.content.decode()
    body = theirs.json()
    assert body["external_id"] == SESSION and body["scope"] == "agent:other"
    assert body["transcript_id"] != mine.json()["transcript_id"]
    # Nothing of agent:main's transcript changed, and each token finds its own by the shared id.
    stored = Transcript.objects.get(scope="agent:main")
    assert list(stored.messages.values_list("content", flat=True)) == [MESSAGES[0]["content"]]
    found = _get(client, f"/api/transcripts/{SESSION}/", mallory_token)
    assert found.status_code == 200 and found.json()["id"] == body["transcript_id"]
    hidden = _get(client, f"/api/transcripts/{mine.json()['transcript_id']}/", mallory_token)
    assert hidden.status_code == 404 and "agent:main" not in hidden.content.decode()


def test_an_id_in_several_visible_scopes_is_picked_by_scope(client, agent_token):
    for scope in ("agent:main", "agent:ops"):
        assert (
            _post(
                client, "/api/transcripts/", {"id": SESSION, "scope": scope, "messages": MESSAGES}, agent_token
            ).status_code
            == 201
        )
    ambiguous = _get(client, f"/api/transcripts/{SESSION}/", agent_token)
    assert ambiguous.status_code == 409 and "scope" in ambiguous.json()["error"]["details"]
    picked = _get(client, f"/api/transcripts/{SESSION}/?scope=agent:ops", agent_token)
    assert picked.status_code == 200 and picked.json()["scope"] == "agent:ops"


def test_a_session_id_with_a_slash_names_its_transcript_and_its_extraction(client, agent_token):
    session = "claude-code/2026-11-25/7f3a"
    assert (
        _post(
            client, "/api/transcripts/", {"id": session, "scope": "agent:main", "messages": MESSAGES}, agent_token
        ).status_code
        == 201
    )
    assert _get(client, f"/api/transcripts/{session}/", agent_token).json()["external_id"] == session
    dry = _post(client, f"/api/transcripts/{session}/extract/", {"dry_run": True}, agent_token)
    assert dry.status_code == 200, dry.content


def test_golden_set_names_are_unique_per_scope_and_cannot_be_probed(client, agent_token, mallory_token):
    main = _post(client, "/api/recall/golden/", {"name": "regressions", "scope": "agent:main"}, agent_token)
    assert main.status_code == 201, main.content
    # The same name in another scope is that scope's own set: no "already exists", no agent:main.
    other = _post(client, "/api/recall/golden/", {"name": "regressions", "scope": "agent:other"}, mallory_token)
    assert other.status_code == 201, other.content
    assert GoldenSet.objects.filter(name="regressions").count() == 2
    # A token asking for a scope it cannot write is told so, whether the name is taken there or not.
    for name in ("regressions", "never-used"):
        refused = _post(client, "/api/recall/golden/", {"name": name, "scope": "agent:main"}, mallory_token)
        assert refused.status_code == 403 and "exists" not in refused.content.decode()
    # Within one scope a name is still unique, and the answer names the field.
    again = _post(client, "/api/recall/golden/", {"name": "regressions", "scope": "agent:main"}, agent_token)
    assert again.status_code == 409 and "name" in again.json()["error"]["details"]


def test_calibrate_asks_for_the_id_of_a_name_used_in_several_scopes():
    first = GoldenSet.objects.create(name="travel", scope="agent:main")
    GoldenSet.objects.create(name="travel", scope="agent:other")
    with pytest.raises(
        CommandError, match=rf"several scopes \({first.pk} in agent:main, \d+ in agent:other\); give its id"
    ):
        call_command("calibrate", "--golden", "travel", "--dry-run", stdout=io.StringIO())
    with pytest.raises(CommandError, match="Too few|too few|at least"):
        # By id it is found (and then refused for having no queries to calibrate on).
        call_command("calibrate", "--golden", str(first.pk), "--dry-run", stdout=io.StringIO())
