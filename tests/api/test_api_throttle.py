"""API rate limits: per token (per user for session calls), a lower one for expensive calls, 429 as JSON.

Rates are tiny here (MEMORYUI_API_RATE, MEMORYUI_API_EXPENSIVE_RATE through `settings`); the
counts live in Django's cache, emptied around each test. Who is who: see tests/conftest.py.
"""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.test import Client

from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counts(settings):
    settings.MEMORYUI_API_RATE = "3/minute"
    settings.MEMORYUI_API_EXPENSIVE_RATE = "2/minute"
    cache.clear()
    yield
    cache.clear()


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


def recall(client: Client):
    return client.post("/api/recall/", data=json.dumps({}), content_type="application/json")


def test_a_token_past_its_rate_gets_429_with_the_json_error_and_retry_after(agent_token):
    agent = bearer(agent_token)
    assert [agent.get("/api/memories/").status_code for _ in range(3)] == [200, 200, 200]

    response = agent.get("/api/memories/")

    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "throttled" and set(error) == {"code", "message", "details"}
    assert 1 <= int(response["Retry-After"]) <= 60


def test_each_token_is_counted_on_its_own_even_two_of_one_user(alice, agent_token, mallory_token):
    _, second_raw = ApiToken.issue(user=alice, name="second agent")
    for _ in range(3):
        bearer(agent_token).get("/api/memories/")
    assert bearer(agent_token).get("/api/memories/").status_code == 429

    assert bearer(second_raw).get("/api/memories/").status_code == 200
    assert bearer(mallory_token).get("/api/memories/").status_code == 200


def test_session_calls_are_counted_per_user(alice_client, bob):
    for _ in range(3):
        alice_client.get("/api/stats/")
    assert alice_client.get("/api/stats/").status_code == 429

    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.get("/api/stats/").status_code == 200


def test_recall_has_its_own_lower_rate_and_other_calls_go_on(settings, agent_token):
    settings.MEMORYUI_API_RATE = "100/minute"
    agent = bearer(agent_token)
    assert [recall(agent).status_code for _ in range(2)] == [400, 400]  # refused bodies count too

    response = recall(agent)

    assert response.status_code == 429 and response.json()["error"]["code"] == "throttled"
    assert response["Retry-After"]
    assert agent.get("/api/memories/").status_code == 200


def test_a_golden_set_run_counts_as_expensive_and_its_other_routes_do_not(settings, agent_token):
    settings.MEMORYUI_API_RATE = "100/minute"
    agent = bearer(agent_token)
    for _ in range(2):
        assert agent.post("/api/recall/golden/999/run/", content_type="application/json").status_code == 404

    assert agent.post("/api/recall/golden/999/run/", content_type="application/json").status_code == 429
    assert agent.get("/api/recall/golden/").status_code == 200


def test_off_lifts_a_limit(settings, agent_token):
    settings.MEMORYUI_API_RATE = None  # what `MEMORYUI_API_RATE=off` gives
    agent = bearer(agent_token)

    assert {agent.get("/api/memories/").status_code for _ in range(10)} == {200}


def test_an_anonymous_caller_still_gets_401_not_429(client):
    assert {client.get("/api/memories/").status_code for _ in range(5)} == {401}
