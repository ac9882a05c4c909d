"""Messages are shown once: the next thing the user does replaces them (issue: old messages stayed)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def test_an_error_does_not_stay_above_the_next_success(signed_in, live_server, make_memory, screenshot):
    page = signed_in
    memory = make_memory("The user prefers green tea.")
    page.goto(f"{live_server.url}/memories/")

    # A bulk action with nothing selected fails: the error lands in the page's messages.
    page.locator("#bulk-form").get_by_role("button", name="Pin", exact=True).click()
    alerts = page.locator("#alerts")
    expect(alerts.locator('[data-state="invalid"]')).to_be_visible()
    screenshot("error")

    # The next action succeeds: the old error is gone, the row shows the change.
    page.locator(f"#row-{memory.pk}").get_by_role("button", name="Pin").click()
    expect(page.locator(f"#row-{memory.pk}").locator('[data-pinned="yes"]')).to_be_visible()
    expect(alerts.locator('[data-state="invalid"]')).to_have_count(0)
    screenshot("next-success")


def test_a_success_message_is_gone_after_the_next_action(signed_in, live_server, make_memory):
    page = signed_in
    memory = make_memory("The user prefers green tea.")
    page.goto(f"{live_server.url}/memories/{memory.pk}/")

    page.get_by_role("button", name="Pin").click()  # a plain POST: the message is on the next page
    message = page.locator("#alerts [data-message]")
    expect(message).to_contain_text("Pinned: The user prefers green tea.")

    page.get_by_role("region", name="History").get_by_role("link", name="Refresh").click()  # htmx
    expect(message).to_have_count(0)
    page.reload()
    expect(message).to_have_count(0)  # shown once


def test_signing_out_says_so(signed_in, live_server):
    page = signed_in
    page.goto(f"{live_server.url}/")
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#alerts [data-message]")).to_contain_text("You are signed out (alice)")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
