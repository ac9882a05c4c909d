"""/api/tokens/: signed-in users list, issue (raw key shown once) and revoke their own tokens; tokens cannot."""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db

TOKENS = "/api/tokens/"


def test_issuing_a_token_answers_the_raw_key_once_and_it_works(alice_client):
    response = alice_client.post(TOKENS, {"name": "my agent", "scopes": ["main", "user:42"]}, "application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["key"].startswith("mui_") and body["key"].startswith(body["key_prefix"])
    assert body["scopes"] == ["agent:main", "user:42"]
    agent = Client(headers={"Authorization": f"Bearer {body['key']}"})
    assert agent.get("/api/memories/").status_code == 200
    listed = alice_client.get(TOKENS).json()
    assert [token["name"] for token in listed] == ["my agent"]
    assert "key" not in listed[0]


def test_the_list_shows_only_your_own_tokens(alice, alice_client, bob):
    ApiToken.issue(user=bob, name="bob's")
    ApiToken.issue(user=alice, name="alice's")
    assert [token["name"] for token in alice_client.get(TOKENS).json()] == ["alice's"]


def test_revoking_a_token_makes_it_401(alice_client):
    key = alice_client.post(TOKENS, {"name": "short-lived"}, "application/json").json()["key"]
    token = ApiToken.objects.get(name="short-lived")
    response = alice_client.post(f"{TOKENS}{token.pk}/revoke/")
    assert response.status_code == 200
    assert response.json()["is_revoked"] is True
    agent = Client(headers={"Authorization": f"Bearer {key}"})
    assert agent.get("/api/memories/").status_code == 401


def test_you_cannot_revoke_someone_elses_token(alice_client, bob):
    token, _ = ApiToken.issue(user=bob, name="bob's")
    response = alice_client.post(f"{TOKENS}{token.pk}/revoke/")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": "  "}, "name"),
        ({"name": "x", "scopes": ["planet:mars"]}, "scopes"),
        ({"name": "x", "admin": True}, "admin"),
    ],
)
def test_a_bad_token_request_is_400_naming_the_field(alice_client, body, field):
    response = alice_client.post(TOKENS, body, "application/json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(("method", "path"), [("get", TOKENS), ("post", TOKENS), ("post", f"{TOKENS}1/revoke/")])
def test_a_token_cannot_manage_tokens(agent_token, method, path):
    agent = Client(headers={"Authorization": f"Bearer {agent_token}"})
    response = getattr(agent, method)(path, {"name": "minted"}, "application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert ApiToken.objects.count() == 1
    assert ApiToken.objects.get().revoked_at is None
