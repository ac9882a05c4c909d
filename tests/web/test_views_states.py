"""Graceful states: unauthorized (401 partial, never a redirect into a panel), backend
unavailable (503 partial with backend, status, message and Retry), friendly 404/500, CSRF."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError
from django.db.models.query import QuerySet
from django.test import Client, RequestFactory, override_settings
from rest_framework import exceptions

from memoryui.models import Memory, MemoryEvent, MemoryQuerySet
from web import views

pytestmark = pytest.mark.django_db


def fail(message: str):
    def failing(*args, **kwargs):
        raise OperationalError(message)

    return failing


@pytest.fixture
def history_fails(monkeypatch):
    """The database fails on the history query only."""
    fetch_all = QuerySet._fetch_all

    def failing(self):
        if self.model is MemoryEvent:
            raise OperationalError("disk I/O error")
        return fetch_all(self)

    monkeypatch.setattr(QuerySet, "_fetch_all", failing)


# --- unauthorized ------------------------------------------------------------------------------


def test_an_expired_session_on_an_htmx_request_gets_the_unauthorized_partial_not_a_redirect(client):
    headers = {"HX-Request": "true", "HX-Target": "results", "HX-Current-URL": "http://testserver/memories/?kind=note"}

    response = client.get("/memories/?kind=note", headers=headers)

    html = response.content.decode()
    assert response.status_code == 401
    assert response["X-Memoryui-State"] == "unauthorized"
    assert "HX-Retarget" not in response  # a panel request: the state goes into the panel
    assert "<html" not in html and 'name="password"' not in html
    assert 'data-state="unauthorized"' in html
    assert 'href="/accounts/login/?next=%2Fmemories%2F%3Fkind%3Dnote"' in html


def test_an_expired_session_on_a_row_action_shows_the_unauthorized_state_in_the_alerts(client, make_memory):
    memory = make_memory("Prefers terse answers.")
    headers = {"HX-Request": "true", "HX-Target": f"row-{memory.pk}", "HX-Current-URL": "http://testserver/memories/"}

    response = client.post(f"/memories/{memory.pk}/pin/", headers=headers)

    assert response.status_code == 401
    assert response["HX-Retarget"] == "#alerts"
    assert response["HX-Reswap"] == "innerHTML"
    assert "next=%2Fmemories%2F" in response.content.decode()
    memory.refresh_from_db()
    assert not memory.pinned


def test_a_plain_request_without_a_session_is_redirected_to_sign_in(client):
    response = client.get("/tokens/")

    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/tokens/"


def test_the_login_page_signs_in_and_goes_to_next(client, alice):
    assert client.get("/accounts/login/?next=/memories/").status_code == 200

    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/memories/"}
    )

    assert response.status_code == 302 and response["Location"] == "/memories/"


def test_a_wrong_password_is_told_on_the_login_page(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def test_sign_out_is_a_post(alice_client):
    assert 'action="/accounts/logout/"' in alice_client.get("/").content.decode()

    response = alice_client.post("/accounts/logout/")

    assert response.status_code == 302
    assert alice_client.get("/").status_code == 302


# --- backend unavailable ---------------------------------------------------------------------------


def test_a_failing_stats_backend_degrades_the_stats_panel_only(alice_client, make_memory, monkeypatch):
    make_memory("Prefers terse answers.").pin(actor="user:alice")
    monkeypatch.setattr(MemoryQuerySet, "stats", fail("database is locked"))

    response = alice_client.get("/")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-state="unavailable"' in html
    assert "Database unavailable" in html and "status 503" in html and "database is locked" in html
    assert 'hx-get="/" hx-target="#stats-panel"' in html  # Retry re-issues the panel request
    assert ">Retry</a>" in html
    assert "Recent activity" in html and "user:alice" in html  # the other panel still works
    assert "Traceback" not in html


def test_a_failing_stats_backend_over_htmx_is_a_503_fragment_with_its_state_header(alice_client, monkeypatch):
    monkeypatch.setattr(MemoryQuerySet, "stats", fail("database is locked"))

    response = alice_client.get("/", headers={"HX-Request": "true", "HX-Target": "stats-panel"})

    assert response.status_code == 503
    assert response["X-Memoryui-State"] == "unavailable"
    assert "<html" not in response.content.decode()
    assert "database is locked" in response.content.decode()


def test_a_failing_list_query_shows_unavailable_in_the_results_and_keeps_the_filters(alice_client, monkeypatch):
    monkeypatch.setattr(MemoryQuerySet, "count", fail("could not connect to server"))

    response = alice_client.get("/memories/?kind=note")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="filters"' in html
    assert 'data-state="unavailable"' in html and "could not connect to server" in html
    assert 'hx-get="/memories/?kind=note" hx-target="#results"' in html


def test_a_failing_list_query_over_htmx_is_a_503_fragment(alice_client, monkeypatch):
    monkeypatch.setattr(MemoryQuerySet, "count", fail("could not connect to server"))

    response = alice_client.get("/memories/", headers={"HX-Request": "true", "HX-Target": "results"})

    assert response.status_code == 503
    assert response["X-Memoryui-State"] == "unavailable"
    assert "<html" not in response.content.decode()


def test_a_failing_history_degrades_the_history_panel_only(alice_client, make_memory, history_fails):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.get(f"/memories/{memory.pk}/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Prefers terse answers." in html  # the fields panel
    assert 'data-state="unavailable"' in html and "disk I/O error" in html
    assert f'hx-get="/memories/{memory.pk}/" hx-target="#history"' in html


def test_a_failing_history_over_htmx_is_a_503_fragment(alice_client, make_memory, history_fails):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.get(f"/memories/{memory.pk}/", headers={"HX-Request": "true", "HX-Target": "history"})

    assert response.status_code == 503
    assert response["X-Memoryui-State"] == "unavailable"


def test_a_row_action_that_hits_a_failing_database_alerts_with_a_retry_of_the_same_post(
    alice_client, make_memory, monkeypatch
):
    memory = make_memory("Prefers terse answers.")
    monkeypatch.setattr(Memory, "tombstone", fail("database is locked"))
    headers = {"HX-Request": "true", "HX-Target": f"row-{memory.pk}"}

    response = alice_client.post(f"/memories/{memory.pk}/tombstone/", {"reason": "stale"}, headers=headers)

    html = response.content.decode()
    assert response.status_code == 503
    assert response["HX-Retarget"] == "#alerts"
    assert f'hx-post="/memories/{memory.pk}/tombstone/" hx-target="#row-{memory.pk}" hx-swap="outerHTML"' in html
    vals = html.split('hx-vals="')[1].split('"')[0].replace("&quot;", '"')
    assert json.loads(vals) == {"reason": "stale"}


def test_a_failing_token_list_shows_unavailable_and_the_form_still_renders(alice_client, monkeypatch):
    fetch_all = QuerySet._fetch_all

    def failing(self):
        if self.model.__name__ == "ApiToken":
            raise OperationalError("database is locked")
        return fetch_all(self)

    monkeypatch.setattr(QuerySet, "_fetch_all", failing)

    html = alice_client.get("/tokens/").content.decode()

    assert 'data-state="unavailable"' in html and 'name="name"' in html


# --- not found, server error, CSRF ------------------------------------------------------------


def test_an_unknown_api_url_answers_json_404(alice_client):
    response = alice_client.get("/api/no-such-thing/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_404_handler_answers_json_under_api_and_html_elsewhere():
    factory = RequestFactory()

    api = views.not_found(factory.get("/api/memories/nope"))
    page = views.not_found(factory.get("/nope/"))

    assert api.status_code == 404 and json.loads(api.content)["error"]["code"] == "not_found"
    assert page.status_code == 404 and b"There is nothing at this address." in page.content
    # Django's 404 under /api/ says what DRF's own does.
    assert json.loads(api.content)["error"]["message"] == str(exceptions.NotFound.default_detail)


def test_an_unknown_page_is_a_friendly_404(alice_client):
    response = alice_client.get("/no-such-page/")

    assert response.status_code == 404
    assert "There is nothing at this address." in response.content.decode()
    assert 'href="/"' in response.content.decode()


def test_the_500_handler_answers_json_under_api_and_a_page_without_a_trace_elsewhere():
    factory = RequestFactory()

    api = views.server_error(factory.get("/api/stats/"))
    page = views.server_error(factory.get("/memories/"))

    assert api.status_code == 500 and json.loads(api.content)["error"]["message"] == "Internal server error."
    assert page.status_code == 500 and b"Something went wrong" in page.content
    assert b"Traceback" not in page.content


def test_a_500_during_an_htmx_request_is_an_unavailable_state_htmx_can_swap():
    request = RequestFactory().get("/memories/", headers={"HX-Request": "true"})
    request.htmx = type("Htmx", (), {"__bool__": lambda self: True, "history_restore_request": False})()

    response = views.server_error(request)

    assert response.status_code == 500
    assert response["X-Memoryui-State"] == "unavailable"
    assert b"Server unavailable" in response.content


def test_a_post_without_the_csrf_token_is_rejected(alice, make_memory):
    memory = make_memory("Prefers terse answers.")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(f"/memories/{memory.pk}/pin/", headers={"HX-Request": "true"})

    assert response.status_code == 403
    memory.refresh_from_db()
    assert not memory.pinned


def test_pages_put_the_csrf_token_on_body_for_htmx_posts(alice_client):
    html = alice_client.get("/").content.decode()

    assert '<body hx-headers=\'{"X-CSRFToken": "' in html


@override_settings(CSRF_FAILURE_VIEW="web.views.csrf_failure")
def test_a_stale_csrf_token_on_an_htmx_post_tells_to_reload_in_the_alerts(alice, make_memory):
    memory = make_memory("Prefers terse answers.")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(f"/memories/{memory.pk}/pin/", headers={"HX-Request": "true", "X-CSRFToken": "stale"})

    assert response.status_code == 403
    assert response["X-Memoryui-State"] == "invalid"
    assert response["HX-Retarget"] == "#alerts"
    assert "Reload the page" in response.content.decode()
