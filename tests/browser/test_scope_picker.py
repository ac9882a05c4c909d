"""The scope picker in the top bar: scopes with counts, a pick every page honours, and a mistyped
scope answered with the closest one."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .looks import at_both_widths

pytestmark = pytest.mark.e2e


@pytest.fixture
def store(make_memory):
    for n in range(3):
        make_memory(f"Assistant fact number {n}: the user's desk is on floor {n + 2}.", scope="agent:assistant")
    make_memory("Releases ship on Tuesdays after the smoke tests.", scope="agent:ops-bot", kind="procedure")
    make_memory("Likes green tea.", scope="user:42")


def test_the_picker_lists_scopes_with_counts_and_every_page_opens_on_the_pick(signed_in, live_server, store):
    page = signed_in
    page.goto(f"{live_server.url}/memories/")
    picker = page.locator("[data-scope-picker]")
    expect(picker.locator("[data-scope-current]")).to_have_text("all scopes")
    # A page that works on one scope opens on the largest, and the top bar says so.
    page.goto(f"{live_server.url}/duplicates/")
    expect(picker.locator("[data-scope-current]")).to_have_text("agent:assistant")
    picker.locator("summary").click()
    options = picker.locator("[data-scope-option]")
    expect(options).to_have_count(4)  # all scopes, then the three by size
    expect(options.nth(1)).to_contain_text("agent:assistant")
    expect(options.nth(1)).to_contain_text("3")
    at_both_widths(page, "scope-picker-open")

    # The menu stays on top of the page and inside the window.
    box, window = picker.locator(".scope-popover").bounding_box(), page.viewport_size
    assert box["x"] >= 0 and box["x"] + box["width"] <= window["width"]

    # Escape closes it and gives the focus back; an outside click closes it too.
    page.keyboard.press("Escape")
    expect(picker).not_to_have_attribute("open", "")
    expect(picker.locator("summary")).to_be_focused()
    picker.locator("summary").click()
    expect(options.first).to_be_visible()
    page.locator("h1").click()
    expect(options.first).to_be_hidden()

    # A pick reloads the page in that scope, and every other page opens on it.
    picker.locator("summary").click()
    picker.locator('[data-scope-option="agent:ops-bot"]').click()
    expect(page).to_have_url(f"{live_server.url}/duplicates/?scope=agent%3Aops-bot")
    expect(picker.locator("[data-scope-current]")).to_have_text("agent:ops-bot")
    for path in ("/cleanup/", "/recall/"):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("input[name=scope]").first).to_have_value("agent:ops-bot")
    page.goto(f"{live_server.url}/memories/")
    expect(page.locator("#results")).to_contain_text("Releases ship on Tuesdays")
    expect(page.locator("#results")).not_to_contain_text("Likes green tea.")
    at_both_widths(page, "scope-picker-memories-in-the-picked-scope")


def test_the_picker_is_used_by_keyboard(signed_in, live_server, store):
    page = signed_in
    page.goto(f"{live_server.url}/memories/")
    page.locator("[data-scope-picker] summary").focus()
    page.keyboard.press("Enter")
    first = page.locator("[data-scope-option]").first
    expect(first).to_be_focused()  # the menu takes the focus when it arrives
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/memories/?scope=agent%3Aassistant")


def test_a_mistyped_scope_suggests_the_closest(signed_in, live_server, store):
    page = signed_in
    page.goto(f"{live_server.url}/recall/?scope=agent:asistant")
    notice = page.locator("[data-scope-notice]")
    expect(notice).to_contain_text("No active memory is in the scope agent:asistant. Did you mean agent:assistant?")
    at_both_widths(page, "scope-mistyped")
    notice.get_by_role("link", name="agent:assistant").click()
    expect(page.locator("[data-scope-notice]")).to_have_count(0)
    expect(page.locator("input[name=scope]").first).to_have_value("agent:assistant")
