"""The dashboard's activity chart (memories created, recalled, tombstoned, merged per day, by scope)
and a memory's recall log on its detail page."""

from __future__ import annotations

import json
import re
from datetime import datetime, time, timedelta

import pytest
from django.utils import timezone

from memoryui.models import Memory, MemoryEvent
from recall.models import RecallLogEntry, RecallTrace
from web.views import CHART_DAYS, RECALL_LOG_SIZE, events_per_day

pytestmark = pytest.mark.django_db


def at(days_ago: int, hour: int = 12) -> datetime:
    day = timezone.localdate() - timedelta(days=days_ago)
    return timezone.make_aware(datetime.combine(day, time(hour)))


def event(memory: Memory, action: str, when: datetime) -> MemoryEvent:
    return MemoryEvent.objects.create(memory=memory, action=action, actor="test", created_at=when)


@pytest.fixture
def activity(make_memory) -> dict[str, Memory]:
    """A memory in agent:main and one in agent:other, with events over the last days (beside the
    `created` each got today from the write path)."""
    main = make_memory("The deploy runs on Thursdays.", kind="fact", scope="agent:main")
    other = make_memory("The staging database is db-stg-3.", kind="fact", scope="agent:other")
    for when in (at(1, 1), at(1, 23), at(3)):
        event(main, "recalled", when)
    event(other, "recalled", at(1))
    event(main, "merged", at(2))
    event(other, "tombstoned", at(2))
    event(other, "imported", at(5))
    event(main, "pinned", at(1))  # not charted
    event(main, "recalled", at(CHART_DAYS))  # a day before the chart's first
    return {"main": main, "other": other}


def test_events_are_counted_per_day_in_every_scope(activity):
    chart = events_per_day()
    day = {name: dict(zip(chart["days"], counts, strict=True)) for name, counts in chart["series"].items()}
    today = timezone.localdate()

    def on(days_ago: int) -> str:
        return (today - timedelta(days=days_ago)).isoformat()

    assert len(chart["days"]) == CHART_DAYS and chart["days"][-1] == today.isoformat()
    assert day["recalled"][on(1)] == 3 and day["recalled"][on(3)] == 1
    assert day["merged"][on(2)] == 1 and day["tombstoned"][on(2)] == 1
    assert day["created"][on(0)] == 2 and day["created"][on(5)] == 1  # an import is counted as created
    assert chart["totals"] == {"created": 3, "recalled": 4, "tombstoned": 1, "merged": 1}


def test_events_are_counted_in_one_scope_when_asked(activity):
    main = events_per_day("agent:main")["totals"]
    other = events_per_day("agent:other")["totals"]
    assert main == {"created": 1, "recalled": 3, "tombstoned": 0, "merged": 1}
    assert other == {"created": 2, "recalled": 1, "tombstoned": 1, "merged": 0}
    assert events_per_day("agent:nobody")["totals"] == dict.fromkeys(main, 0)


def chart_json(html: str) -> dict:
    match = re.search(r'<script id="activity-chart-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "the chart's data is not embedded"
    return json.loads(match.group(1))


def table_row(html: str, day: str) -> list[int]:
    match = re.search(rf'<tr data-day="{day}">.*?</tr>', html, re.S)
    assert match, f"no table row for {day}"
    return [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', match.group(0))]


def test_the_dashboard_embeds_the_chart_data_and_the_same_numbers_as_a_table(alice_client, activity):
    html = alice_client.get("/").content.decode()
    assert chart_json(html) == json.loads(json.dumps(events_per_day()))
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    assert table_row(html, yesterday) == [0, 3, 0, 0]
    assert table_row(html, "total") == [3, 4, 1, 1]
    assert 'data-activity-chart="activity-chart-data"' in html and "uplot-1.6.32.min.js" in html


def test_the_chart_honours_the_scope_in_the_address_and_htmx_gets_only_the_panel(alice_client, activity):
    html = alice_client.get("/", {"scope": "other"}).content.decode()  # a bare id means agent:<id>
    assert chart_json(html)["scope"] == "agent:other"
    assert table_row(html, "total") == [2, 1, 1, 0]
    assert '<option value="agent:other" selected>' in html

    fragment = alice_client.get(
        "/", {"scope": "agent:main"}, headers={"HX-Request": "true", "HX-Target": "activity-chart"}
    )
    body = fragment.content.decode()
    assert "<html" not in body and 'id="stats-panel"' not in body
    assert table_row(body, "total") == [1, 3, 0, 1]
    assert table_row(alice_client.get("/", {"scope": ""}).content.decode(), "total") == [3, 4, 1, 1]


def test_a_quiet_store_shows_the_empty_state_in_place_of_the_chart(alice_client):
    html = alice_client.get("/").content.decode()
    assert "Nothing happened in the last 30 days" in html and "activity-chart-data" not in html


# --- the recall log on a memory's page --------------------------------------------------------------


def log(memory: Memory, query: str, *, trace: RecallTrace | None = None, source: str = "api", when=None) -> None:
    RecallLogEntry.objects.record(
        [memory.pk], query=query, scope=memory.scope, profile_name="narrow", source=source, trace=trace, created_at=when
    )


def test_the_memory_page_lists_its_recalls_with_the_query_escaped_and_the_trace_linked(alice_client, make_memory):
    memory = make_memory("The deploy runs on Thursdays.", kind="fact")
    trace = RecallTrace.objects.create(
        source="mcp", actor="test", scope="agent:main", query="q", limit=5, profile_name="narrow",
        mode="heuristic", result={},
    )  # fmt: skip
    log(memory, "<script>alert('x')</script> when is the deploy?", trace=trace, source="mcp")
    log(memory, "deploy day", source="cli", when=timezone.now() - timedelta(hours=2))

    html = alice_client.get(memory.get_absolute_url()).content.decode()
    rows = re.findall(r"<tr data-log-entry>(.*?)</tr>", html, re.S)
    assert len(rows) == 2
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; when is the deploy?" in rows[0]
    assert "<script>alert" not in html
    assert f'href="/recall/traces/{trace.pk}/" data-trace-link' in rows[0] and ">mcp<" in rows[0]
    assert "data-trace-link" not in rows[1] and ">cli<" in rows[1] and "narrow" in rows[1]
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">', rows[0])


def test_the_memory_page_shows_the_latest_recalls_and_links_to_all_of_them(alice_client, make_memory):
    memory = make_memory("The deploy runs on Thursdays.", kind="fact")
    now = timezone.now()
    for n in range(RECALL_LOG_SIZE + 5):
        log(memory, f"query number {n}", when=now - timedelta(minutes=n))

    html = alice_client.get(memory.get_absolute_url()).content.decode()
    queries = re.findall(r"query number (\d+)</td>", html)
    assert queries == [str(n) for n in range(RECALL_LOG_SIZE)]
    assert f"Show all {RECALL_LOG_SIZE + 5} recalls" in html

    everything = alice_client.get(memory.get_absolute_url(), {"log": "all"}).content.decode()
    assert len(re.findall(r"query number (\d+)</td>", everything)) == RECALL_LOG_SIZE + 5


def test_a_memory_never_recalled_says_so(alice_client, make_memory):
    memory = make_memory("The deploy runs on Thursdays.", kind="fact")
    html = alice_client.get(memory.get_absolute_url()).content.decode()
    assert "Not recalled in the last 90 days" in html and "data-log-entry" not in html
