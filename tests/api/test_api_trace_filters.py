"""/api/recall/traces/ takes the trace list page's filters: outcome, answered, source, profile, the
query's words, and a time window or range; a bad value is a 400 naming the parameter. Each trace
carries the list's columns (answered, latency_ms, block_size)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from recall.models import RecallTrace, trace_columns

pytestmark = pytest.mark.django_db


def bearer(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def make_trace(query: str, *, answered: bool = True, hours_ago: float = 0, **fields) -> RecallTrace:
    result = {
        "answer": {"answered": answered, "reason": "r", "signals": {}},
        "selected": [{"id": "00000000-0000-0000-0000-000000000001"}] if answered else [],
        "timings_ms": {"total": 31.5},
        "candidates": [],
    }
    values = {"source": "api", "scope": "agent:main", "profile_name": "default", "mode": "heuristic", **fields}
    return RecallTrace.objects.create(
        actor="token:agent", query=query, limit=5, knobs={}, result=result,
        created_at=timezone.now() - timedelta(hours=hours_ago), **trace_columns(result), **values,
    )  # fmt: skip


def ids(client, token: str, **params) -> list[str]:
    response = client.get("/api/recall/traces/", params, **bearer(token))
    assert response.status_code == 200, response.content
    return [trace["id"] for trace in response.json()["results"]]


def test_the_trace_list_filters_as_the_page_does(client, agent_token):
    silent = make_trace("Quantum entanglement", answered=False, source="mcp", hours_ago=0.5)
    phone = make_trace("the user's PHONE", mode="selector", profile_name="wide", hours_ago=5)
    old = make_trace("phone again", source="cli", hours_ago=24 * 10)
    assert ids(client, agent_token, outcome="silent") == [str(silent.pk)]
    assert ids(client, agent_token, outcome="selector") == [str(phone.pk)]
    assert ids(client, agent_token, answered="false") == [str(silent.pk)]
    assert ids(client, agent_token, answered="true") == [str(phone.pk), str(old.pk)]
    assert ids(client, agent_token, source="cli") == [str(old.pk)]
    assert ids(client, agent_token, profile="wide") == [str(phone.pk)]
    assert ids(client, agent_token, q="phone") == [str(phone.pk), str(old.pk)]
    assert ids(client, agent_token, within="hour") == [str(silent.pk)]
    assert ids(client, agent_token, within="week") == [str(silent.pk), str(phone.pk)]
    since = (timezone.now() - timedelta(hours=6)).isoformat()
    until = (timezone.now() - timedelta(hours=1)).isoformat()
    assert ids(client, agent_token, since=since, until=until) == [str(phone.pk)]
    day = timezone.localdate() - timedelta(days=10)
    assert ids(client, agent_token, since=str(day), until=str(day)) == [str(old.pk)]  # a day is the whole day


def test_each_trace_carries_the_lists_columns(client, agent_token):
    make_trace("phone")
    [trace] = client.get("/api/recall/traces/", **bearer(agent_token)).json()["results"]
    assert (trace["answered"], trace["latency_ms"], trace["block_size"]) == (True, 31.5, 1)


def test_a_bad_filter_value_is_a_400_naming_it(client, agent_token):
    response = client.get(
        "/api/recall/traces/", {"since": "last tuesday", "answered": "maybe", "outcome": "won"}, **bearer(agent_token)
    )
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert details["since"] == ["'last tuesday' is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM"]
    assert details["answered"] == ["must be true or false"]
    assert details["outcome"][0].startswith("'won' is not one of: answered, silent")
    backwards = client.get("/api/recall/traces/", {"since": "2026-05-02", "until": "2026-05-01"}, **bearer(agent_token))
    assert backwards.status_code == 400 and backwards.json()["error"]["details"]["until"] == [
        "must not be before since"
    ]


def test_a_moment_with_any_offset_iso_allows_is_read_and_one_past_the_calendar_is_a_400(client, agent_token):
    # PostgreSQL refuses offsets past ±15:59; ISO 8601 and Python allow up to ±23:59.
    now = make_trace("deploy on fridays")
    assert ids(client, agent_token, until="5799-11-18T02:16:02-18:52") == [str(now.pk)]
    assert ids(client, agent_token, since="2000-01-01T00:00:00+23:59") == [str(now.pk)]
    assert ids(client, agent_token, until="2000-01-01T00:00:00-23:59") == []
    past = client.get("/api/recall/traces/", {"until": "9999-12-31T23:00:00-05:00"}, **bearer(agent_token))
    assert past.status_code == 400
    assert "out of range" in past.json()["error"]["details"]["until"][0]
