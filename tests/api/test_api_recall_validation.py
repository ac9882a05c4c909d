"""`POST /api/recall/` refuses what it cannot use, naming the field, like every other endpoint."""

from __future__ import annotations

import json

import pytest

from recall.models import RecallTrace

pytestmark = pytest.mark.django_db

RECALL = "/api/recall/"


def error_of(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def post(client, body: dict | str):
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(RECALL, data=text, content_type="application/json")


def test_an_unknown_field_is_refused_not_ignored(alice_client):
    # A misspelt `tools` would otherwise recall as though no tool were in use.
    error = error_of(post(alice_client, {"query": "phone", "scope": "main", "tool": ["web"]}))
    assert error["details"] == {"tool": ["is not an accepted field"]}
    assert not RecallTrace.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"scope": 123}, "scope", "must be a string, got int"),
        ({"query": 42}, "query", "must be a string, got int"),
        ({"profile": 1}, "profile", "must be a string, got int"),
        ({"tools": ["web", 7]}, "tools", "item 1 must be a string, got int"),
    ],
)
def test_a_number_where_text_belongs_is_refused(alice_client, change, field, reason):
    error = error_of(post(alice_client, {"query": "phone", "scope": "main", **change}))
    assert error["details"] == {field: [reason]}


@pytest.mark.parametrize(
    ("query", "says"),
    [("\u200b\u2060", "holds no words"), ("phone\x00", "NUL")],
)
def test_a_query_that_cannot_be_searched_is_refused_naming_query(alice_client, query, says):
    error = error_of(post(alice_client, {"query": query, "scope": "main"}))
    (field,) = error["details"]
    assert field == "query" and says in error["details"]["query"][0]


def test_a_lone_surrogate_in_the_query_is_refused_at_the_boundary(alice_client):
    error = error_of(post(alice_client, '{"query": "phone \\udfff", "scope": "main"}'))
    assert list(error["details"]) == ["query"]
    assert "lone UTF-16 surrogate" in error["details"]["query"][0]
