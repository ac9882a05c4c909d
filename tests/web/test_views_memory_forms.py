"""Create and edit: the write path and memory.edit() validate; their errors land on the field."""

from __future__ import annotations

import json

import pytest

from memoryui.models import Memory

pytestmark = pytest.mark.django_db


def create(client, **fields):
    data = {"scope": "agent:main", "kind": "preference", "text": "Prefers terse answers.", "source": "manual"}
    data.update(fields)
    return client.post("/memories/new/", data)


def edit_data(memory: Memory, **changes) -> dict:
    data = {
        "scope": memory.scope,
        "kind": memory.kind,
        "text": memory.text,
        "tier": memory.tier,
        "importance": memory.importance,
        "confidence": memory.confidence,
        "source": memory.source,
        "entity_key": memory.entity_key or "",
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else "",
        "metadata": json.dumps(memory.metadata),
    }
    data["pinned"] = "yes" if memory.pinned else "no"
    data.update(changes)
    return data


def field_error(html: str, field: str) -> str:
    marker = f'data-field="{field}"'
    block = html[html.index(marker) :]
    block = block[: block.index("</div>")]
    assert 'class="error"' in block, f"no error shown on {field}"
    return block


def test_the_create_page_renders_the_form(alice_client):
    html = alice_client.get("/memories/new/").content.decode()

    assert '<form method="post"' in html
    for name in ("scope", "kind", "text", "tier", "entity_key", "metadata"):
        assert f'name="{name}"' in html


def test_create_goes_through_the_write_path_and_redirects_to_the_memory(alice_client):
    response = create(alice_client, scope="main", kind="entity", text="My name is Lin.")

    memory = Memory.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/memories/{memory.pk}/"
    assert memory.scope == "agent:main"  # normalized
    assert (memory.tier, memory.pinned) == ("core", True)  # placed by the rules
    assert memory.events.get().actor == "user:alice"


def test_a_duplicate_is_merged_and_the_user_is_told_so(alice_client, make_memory):
    existing = make_memory("Prefers terse answers.")

    response = create(alice_client, text="  prefers TERSE answers.  ")

    assert response["Location"] == f"/memories/{existing.pk}/"
    assert Memory.objects.count() == 1
    page = alice_client.get(response["Location"]).content.decode()
    assert "Merged into an existing memory (duplicate by exact)" in page


def test_a_duplicate_entity_key_is_merged_by_entity_key(alice_client, make_memory):
    existing = make_memory("Phone is 186.", kind="entity", entity_key="phone:186")

    response = create(alice_client, kind="entity", text="My phone: 186", entity_key="phone:186")

    assert response["Location"] == f"/memories/{existing.pk}/"
    assert "duplicate by entity key" in alice_client.get(response["Location"]).content.decode()


@pytest.mark.parametrize(
    ("fields", "field", "label", "reason"),
    [
        ({"scope": "planet:mars"}, "scope", "Scope", "unknown scope type"),
        ({"importance": "1.5"}, "importance", "Importance", "must be between 0 and 1"),
        ({"entity_key": "no colon"}, "entity_key", "Entity key", "entity_key must look like type:value"),
        ({"expires_at": "2030-01-01T00:00:00"}, "expires_at", "Expires at", "has no time zone"),
        ({"text": "   "}, "text", "Text", "This field is required."),
        ({"kind": "gossip"}, "kind", "Kind", "Select a valid choice."),
        ({"kind": ""}, "kind", "Kind", "Choose a kind: entity, preference, fact, project state,"),
    ],
)
def test_invalid_fields_are_shown_next_to_the_field_with_the_reason(alice_client, fields, field, label, reason):
    response = create(alice_client, **fields)

    html = response.content.decode()
    assert response.status_code == 400
    block = field_error(html, field)
    assert f"<b>{label}</b>:" in block and reason in block
    assert Memory.objects.count() == 0


def test_invalid_metadata_json_gets_a_clear_error(alice_client):
    response = create(alice_client, metadata='{"tags": [ops]}')

    block = field_error(response.content.decode(), "metadata")
    assert "Invalid JSON: Expecting value (line 1, column 11)" in block


def test_metadata_must_be_a_json_object(alice_client):
    block = field_error(create(alice_client, metadata="[1, 2]").content.decode(), "metadata")

    assert "must be a JSON object" in block


def test_several_errors_are_reported_at_once(alice_client):
    html = create(alice_client, metadata="{", scope="planet:mars").content.decode()

    field_error(html, "metadata")
    field_error(html, "scope")


def test_the_edit_form_is_prefilled(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.", metadata={"tags": ["style"]})

    html = alice_client.get(f"/memories/{memory.pk}/edit/").content.decode()

    assert "Prefers terse answers.</textarea>" in html
    assert "&quot;tags&quot;" in html
    assert 'name="reason"' in html


def test_edit_applies_the_changes_with_one_event_and_the_reason(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.post(
        f"/memories/{memory.pk}/edit/",
        edit_data(memory, text="Prefers terse answers in English.", tier="core", reason="clarified"),
    )

    assert response.status_code == 302 and response["Location"] == f"/memories/{memory.pk}/"
    memory.refresh_from_db()
    assert (memory.text, memory.tier) == ("Prefers terse answers in English.", "core")
    event = memory.events.get(action="edited")
    assert (event.actor, event.reason) == ("user:alice", "clarified")
    assert set(event.before) == {"text", "tier"}


def test_edit_can_clear_the_entity_key(alice_client, make_memory):
    memory = make_memory("Phone is 186.", kind="entity", entity_key="phone:186")

    alice_client.post(f"/memories/{memory.pk}/edit/", edit_data(memory, entity_key=""))

    memory.refresh_from_db()
    assert memory.entity_key is None


def test_an_entity_key_taken_by_another_active_memory_is_an_error_on_entity_key(alice_client, make_memory):
    make_memory("Phone is 186.", kind="entity", entity_key="phone:186")
    other = make_memory("Phone is 139.", kind="entity", entity_key="phone:139")

    response = alice_client.post(f"/memories/{other.pk}/edit/", edit_data(other, entity_key="phone:186"))

    assert response.status_code == 400
    block = field_error(response.content.decode(), "entity_key")
    assert "another active memory in agent:main already has entity_key" in block
    other.refresh_from_db()
    assert other.entity_key == "phone:139"


def test_edit_validation_errors_are_shown_on_the_field(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.post(f"/memories/{memory.pk}/edit/", edit_data(memory, confidence="2"))

    assert "must be between 0 and 1, got 2" in field_error(response.content.decode(), "confidence")
