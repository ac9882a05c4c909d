"""The memory forms and pages explain themselves, in a real browser: labels in words, no kind
chosen for the user, the same pinned control on create and edit, human dates with the exact time
on hover, and one way to show an empty value."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memoryui.models import Memory

pytestmark = pytest.mark.e2e

EXACT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+$")  # to the second, with the zone
RAW_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def pinned_choices(page) -> list[str]:
    return page.locator('[data-field="pinned"] input[type="radio"]').evaluate_all(
        "inputs => inputs.map(i => i.closest('label').textContent.trim() + (i.checked ? ' (checked)' : ''))"
    )


@pytest.mark.parametrize("width", [1400, 1024])
def test_the_create_form_chooses_no_kind_and_offers_pinned_by_the_rules(signed_in, live_server, screenshot, width):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/memories/new/")

    expect(page.get_by_label("Kind")).to_have_value("")
    expect(page.get_by_label("Entity key")).to_be_visible()
    expect(page.get_by_label("Expires at")).to_be_visible()
    expect(page.locator("label", has_text="entity_key")).to_have_count(0)
    assert pinned_choices(page) == ["by the rules (checked)", "pinned", "not pinned"]
    screenshot("new")

    page.get_by_label("Scope").fill("agent:main")
    page.locator("#id_text").fill("My name is Lin.")
    page.get_by_role("button", name="Create memory").click()

    expect(page.locator('[data-field="kind"] .error')).to_contain_text("Choose a kind: entity, preference")
    assert not Memory.objects.exists()
    screenshot("no-kind")

    page.get_by_label("Kind").select_option("entity")
    page.get_by_label("not pinned").check()
    page.get_by_role("button", name="Create memory").click()

    page.wait_for_url(re.compile(r".*/memories/[0-9a-f-]{36}/$"))
    memory = Memory.objects.get()
    assert (memory.kind, memory.tier, memory.pinned) == ("entity", "core", False)  # the choice overrode the rules


def test_the_edit_form_has_the_same_pinned_control_without_the_rules(signed_in, live_server, make_memory, screenshot):
    page = signed_in
    memory = make_memory("My name is Lin.", kind="entity")  # pinned by the rules

    page.goto(f"{live_server.url}/memories/{memory.pk}/edit/")

    assert pinned_choices(page) == ["pinned (checked)", "not pinned"]
    expect(page.get_by_label("Kind")).to_have_value("entity")
    screenshot("edit")
    page.get_by_label("not pinned").check()
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(f"{live_server.url}{memory.get_absolute_url()}")
    memory.refresh_from_db()
    assert memory.pinned is False


@pytest.mark.parametrize("width", [1400, 1024])
def test_dates_are_human_with_the_exact_time_on_hover_and_empty_is_one_dash(
    signed_in, live_server, make_memory, screenshot, width
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    memory = make_memory("Prefers tea.", expires_at="2030-01-01T00:00:00Z")
    memory.tombstone("a test", actor="test")
    memory.restore(actor="test")

    page.goto(f"{live_server.url}{memory.get_absolute_url()}")

    for field in ("created_at", "updated_at", "expires_at"):
        moment = page.locator(f'dd[data-field="{field}"] time')
        expect(moment).to_have_attribute("title", EXACT)
        expect(moment).not_to_have_text(RAW_ISO)
    expect(page.locator('dd[data-field="expires_at"] time')).to_have_text("1 Jan 2030, 00:00")
    expect(page.locator('dd[data-field="entity_key"]')).to_have_text("—")

    history = page.locator("#history")
    tombstoned = history.locator('[data-action="tombstoned"]')
    expect(tombstoned.locator("tr", has_text="Tombstoned at").locator(".diff-after time")).to_have_attribute(
        "title", EXACT
    )
    restored = history.locator('[data-action="restored"]')
    expect(restored.locator("tr", has_text="Tombstoned at").locator(".diff-after")).to_have_text("—")
    expect(restored.locator("tr", has_text="Tombstone reason").locator(".diff-after")).to_have_text("—")
    expect(history).not_to_contain_text("(empty)")
    expect(history).not_to_contain_text(RAW_ISO)
    expect(history.locator("[data-event-time] time").first).to_have_attribute("title", EXACT)
    screenshot("detail")
