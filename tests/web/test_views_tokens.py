"""The API tokens page: list, create (raw key shown once), revoke."""

from __future__ import annotations

import pytest

from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db


def test_tokens_page_lists_only_the_users_own_tokens(alice_client, alice, bob):
    ApiToken.issue(user=alice, name="laptop agent", scopes=["agent:main"])
    ApiToken.issue(user=bob, name="bobs script")

    html = alice_client.get("/tokens/").content.decode()

    assert "laptop agent" in html and "agent:main" in html
    assert "bobs script" not in html


def test_an_empty_token_list_says_what_to_do(alice_client):
    html = alice_client.get("/tokens/").content.decode()

    assert 'data-state="empty"' in html and "No tokens yet" in html


def test_creating_a_token_shows_the_raw_key_once(alice_client, alice):
    response = alice_client.post("/tokens/", {"name": "ci", "scopes": "main, user:42"})

    html = response.content.decode()
    token = ApiToken.objects.get(user=alice)
    key = html.split('id="new-token-key" class="token-key">')[1].split("<")[0]
    assert response.status_code == 201
    assert "it will not be shown again" in html
    assert ApiToken.authenticate(key) == token
    assert token.scopes == ["agent:main", "user:42"]
    assert "no-store" in response["Cache-Control"]
    assert key not in alice_client.get("/tokens/").content.decode()


def test_a_token_needs_a_name(alice_client):
    response = alice_client.post("/tokens/", {"name": "", "scopes": ""})

    assert response.status_code == 400
    assert "<b>Name</b>: This field is required." in response.content.decode()


def test_an_invalid_scope_is_shown_on_the_scopes_field(alice_client):
    response = alice_client.post("/tokens/", {"name": "ci", "scopes": "planet:mars"})

    html = response.content.decode()
    assert response.status_code == 400
    assert "<b>Scopes</b>: &#x27;planet:mars&#x27;: unknown scope type" in html
    assert not ApiToken.objects.exists()


def test_revoking_a_token(alice_client, alice):
    token, raw = ApiToken.issue(user=alice, name="old")

    response = alice_client.post(f"/tokens/{token.pk}/revoke/")

    assert response.status_code == 302 and response["Location"] == "/tokens/"
    assert ApiToken.authenticate(raw) is None
    assert "Revoked token “old”" in alice_client.get("/tokens/").content.decode()


def test_nobody_revokes_someone_elses_token(alice_client, bob):
    token, raw = ApiToken.issue(user=bob, name="bobs")

    assert alice_client.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert ApiToken.authenticate(raw) is not None


def test_revoke_only_accepts_post(alice_client, alice):
    token, _ = ApiToken.issue(user=alice, name="old")

    assert alice_client.get(f"/tokens/{token.pk}/revoke/").status_code == 405
