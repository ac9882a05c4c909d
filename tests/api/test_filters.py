"""The list FilterSets: what each parameter accepts, its errors through the API, and the schema they document."""

from __future__ import annotations

import pytest
from django.db.models import Q

from api.filters import MEMORY_ORDERINGS, EventFilterSet, MemoryFilterSet
from memoryui import rules
from memoryui.models import Memory
from web.filters import MemoryListFilterSet


def text_has(word: str) -> Q:
    return Q(text__icontains=word) | Q(entity_key__icontains=word)


pytestmark = pytest.mark.django_db

LIST = "/api/memories/"


@pytest.fixture
def store(make_memory) -> dict[str, Memory]:
    memories = {
        "tea": make_memory("Main prefers tea.", kind="preference"),
        "coffee": make_memory("Other prefers coffee.", kind="preference", scope="agent:other"),
        "phone": make_memory("Phone is 18600000000.", kind="entity", entity_key="phone:18600000000"),
        "import": make_memory("Imported leftover.", kind="note", source="import"),
        "old": make_memory("An old tea note.", kind="note"),
        # Written before scopes were normalized: the write path would refuse it today.
        "legacy": Memory.objects.create(
            scope="planet:mars", kind="note", tier="working", text="Legacy.", importance=0.5
        ),
    }
    memories["old"].tombstone("stale", actor="test")
    return memories


def selected(filterset) -> set[str]:
    assert filterset.is_valid(), filterset.errors
    return {memory.text for memory in filterset.qs}


def error_details(response) -> dict:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"] == "Invalid input: " + ", ".join(error["details"]) + "."
    return error["details"]


@pytest.mark.parametrize("scope", ["main", "agent:main"])
def test_a_scope_is_normalized_as_the_write_path_stores_it(store, scope):
    filterset = MemoryFilterSet({"scope": scope})
    assert selected(filterset) == {"Main prefers tea.", "Phone is 18600000000.", "Imported leftover."}
    assert filterset.form.cleaned_data["scope"] == "agent:main"


@pytest.mark.parametrize(
    ("scope", "reason"),
    [
        ("planet:mars", "unknown scope type 'planet'"),
        ("  ", "scope is required"),
        # The schema's pattern is the whole rule: nothing is folded or trimmed.
        ("AGENT:main", "unknown scope type 'AGENT'"),
        (" main ", "a scope id may hold ASCII letters"),
        ("50%:x", "unknown scope type '50%'"),  # the value is never taken for a format string
        ("%(x)s:y", "unknown scope type '%(x)s'"),
    ],
)
def test_an_invalid_scope_is_a_400_naming_the_field_and_why(alice_client, scope, reason):
    details = error_details(alice_client.get(LIST, {"scope": scope}))
    assert list(details) == ["scope"] and reason in details["scope"][0]


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"kind": "bogus"}, {"kind": ["'bogus' is not one of: " + ", ".join(rules.KINDS)]}),
        ({"status": "deleted"}, {"status": ["'deleted' is not one of: active, tombstoned, all"]}),
        ({"pinned": "maybe"}, {"pinned": ["must be true or false"]}),
        ({"tier": "%s"}, {"tier": ["'%s' is not one of: core, working, peripheral"]}),
        (
            {"ordering": "created_at,"},
            {"ordering": [f"order by one of: {', '.join(MEMORY_ORDERINGS)} (prefix - for descending)"]},
        ),
    ],
)
def test_an_invalid_filter_is_a_400_with_the_reason_per_field(alice_client, params, details):
    assert error_details(alice_client.get(LIST, params)) == details


def test_every_bad_filter_is_named_in_one_400_in_a_stable_order(alice_client):
    params = {"ordering": "text", "pinned": "no way", "source": "rumour", "tier": "attic", "kind": "x", "status": "?"}
    params["scope"] = "planet:mars"
    details = error_details(alice_client.get(LIST, params))
    assert list(details) == ["status", "scope", "kind", "tier", "source", "pinned", "ordering"]


@pytest.mark.parametrize(
    ("spelling", "pinned"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("false", False), ("0", False), ("No", False)],
)
def test_pinned_accepts_the_api_spellings_in_any_case(store, spelling, pinned):
    filterset = MemoryFilterSet({"pinned": spelling})
    texts = selected(filterset)
    assert filterset.form.cleaned_data["pinned"] is pinned
    assert ("Phone is 18600000000." in texts) is pinned


@pytest.mark.parametrize("spelling", ["maybe", " true", "on"])
def test_other_pinned_spellings_are_invalid(spelling):
    filterset = MemoryFilterSet({"pinned": spelling})
    assert not filterset.is_valid()
    assert filterset.errors["pinned"] == ["must be true or false"]


def test_status_defaults_to_active_and_all_keeps_both(store):
    assert "An old tea note." not in selected(MemoryFilterSet({}))
    assert "An old tea note." not in selected(MemoryFilterSet({"status": ""}))
    assert selected(MemoryFilterSet({"status": "tombstoned"})) == {"An old tea note."}
    assert {"An old tea note.", "Main prefers tea."} <= selected(MemoryFilterSet({"status": "all"}))


def test_text_matches_a_substring_of_the_text_or_the_entity_key_in_any_case(store):
    assert selected(MemoryFilterSet({"q": " TEA "})) == {"Main prefers tea."}
    assert selected(MemoryFilterSet({"q": "phone:186"})) == {"Phone is 18600000000."}
    assert selected(MemoryFilterSet({"q": "tea", "status": "all"})) == {"Main prefers tea.", "An old tea note."}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, Q(status="active")),
        ({"scope": "main", "kind": "note", "status": "all"}, Q(scope="agent:main", kind="note")),
        ({"pinned": "yes", "tier": "core"}, Q(status="active", pinned=True, tier="core")),
        ({"source": "import", "q": "LEFT"}, Q(status="active", source="import") & text_has("left")),
        ({"status": "tombstoned", "q": "tea"}, Q(status="tombstoned") & text_has("tea")),
    ],
)
def test_the_filters_combine_as_one_query(store, params, expected):
    assert selected(MemoryFilterSet(params)) == {memory.text for memory in Memory.objects.filter(expected)}


def test_the_list_page_matches_a_scope_that_is_not_one_as_typed_and_says_pinned_yes_or_no(store):
    assert selected(MemoryListFilterSet({"scope": "planet:mars"})) == {"Legacy."}
    assert selected(MemoryListFilterSet({"pinned": "yes"})) == {"Phone is 18600000000."}
    filterset = MemoryListFilterSet({"pinned": "true", "kind": "bogus"})
    assert not filterset.is_valid()
    assert filterset.errors["pinned"] == ["'true' is not a pinned filter; use yes or no"]
    assert filterset.errors["kind"] == ["'bogus' is not a kind; use one of: " + ", ".join(rules.KINDS)]


def test_the_list_page_ignores_the_api_ordering_and_sorts_by_its_own_field(store):
    filterset = MemoryListFilterSet({"ordering": "text", "sort": "importance"})
    assert filterset.is_valid() and "ordering" not in filterset.form.fields
    importances = [memory.importance for memory in filterset.qs]
    assert importances == sorted(importances)


def test_event_filters_name_each_bad_parameter(alice_client):
    params = {"memory": "%s", "batch": "nope", "action": "exploded", "actor": "anyone", "scope": "planet:mars"}
    details = error_details(alice_client.get("/api/events/", params))
    assert list(details) == ["memory", "batch", "action", "scope"]
    assert details["memory"] == ["'%s' is not a UUID"]


def test_event_filters_select_by_memory_action_actor_and_scope(store):
    tea = store["tea"]
    tea.pin(actor="user:alice")
    assert EventFilterSet({"memory": str(tea.pk)}).qs.count() == 2
    assert [e.actor for e in EventFilterSet({"action": "pinned", "scope": "main"}).qs] == ["user:alice"]
    assert EventFilterSet({"actor": " user:alice"}).qs.count() == 0  # an actor is matched exactly


def _parameters(schema: dict, path: str) -> dict[str, dict]:
    return {parameter["name"]: parameter for parameter in schema["paths"][path]["get"]["parameters"]}


def test_the_schema_documents_each_filter_with_its_enum(alice_client):
    schema = alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    memories = _parameters(schema, LIST)
    assert set(memories) == {
        "status",
        "scope",
        "kind",
        "tier",
        "source",
        "pinned",
        "q",
        "ordering",
        "page",
        "page_size",
    }
    assert set(memories["kind"]["schema"]["enum"]) == set(rules.KINDS)
    assert set(memories["tier"]["schema"]["enum"]) == set(rules.TIERS)
    assert set(memories["source"]["schema"]["enum"]) == set(rules.SOURCES)
    assert set(memories["status"]["schema"]["enum"]) == {"active", "tombstoned", "all"}
    assert memories["pinned"]["schema"]["type"] == "boolean"
    assert memories["scope"]["description"].startswith("Only this scope; normalized, so `main` means `agent:main`.")
    events = _parameters(schema, "/api/events/")
    assert set(events) == {"memory", "batch", "action", "actor", "scope", "page", "page_size"}
    assert events["memory"]["schema"] == {"type": "string", "format": "uuid"}
    # A memory's own history is paginated, not filtered by the list's filters.
    assert set(_parameters(schema, "/api/memories/{id}/events/")) == {"id", "page", "page_size"}
