"""The dashboard in a real browser: stats and bars, a failing stats backend, index health and repair."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from playwright.sync_api import expect

from memoryui.models import IndexOutbox, Memory, MemoryQuerySet
from searchindex import indexes as search_indexes

from .looks import at_both_widths

pytestmark = pytest.mark.e2e


def test_dashboard_renders_stats_and_bars_that_match_the_database(signed_in, live_server, make_memory):
    page = signed_in
    for i in range(3):
        make_memory(f"fact {i}", kind="fact", scope="agent:main")
    make_memory("Name is Lin.", kind="entity", scope="agent:test-w")
    make_memory("chit-chat", kind="note").tombstone("noise", actor="test")

    page.goto(f"{live_server.url}/")

    stats = Memory.objects.stats()
    expect(page.locator('[data-stat="total"]')).to_have_text(str(stats["total"]))
    expect(page.locator('[data-stat="pinned"]')).to_have_text(str(stats["pinned"]))
    expect(page.locator('[data-stat="tombstoned"]')).to_have_text(str(stats["tombstoned"]))
    kinds = page.locator('[data-breakdown="kind"]')
    expect(kinds.locator('[data-count="fact"]')).to_have_text("3")
    expect(kinds.locator('[data-count="relationship"]')).to_have_text("0")
    fact_bar = kinds.locator("tr", has_text="fact").locator(".bar")
    entity_bar = kinds.locator("tr", has_text="entity").locator(".bar")
    assert fact_bar.bounding_box()["width"] > 2.5 * entity_bar.bounding_box()["width"] > 0
    expect(page.locator('[data-breakdown="scope"] a', has_text="agent:test-w")).to_have_attribute(
        "href", "/memories/?scope=agent%3Atest-w"
    )


def test_a_failing_stats_backend_shows_unavailable_and_retry_brings_the_data_back(
    signed_in, live_server, make_memory, monkeypatch
):
    page = signed_in
    make_memory("Prefers terse answers.")
    monkeypatch.setattr(
        MemoryQuerySet, "stats", lambda self: (_ for _ in ()).throw(OperationalError("database is locked"))
    )

    page.goto(f"{live_server.url}/")

    panel = page.locator("#stats-panel")
    expect(panel.locator('[data-state="unavailable"]')).to_be_visible()
    expect(panel).to_contain_text("Database unavailable")
    expect(panel).to_contain_text("status 503")
    expect(panel).to_contain_text("database is locked")
    expect(page.locator("#activity")).to_contain_text("created")  # the rest of the page works
    retry = panel.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()

    monkeypatch.undo()
    retry.click()

    expect(panel.locator('[data-stat="total"]')).to_have_text("1")
    expect(panel.locator('[data-state="unavailable"]')).to_have_count(0)
    assert page.url == f"{live_server.url}/"


def test_index_health_verify_then_repair_in_the_browser(signed_in, live_server, indexes, make_memory, screenshot):
    page = signed_in
    make_memory("Deploys go out on Fridays.", kind="procedure")  # committed and indexed (tasks run inline)
    lost = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    search_indexes.get_index("vector").delete([str(lost.pk)])  # the index write that a crash lost
    search_indexes.get_index("bm25").delete([str(lost.pk)])
    IndexOutbox.objects.all().delete()

    page.goto(f"{live_server.url}/")
    health = page.locator("#index-health")
    expect(health.locator("[data-index-ok]")).to_have_attribute("data-index-ok", "no")
    expect(health.locator('[data-index="bm25"] [data-entries]')).to_have_text("1")

    health.get_by_role("button", name="Verify now").click()
    expect(health.locator("[data-notice]")).to_contain_text("Verified: vector: 1 missing; bm25: 1 missing")
    screenshot("verified")
    health.get_by_role("button", name="Repair").click()
    expect(health.locator("[data-notice]")).to_have_text("Repair finished.")
    expect(health.locator("[data-index-ok]")).to_have_attribute("data-index-ok", "yes")
    expect(health.locator('[data-index="vector"] [data-entries]')).to_have_text("2")
    screenshot("repaired")


def test_measure_recall_fills_in_each_scopes_vector_search_in_the_browser(
    signed_in, live_server, indexes, settings, make_memory
):
    page = signed_in
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 12
    settings.MEMORYUI_VECTOR_RECALL_TARGET = 0.97
    for n in range(14):
        make_memory(f"Release note {n}: the build number is {n * 11}.", kind="fact", scope="agent:main")
    make_memory("Name is Lin.", kind="entity", scope="agent:ops-assistant")

    page.goto(f"{live_server.url}/")
    graphs = page.locator("#index-health [data-graphs]")
    graphs.locator("summary").click()
    main = graphs.locator('[data-graph="agent:main"]')
    expect(main.locator("[data-measured]")).to_have_text("not measured")
    expect(graphs.locator('[data-graph="agent:ops-assistant"]')).to_contain_text("exactly")

    page.locator("#index-health").get_by_role("button", name="Measure recall").click()

    health = page.locator("#index-health")
    expect(health.locator("[data-notice]")).to_have_text("Measuring the vector recall finished.")
    health.locator("[data-graphs] summary").click()
    ef = settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH
    expect(health.locator('[data-graph="agent:main"] [data-measured]')).to_contain_text(
        f"1.000 at ef_search {ef}, 14 vectors"
    )
    at_both_widths(page, "dashboard-vector-scopes")
