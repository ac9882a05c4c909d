"""The recall playground as a person uses it: fields that show what is typed, the candidates that were
not recalled collapsed by stage with each reason said once, and both recall paths on the demo data."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.fakes.openai_server import FakeOpenAIServer
from web import demo

pytestmark = pytest.mark.e2e

QUERY = "how do I call article-list-query, please"  # 40 characters
LONG_SCOPE = "agent:ops-bot-eu-west-prod"
TOOLS = "mcp__ata__article-list-query, web::fetch"

CALL_FORMAT = "Call format for article-list-query (guessed): pass query string, page int, page_size int ≤ 50."
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
UNRELATED = (
    "The user prefers green tea in the afternoon.",
    "The staging database is reset every Sunday night.",
    "用户的幸运数字是 88、66 和 99。",
    "The company's fiscal year starts on April 1.",
    "Weekly demos are on Thursdays with the product team.",
)


def shows_all_it_holds(page, selector: str) -> bool:
    """The input's text fits its box: nothing scrolled out of view."""
    return page.locator(selector).evaluate("el => el.scrollWidth <= el.clientWidth")


@pytest.fixture
def ata(indexes, make_memory) -> dict:
    memories = {
        "call_format": make_memory(CALL_FORMAT, kind="procedure"),
        "gotcha": make_memory(GOTCHA, kind="fact"),
        "escalation": make_memory(ESCALATION, kind="relationship"),
    }
    for number, text in enumerate(UNRELATED):
        memories[f"unrelated-{number}"] = make_memory(text, kind="fact")
    return memories


@pytest.mark.parametrize("width", [1400, 1024])
def test_query_scope_and_tools_show_everything_typed_and_limit_stays_small(signed_in, live_server, width, screenshot):
    assert len(QUERY) == 40
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/recall/")
    page.locator("#id_q").fill(QUERY)
    page.locator("#id_scope").fill(LONG_SCOPE)
    page.locator("#id_tools").fill(TOOLS)
    for field in ("#id_q", "#id_scope", "#id_tools"):
        assert shows_all_it_holds(page, field), f"{field} cuts what is typed at {width} px"
    query_width = page.locator("#id_q").bounding_box()["width"]
    assert page.locator("#id_limit").bounding_box()["width"] < query_width / 4  # Limit is small
    screenshot(f"playground-{width}")

    page.goto(f"{live_server.url}/memories/")
    page.locator("#id_q").fill(QUERY)
    page.locator("#id_scope").fill(LONG_SCOPE)
    for field in ("#id_q", "#id_scope"):
        assert shows_all_it_holds(page, field), f"the memory list's {field} cuts what is typed at {width} px"
    screenshot(f"memory-list-{width}")


def test_candidates_not_recalled_are_collapsed_by_stage_each_reason_said_once(signed_in, live_server, ata, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/recall/?q=how+do+I+call+article-list-query&scope=agent:main")
    run = page.locator("#run")
    recalled = run.locator('tr[data-decision="selected"]')
    expect(recalled.first).to_be_visible()  # what was recalled is shown in full
    below = run.locator('details[data-stage="below_floor"]')
    summary = below.locator("[data-stage-summary]")
    expect(summary).to_contain_text("below the relevance floor")
    rows = below.locator("tr[data-candidate]")
    assert rows.count() >= 3
    for number in range(rows.count()):
        expect(rows.nth(number)).to_be_hidden()  # collapsed until the summary is opened
    screenshot("collapsed")

    summary.click()
    for number in range(rows.count()):
        row = rows.nth(number)
        expect(row).to_be_visible()
        shown = row.inner_text()
        assert shown.count("Too weak a match") == 1, shown  # said once, in words
        for jargon in ("over the anchor", "below floor:", "fused", "margin"):
            assert jargon not in shown, f"{jargon!r} shown in the row: {shown}"
    first = rows.first
    first.locator("[data-numbers] summary").click()  # the numbers are there on demand
    numbers = first.locator(".numbers-body")
    expect(numbers).to_be_visible()
    expect(numbers).to_contain_text("over the anchor")
    expect(numbers).to_contain_text("Fused")
    screenshot("opened-with-numbers")


def test_the_demo_example_shows_the_active_tool_filter_on_first_start(signed_in, live_server, indexes, screenshot):
    demo.seed_clean()
    demo.seed_polluted()
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/recall/")
    screenshot("first-start")
    page.locator("[data-example]").click()

    expect(page.locator("#id_q")).to_have_value("how do I call article-list-query")
    expect(page.locator("#id_scope")).to_have_value("agent:ops-bot")
    expect(page.locator("#id_tools")).to_have_value("mcp__ata__article-list-query")
    run = page.locator("#run")
    gotcha = run.locator(f'[data-candidate="{demo.demo_id("ops:article-list-gotcha")}"]')
    expect(gotcha).to_have_attribute("data-decision", "selected")
    filtered_group = run.locator('details[data-stage="filtered"]')
    expect(filtered_group.locator("[data-stage-summary]")).to_have_text("filtered 1 filtered by the active-tool filter")
    filtered_group.locator("[data-stage-summary]").click()
    call_format = filtered_group.locator(f'[data-candidate="{demo.demo_id(demo.FILTER_EXAMPLE_KEY)}"]')
    expect(call_format).to_have_attribute("data-decision", "filtered")
    expect(call_format.locator("[data-why-text]")).to_contain_text(
        "it names mcp__ata__article-list-query, a tool the agent is using right now"
    )
    hint = run.locator('[data-selector-hint="not_configured"]').first
    expect(hint).to_contain_text("No LLM configured")
    screenshot("filtered")

    hint.get_by_role("link", name="Set one up").click()
    expect(page.locator("#local-llm")).to_contain_text("MEMORYUI_LLM_BASE_URL")
    expect(page.locator('[data-llm-state="not_configured"]')).to_be_visible()
    screenshot("how-to-set-up")


def test_with_an_llm_both_paths_show_side_by_side(signed_in, live_server, ata, settings, screenshot):
    def pick(body: dict) -> str:
        """The model picks the gotcha and, against its instructions, the call format."""
        asked = json.loads(body["messages"][1]["content"])
        wanted = [h["id"] for h in asked["candidates"] if h["first_line"].startswith(("Gotcha", "Call format"))]
        return json.dumps({"selected": [{"id": pk, "reason": "about the tool in use"} for pk in wanted]})

    with FakeOpenAIServer(stall_seconds=10) as fake:
        fake.chat_reply = pick
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = fake.base_url, "fake-selector-side-by-side"
        settings.MEMORYUI_SELECTOR_TIMEOUT_MS = 20_000
        page = signed_in
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(f"{live_server.url}/recall/")
        page.locator("#id_q").fill("how do I call article-list-query")
        page.locator("#id_scope").fill("agent:main")
        page.locator("#id_tools").fill("mcp__ata__article-list-query")
        page.get_by_role("button", name="Recall").click()

        run = page.locator("#run")
        expect(run.locator("[data-answered-by]")).to_have_text("selector")
        gotcha = run.locator(f'[data-candidate="{ata["gotcha"].pk}"]')
        expect(gotcha).to_have_attribute("data-decision", "selected")
        expect(gotcha.locator("[data-selector]")).to_have_attribute("data-selector", "selected")
        expect(gotcha.locator("[data-heuristic]")).to_have_attribute("data-heuristic", "selected")
        expect(gotcha.locator("[data-why-text]")).to_contain_text("by the selector: about the tool in use")
        run.locator('details[data-stage="filtered"] [data-stage-summary]').click()
        call_format = run.locator(f'[data-candidate="{ata["call_format"].pk}"]')
        expect(call_format).to_have_attribute("data-decision", "filtered")  # the post-filter holds
        expect(call_format.locator("[data-selector]")).to_have_attribute("data-selector", "filtered")
        expect(call_format.locator("[data-heuristic]")).to_have_attribute("data-heuristic", "filtered")
        expect(run.locator("[data-selector-hint]")).to_have_count(0)  # the column holds the selector's decisions
        assert len([r for r in fake.requests if r["path"] == "/v1/chat/completions"]) == 1
        screenshot("side-by-side")
