"""The recall traces as a tool, in a real browser: recalls from every source, filtered by outcome and
source, searched by their query's words, two compared side by side, and one saved trace asked why a
memory was not recalled."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from recall.models import RecallProfile, RecallTrace
from recall.pipeline import recall

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

SCHEMA = "Parameter schema and usage reference for article-list-query: page_size int ≤ 50, query string, locale enum."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
PHONE = "The user's phone number is 18600000000."


@pytest.fixture
def traces(indexes, make_memory) -> dict[str, object]:
    """Four saved recalls, one from each source: answered and silent, two profiles, a tool in use."""
    memories = {
        "schema": make_memory(SCHEMA, kind="procedure"),
        "escalation": make_memory(ESCALATION, kind="relationship"),
        "gotcha": make_memory(GOTCHA, kind="fact"),
        "phone": make_memory(PHONE, kind="entity"),
        "other": make_memory("The phone of agent:other's user is 13900000000.", kind="entity", scope="agent:other"),
    }
    narrow = RecallProfile.objects.create(name="narrow", knobs={"vector_k": 2, "bm25_k": 2})

    def save(query: str, source: str, *, tools=(), profile: RecallProfile | None = None) -> RecallTrace:
        kwargs = {"settings": profile.settings, "profile": profile.name} if profile else {}
        result = recall(query, scope="agent:main", tools=tools, selector_config=None, **kwargs)
        return RecallTrace.record(result, source=source, actor=f"{source}:test", profile=profile)

    tool = ["mcp__ata__article-list-query"]
    memories["api"] = save("how do I call article-list-query", "api", tools=tool)
    memories["mcp"] = save("quantum entanglement of distant galaxies", "mcp")
    memories["cli"] = save("how do I call article-list-query", "cli", profile=narrow)
    memories["playground"] = save("What is the user's PHONE number?", "playground")
    return memories


def rows(page) -> list[str]:
    return page.locator("tr[data-trace]").evaluate_all("rows => rows.map(row => row.dataset.trace)")


def test_traces_are_filtered_searched_compared_and_asked_why_not(signed_in, live_server, traces):
    page = signed_in
    page.goto(f"{live_server.url}/recall/traces/?scope=")
    expect(page.locator("tr[data-trace]")).to_have_count(4)
    silent = page.locator(f'tr[data-trace="{traces["mcp"].pk}"]')
    expect(silent).to_have_attribute("data-outcome", "silent")
    expect(silent.locator("[data-fallback-reason]")).to_contain_text("selector not configured")
    expect(silent.locator("[data-latency]")).to_have_text(re.compile(r"^\d+ ms$"))
    expect(page.locator(f'tr[data-trace="{traces["api"].pk}"] [data-block-size]')).to_have_text(
        str(traces["api"].block_size)
    )
    at_both_widths(page, "traces-tool-list")

    page.locator("#id_outcome").select_option("silent")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("tr[data-trace]")).to_have_count(1)
    assert rows(page) == [str(traces["mcp"].pk)] and "outcome=silent" in page.url
    at_both_widths(page, "traces-tool-silent")

    page.locator("#id_outcome").select_option("")
    page.locator("#id_source").select_option("cli")
    page.locator("#id_q").fill("ARTICLE-list")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("tr[data-trace]")).to_have_count(1)
    assert rows(page) == [str(traces["cli"].pk)]
    expect(page.locator("#id_q")).to_have_value("ARTICLE-list")  # the form shows what it filtered by
    page.locator("#id_source").select_option("")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("tr[data-trace]")).to_have_count(2)
    assert set(rows(page)) == {str(traces["api"].pk), str(traces["cli"].pk)}
    at_both_widths(page, "traces-tool-search")

    page.goto(f"{live_server.url}/recall/traces/?scope=&since=yesterday")
    expect(page.locator('[data-filter="since"] .error')).to_contain_text("'yesterday' is not a date")
    at_both_widths(page, "traces-tool-bad-date")

    # The same question, with and without the tool in use and with two profiles: side by side.
    page.goto(f"{live_server.url}/recall/traces/?scope=&q=article")
    page.locator(f'tr[data-trace="{traces["api"].pk}"] [data-compare]').check()
    page.locator(f'tr[data-trace="{traces["cli"].pk}"] [data-compare]').check()
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r".*/recall/traces/compare/\?a=.*&b=.*"))
    expect(page.locator('[data-setting="profile"]')).to_have_attribute("data-differs", "")
    expect(page.locator('[data-setting="query"]')).not_to_have_attribute("data-differs", "")
    expect(page.locator('[data-setting="recent tools"]')).to_have_attribute("data-differs", "")
    expect(page.locator("[data-compare-knobs] tr[data-knob]")).not_to_have_count(0)
    expect(page.locator('[data-compare-knobs] [data-knob="vector_k"]')).to_be_visible()
    # The list is newest first, so the cli's recall (saved last) is a, the api's b.
    assert parse_qs(urlsplit(page.url).query) == {"a": [str(traces["cli"].pk)], "b": [str(traces["api"].pk)]}
    schema_id = str(traces["schema"].pk)
    # The tool in use kept the schema note out of the api's block; the cli's recall (no tool) handed it over.
    assert schema_id in traces["cli"].selected_ids and schema_id not in traces["api"].selected_ids
    expect(page.locator(f'[data-block-side="b"] [data-memory="{schema_id}"]')).to_have_count(0)
    only_a = page.locator(f'[data-block-side="a"] [data-memory="{schema_id}"]')
    expect(only_a).to_have_attribute("data-in-both", "no")
    expect(only_a.locator("[data-elsewhere]")).to_have_text("filtered")
    at_both_widths(page, "traces-tool-compare")

    # A saved trace answers "why not recalled?" from the candidates it kept.
    page.locator('a[data-side="b"]').click()
    page.wait_for_url(re.compile(rf".*/recall/traces/{traces['api'].pk}/$"))
    page.locator("#trace-why").fill(schema_id[:8])
    page.get_by_role("button", name="Ask").click()
    why = page.locator("[data-why-not]")
    expect(why).to_contain_text("filtered: Kept out by the active-tool filter")
    expect(why).to_contain_text("mcp__ata__article-list-query")
    at_both_widths(page, "traces-tool-why")

    page.locator("#trace-why").fill(str(traces["other"].pk))
    page.get_by_role("button", name="Ask").click()
    expect(why).to_contain_text("It is in scope agent:other; this recall ran in agent:main.")
    at_both_widths(page, "traces-tool-why-other-scope")
