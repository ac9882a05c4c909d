"""Small things a person meets on the pages: the icon, a row action's message, count and columns,
a saved trace's link, the duplicates' empty state at the loosest threshold, the demo's transcripts
and every note of a clean-up preview."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hygiene import cleanup
from memoryui.models import Memory, Transcript
from recall.models import RecallTrace
from web import demo

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

PAGES = ("/", "/memories/", "/recall/", "/transcripts/", "/duplicates/", "/cleanup/", "/tasks/")


def test_no_page_asks_for_its_icon_in_vain(signed_in, live_server):
    page = signed_in
    answers: list[tuple[str, int]] = []
    page.on("response", lambda response: answers.append((response.url, response.status)))
    for path in PAGES:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert icon.endswith(".svg")
    assert [(url, status) for url, status in answers if status == 404] == []
    assert [status for url, status in answers if url.endswith(icon)] == [200] * len(PAGES)  # each page asked

    asked = page.goto(f"{live_server.url}/favicon.ico")  # what a browser asks whatever the page links
    assert asked.status == 200 and asked.url.endswith(icon)
    assert "<svg" in asked.text()
    assert [(url, status) for url, status in answers if status == 404] == []
    page.goto(f"{live_server.url}/")
    at_both_widths(page, "favicon-dashboard")


def _header_lefts(page) -> list[float]:
    return page.locator("table.memories thead th").evaluate_all(
        "cells => cells.map(cell => Math.round(cell.getBoundingClientRect().left))"
    )


def test_a_row_action_says_what_it_did_keeps_the_columns_and_updates_the_count(signed_in, live_server, make_memory):
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    texts = [
        "The user prefers short answers.",
        "Deploys run every Tuesday at 10:00 Beijing time, never on a Friday.",
        "用户的手机号是 186 0000 1234。",
        "Staging is reset every Sunday night.",
    ]
    kinds = ("preference", "fact", "entity", "fact")
    memories = [make_memory(text, kind=kind) for text, kind in zip(texts, kinds, strict=True)]
    for memory in memories:  # the entity is pinned on write; none is pinned here, so a pin widens the column
        Memory.objects.filter(pk=memory.pk).update(pinned=False)
    page.goto(f"{live_server.url}/memories/")
    count = page.locator("#results-count")
    expect(count).to_have_attribute("data-count", "4")
    before = _header_lefts(page)

    pinned = memories[1]
    page.locator(f"#row-{pinned.pk}").get_by_role("button", name="Pin", exact=True).click()
    expect(page.locator(f"#row-{pinned.pk} [data-pinned='yes']")).to_be_visible()
    message = page.locator("#alerts [data-message]")
    expect(message).to_contain_text("Pinned: Deploys run every Tuesday")
    assert _header_lefts(page) == before
    expect(count).to_have_attribute("data-count", "4")
    at_both_widths(page, "row-action-pinned")

    page.set_viewport_size({"width": 1400, "height": 900})
    before = _header_lefts(page)
    gone = memories[3]
    row = page.locator(f"#row-{gone.pk}")
    row.locator("summary", has_text="Tombstone").click()
    row.get_by_label("Reason").fill("outdated")
    row.get_by_role("button", name="Tombstone", exact=True).click()
    expect(message).to_contain_text("Tombstoned: Staging is reset every Sunday night.")
    expect(message).not_to_contain_text("Pinned")
    expect(page.locator(f"#row-{gone.pk}")).to_have_count(0)  # the list shows active memories
    expect(count).to_have_attribute("data-count", "3")
    expect(count).to_contain_text("3 memories")
    assert _header_lefts(page) == before
    assert Memory.objects.get(pk=gone.pk).status == "tombstoned"
    at_both_widths(page, "row-action-tombstoned")


def test_saving_a_run_as_a_trace_links_the_trace_and_keeps_the_playground(signed_in, live_server, indexes,
                                                                          make_memory):  # fmt: skip
    make_memory("Escalation path for article-list-query: page #ata-oncall.", kind="relationship")
    page = signed_in
    page.goto(f"{live_server.url}/recall/?q=article-list-query+escalation&scope=agent:main")
    run = page.locator("#run")
    expect(run.locator("[data-block]")).to_be_visible()
    shown_block = run.locator("[data-block]").inner_text()
    url = page.url
    page.locator("#trace-note").fill("kept for later")
    page.get_by_role("button", name="Save as trace").click()

    link = page.locator("#alerts [data-message] a[data-saved-trace]")
    expect(link).to_be_visible()
    expect(page.locator("#alerts [data-message]")).to_contain_text("Trace saved.")
    trace = RecallTrace.objects.get()
    assert link.get_attribute("href") == trace.get_absolute_url()
    assert page.url == url  # the playground as it was: the run, the note
    assert run.locator("[data-block]").inner_text() == shown_block
    expect(page.locator("#trace-note")).to_have_value("kept for later")
    at_both_widths(page, "trace-saved")

    link.click()
    page.wait_for_url(f"{live_server.url}{trace.get_absolute_url()}")
    expect(page.locator("[data-trace-note]")).to_have_text("kept for later")


def test_the_empty_duplicates_page_says_what_is_true_at_the_loosest_threshold(signed_in, live_server, indexes,
                                                                              make_memory):  # fmt: skip
    make_memory("The user prefers short answers.", scope="agent:tidy")
    page = signed_in
    page.goto(f"{live_server.url}/duplicates/?scope=agent:tidy")
    empty = page.locator('#duplicates [data-state="empty"]')
    expect(empty).to_contain_text("Move the slider down")
    expect(empty.locator("[data-at-loosest]")).to_have_count(0)
    at_both_widths(page, "duplicates-empty")

    page.goto(f"{live_server.url}/duplicates/?scope=agent:tidy&threshold=0.9")
    expect(empty).not_to_contain_text("Move the slider down")
    expect(empty.locator("[data-at-loosest]")).to_contain_text("Even at 0.9, the loosest threshold the slider offers")
    expect(empty.get_by_role("link", name="clean-up")).to_have_attribute("href", "/cleanup/?scope=agent%3Atidy")
    at_both_widths(page, "duplicates-empty-loosest")


def test_the_demo_has_two_transcripts_and_shows_the_open_tool_exchange(signed_in, live_server):
    demo.seed_clean()
    demo.seed_clean()  # seeding again adds nothing
    assert Transcript.objects.count() == 2
    page = signed_in
    page.goto(f"{live_server.url}/transcripts/")
    for transcript in demo.DEMO_TRANSCRIPTS:
        expect(page.get_by_role("link", name=transcript["title"])).to_be_visible()
    at_both_widths(page, "demo-transcripts")

    page.get_by_role("link", name="gpu-node-17 keeps rebooting").click()
    open_call = page.locator("tr[data-message]", has=page.locator("[data-trimmed]"))
    expect(open_call).to_have_count(1)  # the last message: the call with no result
    expect(open_call).to_have_attribute("data-message", "5")
    expect(open_call).to_contain_text("mcp__ops__drain-node")
    expect(page.locator("[data-in-flight]").first).to_be_visible()
    at_both_widths(page, "demo-transcript-open-exchange")

    page.goto(f"{live_server.url}/transcripts/")
    page.get_by_role("link", name="Onboarding: name, contact and the weekly meeting").click()
    expect(page.locator("[data-trimmed]")).to_have_count(0)


def test_a_clean_up_preview_shows_every_note_on_request(signed_in, live_server, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = None
    demo.seed_polluted()
    page = signed_in
    page.goto(f"{live_server.url}/cleanup/?scope=agent:main&preview=1")
    page.get_by_role("button", name="Apply step 1").click()  # the backup: it lists no notes
    page.locator('#confirm-dialog [data-action="confirm"]').click()
    expect(page.locator('[data-step="snapshot"]')).to_have_attribute("data-state", "done", timeout=30_000)

    page.goto(f"{live_server.url}/cleanup/?scope=agent:main&preview=1")
    preview = page.locator('[data-preview="internal"]')
    notes = len(cleanup.run_step("agent:main", "internal", dry_run=True, actor="test").actions)
    assert notes > 12
    summary = preview.locator("[data-preview-summary]").inner_text()
    rows = preview.locator("[data-examples] tbody tr")
    expect(rows).to_have_count(12)
    expect(preview.locator("[data-examples-shown]")).to_contain_text(f"Showing 12 of {notes} notes.")
    at_both_widths(page, "cleanup-preview-some")

    preview.get_by_role("link", name=f"Show all {notes}").click()
    expect(rows).to_have_count(notes)
    expect(preview.locator("[data-examples-shown]")).to_have_text(f"All {notes} notes.")
    assert preview.locator("[data-preview-summary]").inner_text() == summary  # the counts stay as they were
    assert "all=1" in page.url
    at_both_widths(page, "cleanup-preview-all")
