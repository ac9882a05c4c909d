"""The small things, in a real browser: the activity pill, the index buttons, the back office at
1400 px, the way back from the API docs, and copying a new token's key."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memoryui.models import ApiToken, IndexCheck, IndexOutbox
from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.e2e

LONG = (
    "When the ata article-list-query tool returns a 500 for a page past ten, switch to the cursor "
    "parameter instead of the page number and retry once."
)


@pytest.mark.parametrize("width", [1400, 1024])
def test_the_activity_pill_stays_one_line_beside_a_two_line_item(
    signed_in, live_server, make_memory, screenshot, width
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    make_memory(LONG, kind="procedure")
    make_memory("Prefers tea.")

    page.goto(f"{live_server.url}/")

    rows = page.locator("#activity li")
    expect(rows).to_have_count(2)
    long_row = rows.filter(has_text="article-list-query")
    link = long_row.locator("a").first.bounding_box()
    pill = long_row.locator(".badge").bounding_box()
    short_pill = rows.filter(has_text="Prefers tea.").locator(".badge").bounding_box()
    assert link["height"] > 1.8 * pill["height"], "the item beside the pill takes two lines or more"
    assert pill["height"] == pytest.approx(short_pill["height"], abs=1)  # a pill, not a blob
    assert pill["y"] == pytest.approx(link["y"], abs=4)  # at the top of its row
    screenshot("activity")


def test_repair_is_primary_only_when_out_of_step_and_rebuild_asks_first(
    signed_in, live_server, indexes, make_memory, screenshot
):
    page = signed_in
    make_memory("Deploys go out on Fridays.", kind="procedure")  # indexed at once: tasks run inline

    page.goto(f"{live_server.url}/")
    health = page.locator("#index-health")
    expect(health.locator("[data-index-ok]")).to_have_attribute("data-index-ok", "yes")
    repair = health.locator('[data-action="repair"]')
    rebuild = health.locator('[data-action="rebuild"]')
    expect(repair).not_to_have_class(re.compile(r"\bbtn-primary\b"))
    expect(rebuild).to_have_class(re.compile(r"\bbtn-danger-outline\b"))
    assert rebuild.evaluate("b => getComputedStyle(b).borderTopStyle") == "solid"  # a button, not text
    screenshot("in-step")

    rebuild.click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Rebuild both search indexes?")
    expect(dialog).to_contain_text("the one active memory is embedded and indexed anew")
    screenshot("rebuild-asks")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert not IndexCheck.objects.filter(action="rebuild").exists()

    rebuild.click()
    dialog.get_by_role("button", name="Rebuild the indexes").click()
    expect(health.locator("[data-notice]")).to_have_text("Rebuild finished.")
    assert IndexCheck.objects.filter(action="rebuild", ok=True).exists()

    waiting = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    IndexOutbox.objects.create(memory_id=waiting.pk)  # a change still waiting to reach the indexes
    page.reload()
    expect(health.locator("[data-index-ok]")).to_have_attribute("data-index-ok", "no")
    expect(repair).to_have_class(re.compile(r"\bbtn-primary\b"))
    screenshot("waiting")


def test_the_admin_says_memories_and_its_memory_list_fits_1400_px(signed_in, live_server, make_memory, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    for i, kind in enumerate(("project_state", "relationship", "procedure")):  # the widest kinds
        make_memory(f"{LONG} ({i})", kind=kind, scope=f"agent:ops-lead-{'x' * 60}-{i}")
    url = make_memory("https://example.com/" + "a" * 180, kind="fact", entity_key="url:" + "b" * 120)
    url.tombstone("a link, not knowledge", actor="test")

    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#content-main")).to_contain_text("Memories")
    expect(page.locator("#content-main")).to_contain_text("Index outbox entries")
    expect(page.locator("#content-main")).not_to_contain_text("Memorys")
    screenshot("index")

    page.goto(f"{live_server.url}/admin/memoryui/memory/")
    expect(page.locator("#result_list tbody tr")).to_have_count(4)
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide in a {widths[1]} px window"
    # The admin scrolls a wide table inside its own box: every column must show without that too.
    table = page.evaluate(
        "() => { const box = document.querySelector('#changelist .results');"
        " return [box.scrollWidth, box.clientWidth]; }"
    )
    columns = page.eval_on_selector_all("#result_list thead th", "ths => ths.map(t => [t.className, t.offsetWidth])")
    assert table[0] <= table[1], f"the table is {table[0]} px wide in its {table[1]} px box: {columns}"
    expect(page.locator("#result_list th.column-updated")).to_be_in_viewport()
    expect(page.locator("#result_list del[title=tombstoned]")).to_have_count(1)  # status without a column
    screenshot("memories")


def test_the_api_docs_link_back_to_the_dashboard(signed_in, live_server, screenshot):
    page = signed_in

    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info")).to_be_visible()
    back = page.locator('[data-action="back-to-app"]')
    expect(back).to_be_visible()
    screenshot("docs")
    page.screenshot(path=str(SCREENSHOTS / "test_the_api_docs_link_back_to_the_dashboard-top.png"))  # the bar, legible

    back.click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator("h1")).to_contain_text("Dashboard")


def _create_token(page, live_server) -> str:
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_label("Name").fill("ci")
    page.get_by_label("Scopes").fill("agent:main")
    page.get_by_role("button", name="Create token").click()
    key = page.locator("#new-token-key").inner_text().strip()
    assert key.startswith(ApiToken.objects.get(name="ci").key_prefix)
    return key


def test_the_copy_button_copies_the_new_token_key(signed_in, live_server, screenshot):
    page = signed_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    key = _create_token(page, live_server)

    page.get_by_role("button", name="Copy").click()

    expect(page.locator('[data-copy-status="new-token-key"]')).to_have_text("Copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == key
    screenshot("copied")


def test_without_the_clipboard_the_copy_button_selects_the_key(signed_in, live_server, screenshot):
    page = signed_in
    # What a browser does where the Clipboard API is refused (a plain-http host, a denied permission).
    page.add_init_script(
        "Object.defineProperty(navigator, 'clipboard', "
        "{value: {writeText: () => Promise.reject(new Error('denied'))}, configurable: true});"
    )
    key = _create_token(page, live_server)

    page.get_by_role("button", name="Copy").click()

    expect(page.locator('[data-copy-status="new-token-key"]')).to_have_text("Selected: press Ctrl+C (⌘C) to copy.")
    assert page.evaluate("() => window.getSelection().toString().trim()") == key
    screenshot("selected")
