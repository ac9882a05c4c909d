"""POST /api/memories/bulk/: one action on many memories, one transaction, one batch, all or nothing."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

BULK = "/api/memories/bulk/"


def bulk(client: Client, **body):
    return client.post(BULK, body, "application/json")


@pytest.fixture
def notes(make_memory) -> list[Memory]:
    return [make_memory(f"Chit-chat number {i}.", kind="note") for i in range(3)]


def ids(memories: list[Memory]) -> list[str]:
    return [str(memory.pk) for memory in memories]


def test_bulk_tombstone_changes_all_under_one_batch(alice_client, notes):
    response = bulk(alice_client, action="tombstone", ids=ids(notes), reason="pollution clean-up")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["changed"], body["unchanged"]) == (3, 0)
    assert not Memory.objects.active().exists()
    events = MemoryEvent.objects.filter(action="tombstoned")
    assert {str(event.batch) for event in events} == {body["batch"]}
    assert {event.reason for event in events} == {"pollution clean-up"}


def test_bulk_counts_memories_already_in_the_requested_state_as_unchanged(alice_client, notes):
    notes[0].pin(actor="test")
    body = bulk(alice_client, action="pin", ids=ids(notes)).json()
    assert (body["changed"], body["unchanged"]) == (2, 1)
    body = bulk(alice_client, action="unpin", ids=ids(notes)).json()
    assert (body["changed"], body["unchanged"]) == (3, 0)


def test_bulk_set_tier_and_restore(alice_client, notes):
    body = bulk(alice_client, action="set_tier", ids=ids(notes[:2]), tier="core").json()
    assert body["changed"] == 2
    assert set(Memory.objects.filter(pk__in=ids(notes[:2])).values_list("tier", flat=True)) == {"core"}
    notes[2].tombstone("oops", actor="test")
    body = bulk(alice_client, action="restore", ids=ids(notes[2:])).json()
    assert body["changed"] == 1
    assert Memory.objects.active().count() == 3


def test_an_unknown_id_fails_the_whole_batch_and_lists_it(alice_client, notes):
    unknown = str(uuid.uuid4())
    response = bulk(alice_client, action="tombstone", ids=[*ids(notes), unknown], reason="clean-up")
    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["details"]) == ("not_found", {"ids": [unknown]})
    assert Memory.objects.active().count() == 3
    assert not MemoryEvent.objects.filter(action="tombstoned").exists()


def test_a_memory_outside_the_token_scopes_fails_the_batch_like_an_unknown_id(mallory_token, make_memory):
    mine = make_memory("Other agent note.", scope="agent:other")
    theirs = make_memory("Main agent note.", scope="agent:main")
    mallory = Client(headers={"Authorization": f"Bearer {mallory_token}"})
    response = bulk(mallory, action="pin", ids=[str(mine.pk), str(theirs.pk)])
    assert response.status_code == 404
    assert response.json()["error"]["details"] == {"ids": [str(theirs.pk)]}
    assert not Memory.objects.filter(pinned=True).exists()


def test_a_conflict_midway_rolls_back_the_earlier_changes(alice_client, make_memory):
    first = make_memory("Kept note.", kind="note")
    first.tombstone("oops", actor="test")
    old = make_memory("Phone is 18600000000.", kind="entity", entity_key="phone:18600000000")
    old.tombstone("changed", actor="test")
    make_memory("Phone: 18600000000", kind="entity", entity_key="phone:18600000000")
    response = bulk(alice_client, action="restore", ids=[str(first.pk), str(old.pk)])
    assert response.status_code == 409
    assert response.json()["error"]["details"] == {"ids": [str(old.pk)]}
    first.refresh_from_db()
    assert first.status == "tombstoned"  # restored first, then rolled back with the rest
    assert not MemoryEvent.objects.filter(action="restored").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "explode", "ids": []}, "action"),
        ({"action": "pin", "ids": []}, "ids"),
        ({"action": "pin", "ids": ["not-a-uuid"]}, "ids"),
        ({"action": "tombstone", "ids": [str(uuid.uuid4())]}, "reason"),
        ({"action": "set_tier", "ids": [str(uuid.uuid4())]}, "tier"),
        ({"action": "set_tier", "ids": [str(uuid.uuid4())], "tier": "attic"}, "tier"),
        ({"action": "pin", "ids": [str(uuid.uuid4())], "force": True}, "force"),
    ],
)
def test_bad_bulk_requests_name_the_field(alice_client, body, field):
    response = alice_client.post(BULK, body, "application/json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_more_than_1000_ids_is_refused_before_anything_happens(alice_client, notes):
    too_many = [str(uuid.uuid4()) for _ in range(1000)] + ids(notes[:1])
    response = bulk(alice_client, action="pin", ids=too_many)
    assert response.status_code == 400
    assert "1000" in response.json()["error"]["details"]["ids"][0]
    assert not Memory.objects.filter(pinned=True).exists()
