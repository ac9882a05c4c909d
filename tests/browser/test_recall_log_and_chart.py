"""A memory's recall log and the dashboard's activity chart in a real browser, under the page's
Content-Security-Policy (the fixtures fail the test on any violation)."""

from __future__ import annotations

from datetime import datetime, time, timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memoryui.models import Memory, MemoryEvent
from memoryui.text import exact_time
from recall.models import RecallLogEntry, RecallTrace

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

LONG_QUERY = "<b>bold?</b> when does the deploy run and who owns it " + "and what about the rollback " * 6


def at(days_ago: int, hour: int = 12) -> datetime:
    day = timezone.localdate() - timedelta(days=days_ago)
    return timezone.make_aware(datetime.combine(day, time(hour)))


def test_a_memory_page_lists_its_recalls_with_links_to_their_traces(signed_in, live_server, make_memory):
    page = signed_in
    memory = make_memory("The deploy runs on Thursdays; the platform team owns it.", kind="fact")
    trace = RecallTrace.objects.create(
        source="api", actor="token:agent", scope="agent:main", query=LONG_QUERY, limit=5, profile_name="default",
        mode="heuristic", result={"candidates": [], "block": ""}, selected_ids=[str(memory.pk)],
    )  # fmt: skip
    now = timezone.now()
    fields = {"scope": memory.scope, "profile_name": "default"}
    RecallLogEntry.objects.record([memory.pk], query=LONG_QUERY, source="api", trace=trace, **fields)
    RecallLogEntry.objects.record(
        [memory.pk], query="deploy day", source="mcp", created_at=now - timedelta(hours=3), **fields
    )
    RecallLogEntry.objects.record(
        [memory.pk], query="who owns the deploy", source="cli", created_at=now - timedelta(days=9), **fields
    )

    page.goto(f"{live_server.url}{memory.get_absolute_url()}")

    rows = page.locator("[data-recall-log] tbody tr")
    expect(rows).to_have_count(3)
    first = rows.nth(0)
    expect(first).to_contain_text("<b>bold?</b> when does the deploy run")  # shown as text, not markup
    expect(first.locator("b")).to_have_count(0)
    expect(first.locator("td").nth(1)).to_have_attribute("title", LONG_QUERY)
    newest = RecallLogEntry.objects.get(trace=trace).created_at
    expect(first.locator("time")).to_have_attribute("title", exact_time(newest))  # the exact time on hover
    expect(rows.nth(1)).to_contain_text("mcp")
    expect(rows.nth(1).locator("[data-trace-link]")).to_have_count(0)
    expect(page.locator("[data-recall-log-total]")).to_have_text("3 recalls in the last 90 days")
    at_both_widths(page, "memory-recall-log")

    first.locator("[data-trace-link]").click()
    expect(page).to_have_url(f"{live_server.url}/recall/traces/{trace.pk}/")


def drawn_pixels(page) -> int:
    """How many pixels of the chart's canvas are not blank (uPlot draws the series on it)."""
    return page.evaluate(
        """() => {
          const canvas = document.querySelector("#activity-chart canvas");
          if (!canvas || !canvas.width || !canvas.height) return 0;
          const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
          let painted = 0;
          for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
          return painted;
        }"""
    )


def table_totals(page) -> list[str]:
    return page.locator('[data-chart-table] tr[data-day="total"] td').all_inner_texts()


@pytest.fixture
def activity(make_memory) -> dict[str, Memory]:
    main = make_memory("The deploy runs on Thursdays.", kind="fact", scope="agent:main")
    other = make_memory("The staging database is db-stg-3.", kind="fact", scope="agent:other")
    for days_ago, memory, action in (
        (1, main, "recalled"), (1, main, "recalled"), (2, main, "recalled"), (4, main, "merged"),
        (3, other, "recalled"), (6, other, "tombstoned"), (12, other, "created"),
    ):  # fmt: skip
        MemoryEvent.objects.create(memory=memory, action=action, actor="test", created_at=at(days_ago))
    return {"main": main, "other": other}


def test_the_dashboard_chart_is_drawn_with_its_numbers_in_a_table_and_switches_scope(signed_in, live_server, activity):
    page = signed_in
    page.goto(f"{live_server.url}/")

    chart = page.locator("#activity-chart .activity-chart")
    canvas = chart.locator("canvas").first
    expect(canvas).to_be_visible()
    box = canvas.bounding_box()
    assert box["width"] > 300 and box["height"] > 100
    page.wait_for_function("() => document.querySelector('#activity-chart [data-drawn]') !== null")
    assert drawn_pixels(page) > 500
    page.locator(".chart-table > summary").click()
    assert table_totals(page) == ["3", "4", "1", "1"]  # created: two today + one 12 days ago
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    assert page.locator(f'[data-chart-table] tr[data-day="{yesterday}"] td').all_inner_texts() == ["0", "2", "0", "0"]
    at_both_widths(page, "dashboard-chart-all-scopes")

    page.select_option("#chart-scope", "agent:other")
    page.locator(".chart-scope button").click()
    expect(page).to_have_url(f"{live_server.url}/?scope=agent%3Aother")
    expect(page.locator("#chart-scope")).to_have_value("agent:other")
    page.wait_for_function("() => document.querySelector('#activity-chart [data-drawn]') !== null")
    assert drawn_pixels(page) > 500
    page.locator(".chart-table > summary").click()
    assert table_totals(page) == ["2", "1", "1", "0"]
    expect(page.locator('[data-scope-current="agent:other"]')).to_be_visible()  # the whole page follows
    at_both_widths(page, "dashboard-chart-one-scope")

    # Refresh swaps the panel in with htmx: the new chart is drawn too, in the same scope.
    MemoryEvent.objects.create(memory=activity["other"], action="recalled", actor="test", created_at=at(0))
    page.evaluate("() => { document.querySelector('#activity-chart [data-drawn]').dataset.before = 'refresh'; }")
    page.locator("#chart-title + a").click()
    # Wait for the swapped-in chart, not the one drawn before the click.
    page.wait_for_function("() => document.querySelector('#activity-chart [data-drawn]:not([data-before])') !== null")
    assert drawn_pixels(page) > 500
    page.locator(".chart-table > summary").click()
    assert table_totals(page) == ["2", "2", "1", "0"]


def test_the_dashboard_chart_opens_on_the_scope_in_the_address(signed_in, live_server, activity):
    page = signed_in
    page.goto(f"{live_server.url}/?scope=agent:main")
    page.wait_for_function("() => document.querySelector('#activity-chart [data-drawn]') !== null")
    expect(page.locator("#chart-scope")).to_have_value("agent:main")
    page.locator(".chart-table > summary").click()
    assert table_totals(page) == ["1", "3", "0", "1"]
