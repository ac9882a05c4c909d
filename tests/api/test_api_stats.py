"""GET /api/stats/: always the complete shape, zero-filled, narrowed by scope, 503 when the database fails."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from memoryui import rules
from memoryui.models import MemoryQuerySet

pytestmark = pytest.mark.django_db

STATS = "/api/stats/"
KEYS = {"total", "by_kind", "by_tier", "by_scope", "pinned", "tombstoned"}


def test_an_empty_store_still_answers_every_key_with_zeros(alice_client):
    response = alice_client.get(STATS)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == KEYS
    assert body["by_kind"] == dict.fromkeys(rules.KINDS, 0)
    assert body["by_tier"] == dict.fromkeys(rules.TIERS, 0)
    assert (body["total"], body["by_scope"], body["pinned"], body["tombstoned"]) == (0, {}, 0, 0)


def test_counts_active_memories_by_kind_tier_and_scope(alice_client, make_memory):
    make_memory("Name is Li Lei.", kind="entity", entity_key="name:li lei")  # core, pinned
    make_memory("Likes tea.", kind="preference")
    make_memory("Other agent note.", kind="note", scope="agent:other")
    make_memory("Gone.", kind="fact").tombstone("wrong", actor="test")
    body = alice_client.get(STATS).json()
    assert body["total"] == 3
    assert body["by_kind"] == {**dict.fromkeys(rules.KINDS, 0), "entity": 1, "preference": 1, "note": 1}
    assert body["by_tier"] == {"core": 1, "working": 1, "peripheral": 1}
    assert body["by_scope"] == {"agent:main": 2, "agent:other": 1}
    assert (body["pinned"], body["tombstoned"]) == (1, 1)


@pytest.mark.parametrize("scope", ["agent:main", "main"])
def test_scope_narrows_the_counts_and_is_normalized(alice_client, make_memory, scope):
    make_memory("Likes tea.", scope="agent:main")
    make_memory("Other agent note.", kind="note", scope="agent:other")
    body = alice_client.get(STATS, {"scope": scope}).json()
    assert (body["total"], body["by_scope"]) == (1, {"agent:main": 1})
    assert body["by_kind"]["note"] == 0


def test_a_malformed_scope_is_a_400_naming_scope(alice_client):
    response = alice_client.get(STATS, {"scope": "planet:mars"})
    assert response.status_code == 400
    assert list(response.json()["error"]["details"]) == ["scope"]


def test_a_scoped_token_counts_only_its_scopes(mallory_token, make_memory):
    make_memory("Main secret.", scope="agent:main")
    make_memory("Other note.", kind="note", scope="agent:other")
    mallory = Client(headers={"Authorization": f"Bearer {mallory_token}"})
    body = mallory.get(STATS).json()
    assert (body["total"], body["by_scope"]) == (1, {"agent:other": 1})
    assert mallory.get(STATS, {"scope": "agent:main"}).json()["total"] == 0


def test_a_database_error_answers_503_backend_unavailable_with_the_json_shape(alice_client, monkeypatch):
    def broken(self):
        raise OperationalError("database is locked")

    monkeypatch.setattr(MemoryQuerySet, "stats", broken)
    response = alice_client.get(STATS)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "backend_unavailable"
    assert "database is locked" in error["message"]
    assert error["details"] == {"backend": "database", "reason": "database is locked"}
    assert response["Retry-After"]
