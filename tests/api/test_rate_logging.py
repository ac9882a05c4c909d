"""Refused calls (429) are logged as one summary line per period, per caller, API and MCP alike,
never one warning each: a flood would write dozens of lines a second.

Who is who: see tests/conftest.py (the agent token is alice's; mallory has her own token).
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from django.test import Client

from api import throttling
from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _tiny_rate(settings):
    settings.MEMORYUI_API_RATE = "2/minute"
    throttling.refusals.flush()  # nothing left over from another test
    yield
    throttling.refusals.flush()


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}", "Accept": "application/json"})


def ping(client: Client):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    return client.post("/mcp/?scope=agent:main", body, content_type="application/json")


def ident(raw: str) -> str:
    return throttling.token_ident(ApiToken.authenticate(raw))


def test_a_flood_of_refusals_logs_one_line_per_caller_not_one_per_refusal(caplog, agent_token, mallory_token):
    agent, mallory = bearer(agent_token), bearer(mallory_token)
    with caplog.at_level(logging.INFO):
        agent_api = [agent.get("/api/memories/").status_code for _ in range(12)]
        agent_mcp = [ping(agent).status_code for _ in range(5)]
        mallory_api = [mallory.get("/api/memories/").status_code for _ in range(4)]
        assert (agent_api.count(429), agent_mcp.count(429), mallory_api.count(429)) == (10, 5, 2)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no line per refusal

        throttling.refusals.flush()  # the period's end

    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [
        f"rate limits refused calls (429) in the last 60 s: 17 in all; {ident(agent_token)} x15 (api 10, mcp 5), "
        f"{ident(mallory_token)} x2 (api 2)"
    ]
    assert caplog.records[-1].name == "api.throttling"


def test_the_summary_is_logged_when_the_period_ends_and_counting_starts_afresh(caplog):
    refusals = throttling.Refusals(period=0.2)
    with caplog.at_level(logging.WARNING, logger="api.throttling"):
        for _ in range(3):
            refusals.note("token:7", "api")
        time.sleep(0.6)
        refusals.note("token:7", "mcp")
        time.sleep(0.6)

    assert [r.getMessage() for r in caplog.records] == [
        "rate limits refused calls (429) in the last 0.2 s: 3 in all; token:7 x3 (api 3)",
        "rate limits refused calls (429) in the last 0.2 s: 1 in all; token:7 x1 (mcp 1)",
    ]


def test_other_client_errors_are_still_logged_as_django_logs_them(caplog, agent_token):
    with caplog.at_level(logging.WARNING):
        assert bearer(agent_token).get("/api/memories/00000000-0000-0000-0000-000000000000/").status_code == 404

    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == [
        "Not Found: /api/memories/00000000-0000-0000-0000-000000000000/"
    ]
