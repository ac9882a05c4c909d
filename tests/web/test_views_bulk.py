"""Bulk actions on the checked rows: one POST, one transaction, one batch id."""

from __future__ import annotations

import pytest

from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "results"}


@pytest.fixture
def notes(make_memory):
    return [make_memory(f"note {i}", kind="note") for i in range(3)]


def ids(memories) -> list[str]:
    return [str(m.pk) for m in memories]


def test_bulk_pin_applies_to_every_selected_memory_in_one_batch(alice_client, notes):
    response = alice_client.post(
        "/memories/bulk/?kind=note", {"action": "pin", "ids": ids(notes), "confirmed": "1"}, headers=HTMX
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert "Pinned 3 memories." in html
    assert "<html" not in html and html.count('data-pinned="yes"') == 3
    events = MemoryEvent.objects.filter(action="pinned")
    assert events.count() == 3
    assert len({e.batch for e in events}) == 1 and events[0].batch is not None
    assert {e.actor for e in events} == {"user:alice"}


def test_bulk_results_keep_the_list_filters(alice_client, notes, make_memory):
    make_memory("a fact", kind="fact")

    html = alice_client.post(
        "/memories/bulk/?kind=note", {"action": "pin", "ids": ids(notes[:1]), "confirmed": "1"}, headers=HTMX
    )
    html = html.content.decode()

    assert "a fact" not in html
    assert 'action="/memories/bulk/?kind=note"' in html


def test_bulk_reports_memories_that_were_already_in_that_state(alice_client, notes):
    notes[0].pin(actor="test")

    html = alice_client.post(
        "/memories/bulk/", {"action": "pin", "ids": ids(notes), "confirmed": "1"}, headers=HTMX
    ).content.decode()

    assert "Pinned 2 memories (1 already pinned)." in html


def test_bulk_tombstone_requires_a_reason(alice_client, notes):
    response = alice_client.post("/memories/bulk/", {"action": "tombstone", "ids": ids(notes)}, headers=HTMX)

    assert response.status_code == 400
    assert response["X-Memoryui-State"] == "invalid"
    assert response["HX-Retarget"] == "#alerts"
    assert "A reason is required to tombstone memories." in response.content.decode()
    assert Memory.objects.filter(status="tombstoned").count() == 0


def test_bulk_tombstone_with_a_reason_then_restore(alice_client, notes):
    alice_client.post(
        "/memories/bulk/",
        {"action": "tombstone", "reason": "chit-chat", "ids": ids(notes), "confirmed": "1"},
        headers=HTMX,
    )
    assert set(Memory.objects.values_list("tombstone_reason", flat=True)) == {"chit-chat"}

    html = alice_client.post(
        "/memories/bulk/?status=all", {"action": "restore", "ids": ids(notes[:2]), "confirmed": "1"}, headers=HTMX
    ).content.decode()

    assert "Restored 2 memories." in html
    assert Memory.objects.filter(status="active").count() == 2


def test_bulk_set_tier_moves_the_memories(alice_client, notes):
    html = alice_client.post(
        "/memories/bulk/", {"action": "set_tier", "tier": "core", "ids": ids(notes), "confirmed": "1"}, headers=HTMX
    ).content.decode()

    assert "Moved 3 memories to core." in html
    assert set(Memory.objects.values_list("tier", flat=True)) == {"core"}


def test_bulk_set_tier_needs_a_tier(alice_client, notes):
    response = alice_client.post("/memories/bulk/", {"action": "set_tier", "ids": ids(notes)}, headers=HTMX)

    assert response.status_code == 400
    assert "Choose the tier" in response.content.decode()


def test_bulk_without_a_selection_says_so(alice_client, notes):
    response = alice_client.post("/memories/bulk/", {"action": "pin"}, headers=HTMX)

    assert response.status_code == 400
    assert "Select at least one memory." in response.content.decode()


def test_a_conflict_in_one_memory_rolls_back_the_whole_batch(alice_client, make_memory):
    free = make_memory("note a", kind="note")
    free.tombstone("x", actor="test")
    taken = make_memory("Phone 186.", kind="entity", entity_key="phone:186")
    taken.tombstone("replaced", actor="test")
    make_memory("Phone is 186.", kind="entity", entity_key="phone:186")

    response = alice_client.post(
        "/memories/bulk/", {"action": "restore", "ids": ids([free, taken]), "confirmed": "1"}, headers=HTMX
    )

    assert response.status_code == 400
    assert "Nothing changed" in response.content.decode()
    free.refresh_from_db()
    assert free.status == "tombstoned"
    assert not MemoryEvent.objects.filter(action="restored").exists()


def test_bulk_works_without_javascript_and_redirects_back_to_the_list(alice_client, notes):
    response = alice_client.post("/memories/bulk/?kind=note&sort=created", {"action": "unpin", "ids": ids(notes)})

    assert response.status_code == 302
    assert response["Location"] == "/memories/?kind=note&sort=created"
    page = alice_client.get(response["Location"]).content.decode()
    assert "Unpinned 0 memories (3 not pinned)." in page


def test_bulk_checkboxes_belong_to_the_bulk_form(alice_client, notes):
    html = alice_client.get("/memories/").content.decode()

    assert '<form id="bulk-form"' in html
    assert html.count('name="ids"') == 3 and html.count('form="bulk-form"') == 3


def test_a_bulk_tombstone_is_asked_first_with_its_counts_and_an_unconfirmed_post_changes_nothing(alice_client, notes):
    notes[0].tombstone("earlier", actor="test")
    events = MemoryEvent.objects.count()

    response = alice_client.post(
        "/memories/bulk/?kind=note", {"action": "tombstone", "reason": "chit-chat", "ids": ids(notes)}, headers=HTMX
    )

    html = response.content.decode()
    assert response["HX-Retarget"] == "#confirm-dialog"
    assert "Tombstone 2 memories?" in html
    assert "Tombstone 2 memories (reason: “chit-chat”). 1 is already tombstoned." in html
    assert 'hx-target="#results"' in html and 'name="reason" value="chit-chat"' in html
    assert MemoryEvent.objects.count() == events
    assert Memory.objects.filter(status="active").count() == 2


def test_a_confirmed_bulk_tombstone_offers_undo_in_its_notice_and_the_undo_restores_them(alice_client, notes):
    html = alice_client.post(
        "/memories/bulk/?kind=note",
        {"action": "tombstone", "reason": "chit-chat", "ids": ids(notes), "confirmed": "1"},
        headers=HTMX,
    ).content.decode()
    assert "Tombstoned 3 memories." in html
    batch = MemoryEvent.objects.filter(action="tombstoned").first().batch
    undo_url = f"/batches/{batch}/undo/?next=%2Fmemories%2F%3Fkind%3Dnote"
    assert f'hx-get="{undo_url}" data-action="undo">Undo</a>' in html

    asked = alice_client.get(undo_url, headers={"HX-Request": "true"})
    assert asked["HX-Retarget"] == "#confirm-dialog"
    assert "Restores 3 memories it tombstoned." in asked.content.decode()

    done = alice_client.post(undo_url, {"confirmed": "1"}, headers={"HX-Request": "true"})
    assert done["HX-Redirect"] == "/memories/?kind=note"
    assert Memory.objects.filter(status="active").count() == 3


def test_a_bulk_action_without_javascript_says_what_it_did_with_an_undo_link(alice_client, notes):
    response = alice_client.post(
        "/memories/bulk/?kind=note", {"action": "set_tier", "tier": "core", "ids": ids(notes), "confirmed": "1"}
    )
    page = alice_client.get(response["Location"]).content.decode()
    assert "Moved 3 memories to core. <a" in page and 'data-action="undo">Undo</a>' in page


def test_a_bulk_action_that_would_change_nothing_is_not_asked(alice_client, notes):
    for note in notes:
        note.pin(actor="test")
    html = alice_client.post("/memories/bulk/", {"action": "pin", "ids": ids(notes)}, headers=HTMX).content.decode()
    assert "Pinned 0 memories (3 already pinned)." in html and "data-confirm" not in html
    assert 'data-action="undo"' not in html
