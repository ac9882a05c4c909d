"""`manage.py api_token create|list|revoke`: the raw key printed once, --json prints one JSON document."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("api_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_create_prints_a_working_raw_key_once(alice):
    out = run("create", "agent", "--user", "alice", "--scope", "main", "--scope", "user:42")
    key = out.strip().splitlines()[-1]
    token = ApiToken.authenticate(key)
    assert token is not None and token.name == "agent" and token.user == alice
    assert token.scopes == ["agent:main", "user:42"]
    assert key not in run("list")


def test_create_with_json_prints_exactly_one_document_with_the_key(alice):
    document = json.loads(run("create", "agent", "--user", "alice", "--json"))
    assert document["name"] == "agent" and document["user"] == "alice" and document["scopes"] == []
    assert ApiToken.authenticate(document["key"]).pk == document["id"]


def test_create_refuses_an_unknown_user_or_a_bad_scope(alice):
    with pytest.raises(CommandError, match="nobody"):
        run("create", "agent", "--user", "nobody")
    with pytest.raises(CommandError, match="scopes"):
        run("create", "agent", "--user", "alice", "--scope", "planet:mars")
    assert not ApiToken.objects.exists()


def test_list_json_shows_every_token_without_keys(alice, bob):
    ApiToken.issue(user=alice, name="agent")
    ApiToken.issue(user=bob, name="script", scopes=["agent:other"])
    document = json.loads(run("list", "--json"))
    assert [(t["name"], t["user"], t["scopes"]) for t in document["tokens"]] == [
        ("agent", "alice", []),
        ("script", "bob", ["agent:other"]),
    ]
    assert all("key" not in token and "key_hash" not in token for token in document["tokens"])
    assert [t["name"] for t in json.loads(run("list", "--user", "bob", "--json"))["tokens"]] == ["script"]


@pytest.mark.parametrize("by", ["id", "prefix", "key"])
def test_revoke_by_id_prefix_or_key_stops_the_token(alice, by):
    token, raw = ApiToken.issue(user=alice, name="agent")
    ref = {"id": str(token.pk), "prefix": token.key_prefix, "key": raw}[by]
    document = json.loads(run("revoke", ref, "--json"))
    assert (document["id"], document["revoked"]) == (token.pk, True)
    assert ApiToken.authenticate(raw) is None
    assert json.loads(run("revoke", ref, "--json"))["revoked"] is False  # idempotent


def test_revoke_refuses_unknown_or_ambiguous_references(alice):
    ApiToken.issue(user=alice, name="one")
    ApiToken.issue(user=alice, name="two")
    with pytest.raises(CommandError, match="No token"):
        run("revoke", "999")
    with pytest.raises(CommandError, match="more than one"):
        run("revoke", "mui_")
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()


def test_a_failure_with_json_still_prints_one_json_document(alice):
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("api_token", "create", "agent", "--user", "nobody", "--json", stdout=out, stderr=StringIO())
    assert "nobody" in json.loads(out.getvalue())["error"]
