"""/api/memories/: list with filters, create through the write path (dedup), read, edit, DELETE = tombstone."""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

LIST = "/api/memories/"


@pytest.fixture
def agent(agent_token) -> Client:
    return Client(headers={"Authorization": f"Bearer {agent_token}"})


def texts(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["text"] for row in response.json()["results"]}


def test_list_is_paginated_and_shows_active_memories_only(alice_client, make_memory):
    make_memory("The user prefers short answers.")
    make_memory("An old note.", kind="note").tombstone("stale", actor="test")
    response = alice_client.get(LIST)
    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 1
    row = body["results"][0]
    assert row["text"] == "The user prefers short answers."
    assert row["url"].endswith(f"/api/memories/{row['id']}/")
    assert {"scope", "kind", "tier", "importance", "confidence", "pinned", "status", "entity_key"} <= set(row)


def test_list_filters_by_scope_kind_tier_pinned_source_and_text(alice_client, make_memory):
    make_memory("Main prefers tea.", scope="agent:main", kind="preference")
    make_memory("Other prefers coffee.", scope="agent:other", kind="preference")
    make_memory("Phone is 18600000000.", kind="entity", entity_key="phone:18600000000")  # core, pinned
    make_memory("Imported leftover.", kind="note", source="import")
    assert texts(alice_client.get(LIST, {"scope": "main", "kind": "preference"})) == {"Main prefers tea."}
    assert texts(alice_client.get(LIST, {"tier": "core"})) == {"Phone is 18600000000."}
    assert texts(alice_client.get(LIST, {"pinned": "true"})) == {"Phone is 18600000000."}
    assert texts(alice_client.get(LIST, {"source": "import"})) == {"Imported leftover."}
    assert texts(alice_client.get(LIST, {"q": "COFFEE"})) == {"Other prefers coffee."}
    assert texts(alice_client.get(LIST, {"q": "phone:186"})) == {"Phone is 18600000000."}


def test_status_filter_shows_tombstoned_or_all(alice_client, make_memory):
    make_memory("Kept.")
    make_memory("Dropped.").tombstone("wrong", actor="test")
    assert texts(alice_client.get(LIST, {"status": "tombstoned"})) == {"Dropped."}
    assert texts(alice_client.get(LIST, {"status": "all"})) == {"Kept.", "Dropped."}


def test_ordering_by_importance(alice_client, make_memory):
    make_memory("Low.", importance=0.2)
    make_memory("High.", importance=0.9)
    rows = alice_client.get(LIST, {"ordering": "-importance"}).json()["results"]
    assert [row["text"] for row in rows] == ["High.", "Low."]
    rows = alice_client.get(LIST, {"ordering": "importance"}).json()["results"]
    assert [row["text"] for row in rows] == ["Low.", "High."]


def test_list_query_count_does_not_grow_with_the_page(alice_client, make_memory, django_assert_max_num_queries):
    for i in range(40):
        make_memory(f"Fact number {i}.", kind="fact")
    with django_assert_max_num_queries(4):  # session, user, count, page
        response = alice_client.get(LIST, {"page_size": 40})
    assert len(response.json()["results"]) == 40


def test_post_writes_through_the_write_path_and_answers_201(agent):
    response = agent.post(LIST, {"scope": "main", "kind": "entity", "text": "My name is Li Lei."}, "application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["scope"] == "agent:main"  # normalized
    assert (body["tier"], body["pinned"]) == ("core", True)  # placed by the rules for an entity
    assert body["merged"] is False and body["merged_into"] is None
    assert response["Location"] == body["url"]
    event = MemoryEvent.objects.get(memory_id=body["id"])
    assert (event.action, event.actor) == ("created", "token:agent")


def test_post_of_a_duplicate_merges_and_answers_200_with_the_existing_memory(agent, make_memory):
    existing = make_memory("The user prefers short answers.")
    response = agent.post(
        LIST,
        {"scope": "agent:main", "kind": "preference", "text": "the user prefers SHORT answers."},
        "application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["merged"] is True
    assert body["id"] == body["merged_into"] == str(existing.pk)
    assert body["access_count"] == 1
    assert Memory.objects.count() == 1


def test_get_one_memory_including_a_tombstoned_one(alice_client, make_memory):
    memory = make_memory()
    memory.tombstone("wrong", actor="test")
    body = alice_client.get(f"{LIST}{memory.pk}/").json()
    assert (body["id"], body["status"], body["tombstone_reason"]) == (str(memory.pk), "tombstoned", "wrong")


def test_patch_edits_through_the_domain_and_records_an_event(alice_client, make_memory):
    memory = make_memory("The user likes tea.")
    response = alice_client.patch(f"{LIST}{memory.pk}/", {"text": "The user likes green tea."}, "application/json")
    assert response.status_code == 200, response.content
    assert response.json()["text"] == "The user likes green tea."
    event = memory.events.get(action="edited")
    assert event.actor == "user:alice"
    assert event.before == {"text": "The user likes tea."}


def test_put_requires_scope_kind_and_text_and_then_applies_them(alice_client, make_memory):
    memory = make_memory("The user likes tea.")
    url = f"{LIST}{memory.pk}/"
    response = alice_client.put(url, {"text": "Tea, always."}, "application/json")
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"scope", "kind"}
    response = alice_client.put(url, {"scope": "main", "kind": "fact", "text": "Tea, always."}, "application/json")
    assert response.status_code == 200
    memory.refresh_from_db()
    assert (memory.kind, memory.text) == ("fact", "Tea, always.")


@pytest.mark.parametrize(
    ("query", "body", "reason"),
    [("?reason=duplicate", None, "duplicate"), ("", {"reason": "obsolete"}, "obsolete"), ("", None, "deleted via API")],
)
def test_delete_tombstones_with_a_reason_and_never_deletes(alice_client, make_memory, query, body, reason):
    memory = make_memory()
    response = alice_client.delete(f"{LIST}{memory.pk}/{query}", body or "", "application/json")
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["tombstone_reason"]) == ("tombstoned", reason)
    memory.refresh_from_db()
    assert (memory.status, memory.tombstone_reason) == ("tombstoned", reason)
    assert Memory.objects.count() == 1
