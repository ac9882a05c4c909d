"""API authentication and scoping: 401 JSON without credentials, tokens limited to their scopes, CSRF on sessions."""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui.models import ApiToken, Memory

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def mallory(mallory_token) -> Client:
    return bearer(mallory_token)


@pytest.fixture
def main_memory(make_memory) -> Memory:
    return make_memory("Main agent secret.", scope="agent:main")


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert set(error) == {"code", "message", "details"}
    return error


@pytest.mark.parametrize("path", ["/api/memories/", "/api/stats/", "/api/no-such-thing/", "/api/", "/api/schema/"])
def test_anonymous_calls_get_401_json_even_for_unknown_urls(client, path):
    response = client.get(path)
    assert_error(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_anonymous_post_to_an_unknown_url_gets_401_json(client):
    assert_error(client.post("/api/nowhere/", {}, "application/json"), 401, "unauthorized")


def test_an_unknown_token_is_401(client):
    assert_error(bearer("mui_not-a-real-token").get("/api/memories/"), 401, "unauthorized")


def test_a_revoked_token_is_401(alice, agent_token):
    agent = bearer(agent_token)
    assert agent.get("/api/memories/").status_code == 200
    ApiToken.objects.get(name="agent").revoke()
    error = assert_error(agent.get("/api/memories/"), 401, "unauthorized")
    assert "revoked" in error["message"]


def test_a_token_acts_under_its_name(agent_token):
    response = bearer(agent_token).post(
        "/api/memories/", {"scope": "main", "kind": "fact", "text": "Runs 1000 RTX 4070s."}, "application/json"
    )
    assert response.status_code == 201
    assert Memory.objects.get().events.get().actor == "token:agent"


def test_a_scoped_token_lists_nothing_outside_its_scopes(mallory, main_memory, make_memory):
    mine = make_memory("Other agent note.", scope="agent:other")
    body = mallory.get("/api/memories/").json()
    assert [row["id"] for row in body["results"]] == [str(mine.pk)]
    assert mallory.get("/api/memories/", {"scope": "agent:main"}).json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"text": "changed"}),
        ("delete", "", None),
        ("post", "pin/", None),
        ("post", "tombstone/", {"reason": "x"}),
        ("get", "events/", None),
    ],
)
def test_another_scopes_memory_is_404_not_403(mallory, main_memory, method, suffix, body):
    response = getattr(mallory, method)(f"/api/memories/{main_memory.pk}/{suffix}", body or "", "application/json")
    assert_error(response, 404, "not_found")
    main_memory.refresh_from_db()
    assert (main_memory.text, main_memory.status, main_memory.pinned) == ("Main agent secret.", "active", False)


def test_writing_into_another_scope_is_403_naming_the_scope(mallory):
    response = mallory.post(
        "/api/memories/", {"scope": "main", "kind": "fact", "text": "Injected."}, "application/json"
    )
    error = assert_error(response, 403, "forbidden")
    assert "agent:main" in error["message"]
    assert list(error["details"]) == ["scope"]
    assert not Memory.objects.exists()


def test_moving_a_memory_into_another_scope_is_403(mallory, make_memory):
    mine = make_memory("Other agent note.", scope="agent:other")
    response = mallory.patch(f"/api/memories/{mine.pk}/", {"scope": "agent:main"}, "application/json")
    assert_error(response, 403, "forbidden")
    mine.refresh_from_db()
    assert mine.scope == "agent:other"


def test_a_session_post_without_csrf_token_is_403_json(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    body = {"scope": "main", "kind": "fact", "text": "Sneaky."}
    error = assert_error(browser.post("/api/memories/", body, "application/json"), 403, "forbidden")
    assert "CSRF" in error["message"]
    assert not Memory.objects.exists()
    token = "k" * 32  # a CSRF secret, as the dashboard's cookie would hold
    browser.cookies["csrftoken"] = token
    response = browser.post("/api/memories/", body, "application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 201


def test_tokens_do_not_need_csrf(agent_token):
    agent = Client(enforce_csrf_checks=True, headers={"Authorization": f"Bearer {agent_token}"})
    response = agent.post("/api/memories/", {"scope": "main", "kind": "fact", "text": "Fine."}, "application/json")
    assert response.status_code == 201
