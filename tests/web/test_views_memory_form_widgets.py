"""The memory form explains itself: labels and help from the model, no preselected kind, and the
same pinned control on create and edit ("by the rules" only on create)."""

from __future__ import annotations

import re

import pytest

from memoryui.models import Memory
from web.forms import MemoryForm

pytestmark = pytest.mark.django_db


def radios(html: str, name: str) -> dict[str, bool]:
    """The radio buttons named `name`: value → checked."""
    found = {}
    for tag in re.findall(rf'<input type="radio" name="{name}"[^>]*>', html):
        value = re.search(r'value="([^"]*)"', tag).group(1)
        found[value] = " checked" in tag
    return found


def test_labels_and_help_come_from_the_models_verbose_names_and_help_texts(alice_client):
    html = alice_client.get("/memories/new/").content.decode()

    assert '<label for="id_entity_key">Entity key' in html
    assert '<label for="id_expires_at">Expires at' in html
    assert Memory._meta.get_field("entity_key").help_text in html
    assert ">entity_key<" not in html and ">expires_at<" not in html


def test_the_create_form_has_no_kind_chosen(alice_client):
    html = alice_client.get("/memories/new/").content.decode()

    kind = re.search(r'<select name="kind".*?</select>', html, re.S).group(0)
    assert '<option value="" selected>Choose a kind…</option>' in kind
    assert kind.count(" selected") == 1


def test_leaving_the_kind_unchosen_is_a_clear_error_and_writes_nothing(alice_client):
    response = alice_client.post("/memories/new/", {"scope": "agent:main", "text": "Prefers tea.", "source": "manual"})

    assert response.status_code == 400
    assert "<b>Kind</b>: Choose a kind: entity, preference, fact" in response.content.decode()
    assert not Memory.objects.exists()


def test_pinned_is_the_same_radio_buttons_on_create_and_edit_with_the_rules_only_on_create(alice_client, make_memory):
    memory = make_memory("My name is Lin.", kind="entity")  # pinned by the rules

    created = radios(alice_client.get("/memories/new/").content.decode(), "pinned")
    edited = radios(alice_client.get(f"/memories/{memory.pk}/edit/").content.decode(), "pinned")

    assert created == {"rules": True, "yes": False, "no": False}
    assert edited == {"yes": True, "no": False}


def test_not_pinned_on_create_overrides_the_rules(alice_client):
    alice_client.post(
        "/memories/new/",
        {"scope": "agent:main", "kind": "entity", "text": "My name is Lin.", "source": "manual", "pinned": "no"},
    )

    memory = Memory.objects.get()
    assert (memory.tier, memory.pinned) == ("core", False)


def test_by_the_rules_on_create_pins_an_entity(alice_client):
    alice_client.post(
        "/memories/new/",
        {"scope": "agent:main", "kind": "entity", "text": "My name is Lin.", "source": "manual", "pinned": "rules"},
    )

    assert Memory.objects.get().pinned is True


def test_an_edit_must_say_pinned_or_not(make_memory):
    memory = make_memory("Prefers tea.")
    data = {**MemoryForm.initial_from(memory), "pinned": "rules"}

    form = MemoryForm(data, memory=memory)

    assert not form.is_valid() and "pinned" in form.errors


def test_an_edit_unpins_with_the_radio_button(alice_client, make_memory):
    memory = make_memory("My name is Lin.", kind="entity")

    response = alice_client.post(f"/memories/{memory.pk}/edit/", {**MemoryForm.initial_from(memory), "pinned": "no"})

    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.pinned is False
    assert memory.events.get(action="edited").after == {"pinned": False}


def test_the_expiry_is_shown_to_the_second_and_saving_it_unchanged_records_no_edit(alice_client, make_memory):
    memory = make_memory("Asked about the weather.", kind="note")  # peripheral: expires by the rules
    assert memory.expires_at.microsecond  # the rules' expiry has a fraction of a second

    shown = MemoryForm.initial_from(memory)["expires_at"]
    response = alice_client.post(f"/memories/{memory.pk}/edit/", {**MemoryForm.initial_from(memory), "pinned": "no"})

    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}", shown)
    assert response.status_code == 302
    assert not memory.events.filter(action="edited").exists()
    expires_at = memory.expires_at
    memory.refresh_from_db()
    assert memory.expires_at == expires_at
