"""Memory actions (pin, unpin, tombstone, restore) and history (/events/) over the API."""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui.models import Memory

pytestmark = pytest.mark.django_db


def post(client: Client, url: str, body: dict | None = None):
    return client.post(url, body or {}, "application/json")


def url(memory: Memory, action: str = "") -> str:
    return f"/api/memories/{memory.pk}/{action + '/' if action else ''}"


def test_pin_and_unpin_answer_the_memory_and_record_events(alice_client, make_memory):
    memory = make_memory(kind="fact")
    response = post(alice_client, url(memory, "pin"))
    assert response.status_code == 200
    assert response.json()["pinned"] is True
    response = post(alice_client, url(memory, "unpin"))
    assert response.json()["pinned"] is False
    memory.refresh_from_db()
    assert memory.pinned is False
    assert list(memory.events.values_list("action", "actor")[:2]) == [
        ("unpinned", "user:alice"),
        ("pinned", "user:alice"),
    ]


def test_tombstone_needs_a_reason_and_changes_nothing_without_one(alice_client, make_memory):
    memory = make_memory()
    for body in ({}, {"reason": "  "}):
        response = post(alice_client, url(memory, "tombstone"), body)
        assert response.status_code == 400
        assert "reason" in response.json()["error"]["details"]
    memory.refresh_from_db()
    assert memory.status == "active"
    assert not memory.events.filter(action="tombstoned").exists()


def test_tombstone_then_restore(alice_client, make_memory):
    memory = make_memory()
    response = post(alice_client, url(memory, "tombstone"), {"reason": "the user corrected it"})
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["tombstone_reason"]) == ("tombstoned", "the user corrected it")
    response = post(alice_client, url(memory, "restore"))
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["tombstone_reason"]) == ("active", "")


def test_restoring_a_memory_whose_entity_key_is_active_again_is_a_conflict(alice_client, make_memory):
    old = make_memory("Phone is 18600000000.", kind="entity", entity_key="phone:18600000000")
    old.tombstone("changed number", actor="test")
    make_memory("Phone is +86 18600000000.", kind="entity", entity_key="phone:18600000000")
    response = post(alice_client, url(old, "restore"))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    old.refresh_from_db()
    assert old.status == "tombstoned"


def test_actions_only_accept_post(alice_client, make_memory):
    response = alice_client.get(url(make_memory(), "pin"))
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_memory_events_list_its_history_newest_first(alice_client, make_memory):
    memory = make_memory()
    memory.pin(actor="test")
    memory.tombstone("wrong", actor="user:alice")
    body = alice_client.get(url(memory, "events")).json()
    assert body["count"] == 3
    assert [event["action"] for event in body["results"]] == ["tombstoned", "pinned", "created"]
    assert body["results"][0]["reason"] == "wrong"
    assert body["results"][0]["memory"] == str(memory.pk)


def test_events_across_the_store_filter_by_memory_action_actor_and_batch(alice_client, make_memory):
    first, second = make_memory("First fact.", kind="fact"), make_memory("Second fact.", kind="fact")
    first.pin(actor="user:alice")
    second.tombstone("dup", actor="token:agent", batch="9b4c3a44-6f7e-4d49-8e8c-2a2f6c6d0e11")

    def actions(**params) -> list[tuple[str, str]]:
        response = alice_client.get("/api/events/", params)
        assert response.status_code == 200, response.content
        return [(event["memory"], event["action"]) for event in response.json()["results"]]

    assert actions(memory=str(first.pk)) == [(str(first.pk), "pinned"), (str(first.pk), "created")]
    assert actions(action="tombstoned") == [(str(second.pk), "tombstoned")]
    assert actions(actor="user:alice") == [(str(first.pk), "pinned")]
    assert actions(batch="9b4c3a44-6f7e-4d49-8e8c-2a2f6c6d0e11") == [(str(second.pk), "tombstoned")]


def test_events_filters_reject_bad_values_by_name(alice_client):
    response = alice_client.get("/api/events/", {"memory": "nope", "action": "exploded"})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"memory", "action"}


def test_a_scoped_token_sees_only_events_of_its_scopes(mallory_token, make_memory):
    make_memory("Main secret.", scope="agent:main")
    other = make_memory("Other note.", scope="agent:other")
    mallory = Client(headers={"Authorization": f"Bearer {mallory_token}"})
    body = mallory.get("/api/events/").json()
    assert [event["memory"] for event in body["results"]] == [str(other.pk)]
