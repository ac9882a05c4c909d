"""A role refusal of the API (403 `forbidden`) says in `details` what is needed and what the caller
has, under the field at fault (`role`, or `access` for a read token), as a 400 names its fields; the
MCP server's refusals carry the same message and details (memoryui.roles.role_refusal).

bob is a viewer, erin an editor, alice an admin; see tests/conftest.py.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from mcpserver import tools
from memoryui import roles
from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db

BODY = {"scope": "agent:main", "kind": "preference", "text": "Prefers terse answers."}


def bearer(key: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {key}"})


def post(client: Client, url: str, body: dict):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def forbidden(response) -> dict:
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "forbidden"
    return error


def test_a_viewer_is_told_the_role_needed_and_the_one_she_has(bob_client):
    error = forbidden(post(bob_client, "/api/memories/", BODY))

    assert error["details"] == {"role": ["This needs the editor role; you are a viewer."]}
    assert error["message"] == "This needs the editor role; you are a viewer."


def test_an_editor_changing_a_recall_profile_is_told_it_needs_an_admin(erin_client):
    error = forbidden(post(erin_client, "/api/recall/profiles/", {"name": "terse"}))

    assert error["details"] == {"role": ["This needs the admin role; you are an editor."]}


def test_a_token_is_told_about_its_owner_role(bob):
    _, raw = ApiToken.issue(user=bob, name="bobs", scopes=["agent:main"], access=ApiToken.Access.WRITE)

    error = forbidden(post(bearer(raw), "/api/memories/", BODY))

    assert error["details"] == {"role": ["This needs the editor role; this token's owner is a viewer."]}


def test_a_read_token_is_told_a_write_token_is_needed(erin):
    _, raw = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)

    error = forbidden(post(bearer(raw), "/api/memories/", BODY))

    assert list(error["details"]) == ["access"]
    [reason] = error["details"]["access"]
    assert "needs a write token" in reason and "read-only" in reason


def test_the_mcp_servers_refusal_says_what_the_api_says(bob, erin):
    viewers, viewers_key = ApiToken.issue(user=bob, name="bobs", scopes=["agent:main"], access=ApiToken.Access.WRITE)
    reader, readers_key = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)

    for key, token in ((viewers_key, viewers), (readers_key, reader)):
        error = forbidden(post(bearer(key), "/api/memories/", BODY))
        with pytest.raises(roles.Forbidden) as refused:
            tools.remember(tools.Caller("agent:main", token), BODY["text"])
        assert tools.error_of(refused.value) == (403, {"error": error})
        assert error["message"] == roles.role_refusal(token.user, roles.EDITS, token).message
