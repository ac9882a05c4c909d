"""The memory list in a real browser: row actions, history, and what happens when things fail."""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def test_pinning_and_tombstoning_update_the_row_and_show_in_the_history(signed_in, live_server, make_memory):
    page = signed_in
    memory = make_memory("怎么回事", kind="note")

    page.goto(f"{live_server.url}/memories/")
    row = page.locator(f"#row-{memory.pk}")
    row.get_by_role("button", name="Pin").click()
    expect(row.locator('[data-pinned="yes"]')).to_be_visible()

    row.locator("summary", has_text="Tombstone").click()
    row.get_by_label("Reason").fill("chit-chat, not knowledge")
    row.get_by_role("button", name="Tombstone", exact=True).click()
    expect(row).to_have_count(0)  # tombstoned, it leaves the list of active memories
    page.locator("#alerts [data-left-list]").click()  # the message links it
    expect(page.get_by_role("button", name="Restore")).to_be_visible()
    history = page.locator("#history")
    expect(history.locator(".event")).to_have_count(3)
    expect(history.locator(".event").nth(0)).to_contain_text("tombstoned")
    expect(history.locator(".event").nth(0)).to_contain_text("Reason: chit-chat, not knowledge")
    expect(history.locator(".event").nth(0)).to_contain_text("user:alice")
    expect(history.locator(".event").nth(1)).to_contain_text("pinned")


def test_an_expired_session_during_htmx_requests_shows_the_unauthorized_state(
    signed_in, live_server, make_memory, screenshot
):
    page = signed_in
    memory = make_memory("Prefers terse answers.")
    page.goto(f"{live_server.url}/memories/")
    Session.objects.all().delete()

    # A row action: the state lands in the alerts region, the row stays as it was.
    page.locator(f"#row-{memory.pk}").get_by_role("button", name="Pin").click()
    alert = page.locator('#alerts [data-state="unauthorized"]')
    expect(alert).to_be_visible()
    expect(page.locator(f"#row-{memory.pk}")).to_be_visible()

    # A filter: the results panel shows the state, with a sign-in link back to this page.
    page.locator("#id_kind").select_option("fact")
    panel = page.locator('#results [data-state="unauthorized"]')
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("Your session has expired")
    sign_in = panel.get_by_role("link", name="Sign in")
    expect(sign_in).to_have_attribute("href", "/accounts/login/?next=%2Fmemories%2F")
    expect(page.locator("#filters")).to_be_visible()
    expect(page.locator("nav.nav")).to_contain_text("Memories")
    expect(page.locator('input[name="password"]')).to_have_count(0)  # no login page swapped in
    screenshot("unauthorized-panel")

    sign_in.click()
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=%2Fmemories%2F")


def test_a_proxy_error_or_a_dropped_connection_shows_unavailable_client_side_with_retry(
    signed_in, live_server, make_memory
):
    page = signed_in
    make_memory("Runs 1000 RTX 4070s.", kind="fact")
    page.goto(f"{live_server.url}/memories/")
    bad_gateway = "<html><body><h1>502 Bad Gateway</h1><script>window.pwned = 1</script></body></html>"
    page.route("**/memories/?kind=*", lambda route: route.fulfill(status=502, body=bad_gateway))

    page.locator("#id_kind").select_option("fact")

    panel = page.locator('#results [data-state="unavailable"]')
    expect(panel).to_contain_text("status 502")
    expect(panel).not_to_contain_text("Bad Gateway</h1>")
    assert page.evaluate("window.pwned") is None

    page.unroute("**/memories/?kind=*")
    page.route("**/memories/?kind=*", lambda route: route.abort())
    panel.get_by_role("button", name="Retry").click()
    expect(page.locator("#results")).to_contain_text("could not be reached")

    page.unroute("**/memories/?kind=*")
    page.locator('#results [data-state="unavailable"]').get_by_role("button", name="Retry").click()
    expect(page.locator("#results")).to_contain_text("Runs 1000 RTX 4070s.")


def test_filters_update_the_results_and_the_address_bar(signed_in, live_server, make_memory):
    page = signed_in
    make_memory("Prefers terse answers.", kind="preference")
    make_memory("Runs 1000 RTX 4070s.", kind="fact")
    page.goto(f"{live_server.url}/memories/")

    page.locator("#id_kind").select_option("fact")

    expect(page).to_have_url(f"{live_server.url}/memories/?kind=fact")
    expect(page.locator("#results tbody tr")).to_have_count(1)
    expect(page.locator("#results")).to_contain_text("Runs 1000 RTX 4070s.")


def test_a_late_answer_keeps_what_was_typed_and_a_sort_header_shows_in_the_form(signed_in, live_server, make_memory):
    page = signed_in
    make_memory("Prefers terse answers.", kind="preference", importance=0.9)
    make_memory("Runs 1000 RTX 4070s.", kind="fact", importance=0.4)
    make_memory("Releases go out on Thursdays.", kind="fact", importance=0.8)
    page.goto(f"{live_server.url}/memories/")
    held = []
    page.route("**/memories/?kind=fact", lambda route: held.append(route))

    page.locator("#id_kind").select_option("fact")
    page.wait_for_function("() => document.querySelector('#filters').classList.contains('htmx-request')")
    page.locator("#id_q").fill("thursdays")
    assert len(held) == 1
    held[0].continue_()

    expect(page).to_have_url(f"{live_server.url}/memories/?kind=fact")
    expect(page.locator("#results tbody tr")).to_have_count(2)
    expect(page.locator("#id_q")).to_have_value("thursdays")

    page.unroute("**/memories/?kind=fact")
    page.locator("#id_q").fill("")
    page.locator("#id_q").press("Enter")
    expect(page).to_have_url(f"{live_server.url}/memories/?kind=fact")
    page.locator("#results a.sort", has_text="Importance").click()
    expect(page).to_have_url(f"{live_server.url}/memories/?kind=fact&sort=-importance")
    expect(page.locator("#id_sort")).to_have_value("-importance")
    expect(page.locator("#id_kind")).to_have_value("fact")
    expect(page.locator("#results tbody tr").first).to_contain_text("Thursdays")
