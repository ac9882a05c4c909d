"""API errors: always {"error": {code, message, details}}, the right status, the bad field named, nothing written."""

from __future__ import annotations

import pytest
from django.test import Client

from api.filters import MemoryFilterSet
from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

LIST = "/api/memories/"
VALID = {"scope": "agent:main", "kind": "fact", "text": "The user runs 1000 RTX 4070s in an IDC."}


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"tier": "attic"}, "tier"),
        ({"status": "tombstoned"}, "status"),
        ({"source": "rumour"}, "source"),
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"importance": True}, "importance"),
        ({"confidence": 2}, "confidence"),
        ({"confidence": False}, "confidence"),
        ({"text": ""}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 42}, "text"),
        ({"text": "x" * 4001}, "text"),
        ({"colour": "blue"}, "colour"),
        ({"scope": "planet:mars"}, "scope"),
        ({"scope": "agent:a b"}, "scope"),
        ({"scope": None}, "scope"),
        ({"entity_key": "no colon here"}, "entity_key"),
        ({"metadata": ["tag"]}, "metadata"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"pinned": "yes"}, "pinned"),
    ],
)
def test_a_bad_field_on_create_is_a_400_naming_it_and_nothing_is_written(alice_client, change, field):
    response = alice_client.post(LIST, {**VALID, **change}, "application/json")
    error = error_of(response, 400)
    assert error["code"] == "invalid"
    assert list(error["details"]) == [field]
    assert field in error["message"]
    assert all(isinstance(reason, str) for reason in error["details"][field])
    assert (Memory.objects.count(), MemoryEvent.objects.count()) == (0, 0)


def test_an_invalid_kind_lists_the_kinds(alice_client):
    error = error_of(alice_client.post(LIST, {**VALID, "kind": "bogus"}, "application/json"), 400)
    assert error["details"] == {"kind": ["'bogus' is not one of: " + ", ".join(Memory.Kind.values)]}


def test_text_at_the_length_limit_is_accepted(alice_client, settings):
    settings.MEMORYUI_TEXT_MAX_LENGTH = 50
    assert alice_client.post(LIST, {**VALID, "text": "y" * 50}, "application/json").status_code == 201
    error = error_of(alice_client.post(LIST, {**VALID, "text": "z" * 51}, "application/json"), 400)
    assert "limit is 50" in error["details"]["text"][0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"importance": 2}, "importance"),
        ({"text": ""}, "text"),
        ({"status": "tombstoned"}, "status"),
        ({"id": "00000000-0000-0000-0000-000000000000"}, "id"),
        ({"entity_key": ":"}, "entity_key"),
    ],
)
def test_a_bad_field_on_edit_is_a_400_naming_it_and_the_memory_is_unchanged(alice_client, make_memory, body, field):
    memory = make_memory("The user prefers short answers.")
    before = memory.snapshot()
    error = error_of(alice_client.patch(f"{LIST}{memory.pk}/", body, "application/json"), 400)
    assert list(error["details"]) == [field]
    memory.refresh_from_db()
    assert memory.snapshot() == before
    assert memory.events.count() == 1


@pytest.mark.parametrize("body", ['["a", "list"]', '"text"', "{not json"])
def test_a_body_that_is_not_a_json_object_is_400(alice_client, body):
    error = error_of(alice_client.post(LIST, body, "application/json"), 400)
    assert error["code"] == "invalid"
    assert not Memory.objects.exists()


def test_a_form_encoded_body_is_415_json(alice_client):
    error = error_of(alice_client.post(LIST, VALID), 415)
    assert error["code"] == "unsupported_media_type"


def test_an_entity_key_already_active_in_the_scope_is_a_409_conflict(alice_client, make_memory):
    make_memory("Phone is 18600000000.", kind="entity", entity_key="phone:18600000000")
    other = make_memory("Work phone unknown.", kind="fact")
    response = alice_client.patch(f"{LIST}{other.pk}/", {"entity_key": "phone:18600000000"}, "application/json")
    error = error_of(response, 409)
    assert error["code"] == "conflict"
    assert "phone:18600000000" in error["message"]
    assert list(error["details"]) == ["entity_key"]
    other.refresh_from_db()
    assert other.entity_key is None


@pytest.mark.parametrize(
    "path",
    [
        "/api/memories/not-a-uuid/",
        "/api/memories/12345/pin/",
        "/api/memories/00000000-0000-0000-0000-000000000000/",
        "/api/memories/00000000-0000-0000-0000-000000000000/nothing/",
        "/api/tokens/abc/revoke/",
        "/api/nothing-here/",
    ],
)
def test_unknown_and_malformed_urls_are_404_json(alice_client, path):
    assert error_of(alice_client.get(path), 404)["code"] == "not_found"


def test_a_missing_trailing_slash_is_404_json_with_a_hint(alice_client):
    error = error_of(alice_client.get("/api/stats"), 404)
    assert "/api/stats/" in error["message"]


def test_a_wrong_method_is_405_json(alice_client):
    assert error_of(alice_client.delete(LIST), 405)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"tier": "attic"}, "tier"),
        ({"status": "deleted"}, "status"),
        ({"source": "rumour"}, "source"),
        ({"pinned": "maybe"}, "pinned"),
        ({"scope": "planet:mars"}, "scope"),
        ({"ordering": "text"}, "ordering"),
    ],
)
def test_a_bad_list_filter_is_a_400_naming_the_parameter(alice_client, params, field):
    assert list(error_of(alice_client.get(LIST, params), 400)["details"]) == [field]


def test_an_unexpected_exception_is_a_500_json_body_not_an_html_page(alice, monkeypatch):
    def explode(filterset, queryset):
        raise RuntimeError("boom")

    monkeypatch.setattr(MemoryFilterSet, "filter_queryset", explode)
    browser = Client(raise_request_exception=False)
    browser.force_login(alice)
    accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # a browser's
    error = error_of(browser.get(LIST, headers={"Accept": accept}), 500)
    assert error == {"code": "server_error", "message": "Internal server error.", "details": {}}
