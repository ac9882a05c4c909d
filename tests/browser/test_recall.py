"""The recall playground in a real browser: run, save the trace, reopen it; compare two profiles on a golden set."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from recall.models import GoldenQuery, GoldenSet, RecallProfile, RecallTrace

pytestmark = pytest.mark.e2e

SCHEMA = "Parameter schema and usage reference for article-list-query: page_size int ≤ 50, query string, locale enum."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."


@pytest.fixture
def ata(indexes, make_memory) -> dict[str, object]:
    return {
        "schema": make_memory(SCHEMA, kind="procedure"),
        "escalation": make_memory(ESCALATION, kind="relationship"),
        "gotcha": make_memory(GOTCHA, kind="fact"),
        "phone": make_memory("The user's phone number is 18600000000.", kind="entity"),
    }


def test_a_playground_run_is_saved_as_a_trace_and_reopened(signed_in, live_server, ata, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/recall/")
    page.locator("#id_q").fill("how do I call article-list-query")
    page.locator("#id_scope").fill("agent:main")
    page.locator("#id_tools").fill("mcp__ata__article-list-query")
    page.get_by_role("button", name="Recall").click()

    run = page.locator("#run")
    expect(run.locator("[data-answered-by]")).to_have_text("heuristic")
    expect(run.locator("[data-fallback-reason]")).to_contain_text("selector not configured")
    schema_row = run.locator(f'[data-candidate="{ata["schema"].pk}"]')
    expect(schema_row).to_have_attribute("data-decision", "filtered")
    run.locator('details[data-stage="filtered"] [data-stage-summary]').click()  # not recalled: collapsed
    expect(schema_row.locator("[data-why-text]")).to_contain_text(
        "it names mcp__ata__article-list-query, a tool the agent is using right now"
    )
    expect(schema_row.locator("[data-why-text]")).to_contain_text("(“parameter schema”)")
    expect(run.locator(f'[data-candidate="{ata["escalation"].pk}"]')).to_have_attribute("data-decision", "selected")
    expect(run.locator(f'[data-candidate="{ata["gotcha"].pk}"]')).to_have_attribute("data-decision", "selected")
    block = run.locator("[data-block]")
    expect(block).to_contain_text("for this turn only")
    expect(block).to_contain_text(str(ata["escalation"].pk))
    expect(block).not_to_contain_text(SCHEMA)
    assert "tools=mcp__ata__article-list-query" in page.url  # the run is a link
    shown_block = block.inner_text()
    screenshot("run")

    page.locator("#trace-note").fill("the schema note must stay out")
    page.get_by_role("button", name="Save as trace").click()
    page.locator("#alerts a[data-saved-trace]").click()  # the playground stays; the message links the trace
    page.wait_for_url(re.compile(r".*/recall/traces/[0-9a-f-]{36}/$"))
    trace = RecallTrace.objects.get()
    assert page.url == f"{live_server.url}/recall/traces/{trace.pk}/"
    expect(page.locator("[data-trace-note]")).to_have_text("the schema note must stay out")
    assert page.locator("[data-block]").inner_text() == shown_block

    page.goto(f"{live_server.url}/recall/traces/")
    page.locator(f'[data-trace="{trace.pk}"] a').first.click()
    expect(page.locator(f'[data-candidate="{ata["schema"].pk}"]')).to_have_attribute("data-decision", "filtered")
    screenshot("trace")
    page.locator('[data-action="rerun"]').click()
    expect(page.locator("#id_tools")).to_have_value("mcp__ata__article-list-query")
    expect(page.locator("[data-block]")).to_contain_text(str(ata["escalation"].pk))


def test_two_profiles_compared_on_a_golden_set(signed_in, live_server, ata, screenshot):
    page = signed_in
    RecallProfile.objects.create(name="one-only", description="recall a single memory", knobs={"limit": 1})
    # Hands over up to its limit whatever the evidence, as recall did before the block was sized.
    RecallProfile.objects.create(name="up-to-limit", knobs={"block_cut": 0.0, "block_weak_cut": 0.0})
    golden = GoldenSet.objects.create(name="ata tool", scope="agent:main")
    GoldenQuery.objects.create(
        golden_set=golden,
        query="article-list-query locale",
        tools=["mcp__ata__article-list-query"],
        expected_ids=[str(ata["gotcha"].pk), str(ata["escalation"].pk)],
    )
    GoldenQuery.objects.create(golden_set=golden, query="quantum entanglement of photons", expected_ids=[])
    page.goto(f"{live_server.url}/recall/golden/")
    page.get_by_role("link", name="ata tool").click()
    page.locator("#id_a").select_option("up-to-limit")
    page.locator("#id_b").select_option("one-only")
    page.get_by_role("button", name="Run").click()

    results = page.locator("#golden-results")
    expect(results.locator('[data-metric="no_result_recall"] [data-profile-a]')).to_have_text("100%")
    expect(results.locator('[data-metric="no_result_recall"] [data-profile-b]')).to_have_text("100%")
    expect(results.locator('[data-metric="recall@k"] [data-profile-a]')).to_have_text("100% in the top 5")
    expect(results.locator('[data-metric="recall@k"] [data-profile-b]')).to_have_text(
        "100% in the top 1"
    )  # 1 of min(2 expected, k=1)
    moved = results.locator("[data-moved]").first
    expect(moved).to_contain_text("−")  # limit 1 drops one of the two expected memories
    expect(results.locator("[data-moved]").nth(1)).to_contain_text("no change")
    assert "a=up-to-limit" in page.url and "b=one-only" in page.url
    screenshot("compared")
