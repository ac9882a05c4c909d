"""The memory list: filters, search, sort, pagination, row actions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "results"}


def rows(response) -> int:
    return response.content.decode().count('<tr id="row-')


def test_the_list_requires_sign_in(client):
    response = client.get("/memories/?kind=note")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/memories/%3Fkind%3Dnote"


def test_the_list_shows_active_memories_by_default(alice_client, make_memory):
    make_memory("Prefers terse answers.")
    make_memory("chit-chat", kind="note").tombstone("noise", actor="test")

    response = alice_client.get("/memories/")

    html = response.content.decode()
    assert rows(response) == 1
    assert "Prefers terse answers." in html
    assert "chit-chat" not in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kind=fact", {"Runs 1000 RTX 4070s."}),
        ("tier=core", {"Name is Lin."}),
        ("scope=test-w", {"Runs 1000 RTX 4070s."}),  # a bare id is an agent id, as on write
        ("pinned=yes", {"Name is Lin."}),
        ("pinned=no", {"Runs 1000 RTX 4070s.", "Prefers terse answers."}),
        ("source=import", {"Prefers terse answers."}),
        ("status=tombstoned", {"chit-chat"}),
        ("status=all&kind=note", {"chit-chat"}),
        ("q=rtx&match=text", {"Runs 1000 RTX 4070s."}),
        ("q=name:lin&match=text", {"Name is Lin."}),  # plain-text search covers the entity key
    ],
)
def test_filters_and_search_select_the_matching_memories(alice_client, make_memory, query, expected):
    make_memory("Name is Lin.", kind="entity", entity_key="name:Lin")
    make_memory("Prefers terse answers.", kind="preference", source="import")
    make_memory("Runs 1000 RTX 4070s.", kind="fact", scope="agent:test-w")
    make_memory("chit-chat", kind="note").tombstone("noise", actor="test")

    html = alice_client.get(f"/memories/?{query}").content.decode()

    shown = {
        text for text in ("Name is Lin.", "Prefers terse answers.", "Runs 1000 RTX 4070s.", "chit-chat") if text in html
    }
    assert shown == expected


def test_sort_by_importance_ascending_and_descending(alice_client, make_memory):
    make_memory("low", kind="note", importance=0.1)
    make_memory("high", kind="fact", importance=0.9)

    ascending = alice_client.get("/memories/?sort=importance").content.decode()
    descending = alice_client.get("/memories/?sort=-importance").content.decode()

    assert ascending.index(">low<") < ascending.index(">high<")
    assert descending.index(">high<") < descending.index(">low<")


@override_settings(MEMORYUI_LIST_PAGE_SIZE=2)
def test_pagination_splits_the_results_and_links_keep_the_filters(alice_client, make_memory):
    for i in range(5):
        make_memory(f"fact {i}", kind="fact")

    first = alice_client.get("/memories/?kind=fact")
    last = alice_client.get("/memories/?kind=fact&page=3")

    assert rows(first) == 2 and rows(last) == 1
    assert "Page 1 of 3" in first.content.decode()
    assert 'href="/memories/?kind=fact&amp;page=2"' in first.content.decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("kind=bogus", "kind: &#x27;bogus&#x27; is not a kind; use one of: entity, preference"),
        ("tier=hot", "tier: &#x27;hot&#x27; is not a tier"),
        ("status=deleted", "status: &#x27;deleted&#x27; is not a status"),
        ("sort=text", "sort: &#x27;text&#x27; is not a sort order"),
        ("page=abc", "page: page must be a whole number"),
        ("page=0", "page: page must be 1 or more"),
        ("page=9", "page: there is no page 9; these filters give 1 page"),
    ],
)
def test_invalid_filter_values_give_a_clear_message_not_a_500(alice_client, make_memory, query, message):
    make_memory("Prefers terse answers.")

    response = alice_client.get(f"/memories/?{query}")

    html = response.content.decode()
    assert response.status_code == 400
    assert 'data-state="invalid"' in html
    assert message in html
    assert 'href="/memories/"' in html  # the way out: clear the filters


def test_an_invalid_filter_over_htmx_returns_the_invalid_fragment_with_its_state_header(alice_client):
    response = alice_client.get("/memories/?kind=bogus", headers=HTMX)

    assert response.status_code == 400
    assert response["X-Memoryui-State"] == "invalid"
    assert "<html" not in response.content.decode()
    assert "is not a kind" in response.content.decode()


def test_no_match_shows_the_empty_state_with_what_to_do(alice_client, make_memory):
    make_memory("Prefers terse answers.")

    html = alice_client.get("/memories/?kind=relationship").content.decode()

    assert 'data-state="empty"' in html
    assert "No memories match these filters" in html
    assert "import_memories" in html
    assert 'href="/memories/new/"' in html


def test_filtering_over_htmx_returns_only_the_results_fragment(alice_client, make_memory):
    make_memory("Prefers terse answers.")
    make_memory("Runs 1000 RTX 4070s.", kind="fact")

    response = alice_client.get("/memories/?kind=fact", headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="filters"' not in html
    assert rows(response) == 1
    assert "HX-Request" in response["Vary"]


def test_a_history_restore_gets_the_full_page_not_the_fragment(alice_client):
    headers = {"HX-Request": "true", "HX-History-Restore-Request": "true"}

    html = alice_client.get("/memories/", headers=headers).content.decode()

    assert "<html" in html and 'id="filters"' in html


def test_the_filter_form_updates_results_with_htmx_and_still_works_without_javascript(alice_client):
    html = alice_client.get("/memories/").content.decode()

    assert 'id="filters"' in html
    assert 'method="get" action="/memories/"' in html
    assert 'hx-get="/memories/" hx-target="#results" hx-push-url="true"' in html


def test_the_list_runs_the_same_number_of_queries_for_3_or_40_rows(alice_client, make_memory):
    for i in range(3):
        make_memory(f"fact {i}", kind="fact")
    alice_client.get("/memories/")  # warm the session

    with CaptureQueriesContext(connection) as few:
        alice_client.get("/memories/")
    for i in range(3, 40):
        make_memory(f"fact {i}", kind="fact")
    with CaptureQueriesContext(connection) as many:
        alice_client.get("/memories/")

    assert len(many) == len(few) <= 6


def test_the_list_query_loads_only_the_columns_shown(alice_client, make_memory):
    make_memory("Prefers terse answers.", metadata={"big": "x" * 1000})

    with CaptureQueriesContext(connection) as queries:
        alice_client.get("/memories/")

    page_query = next(q["sql"] for q in queries if "LIMIT" in q["sql"] and "memoryui_memory" in q["sql"])
    assert '"metadata"' not in page_query
    assert '"content_hash"' not in page_query


def test_pinning_a_row_over_htmx_returns_the_updated_row(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.post(f"/memories/{memory.pk}/pin/", {"next": "/memories/"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.strip().startswith(f'<tr id="row-{memory.pk}"')
    assert 'data-pinned="yes"' in html and ">Unpin<" in html
    memory.refresh_from_db()
    assert memory.pinned
    assert memory.events.filter(action="pinned", actor="user:alice").exists()


def test_tombstoning_a_row_records_the_reason_and_shows_restore(alice_client, make_memory):
    memory = make_memory("在吗?", kind="note")

    response = alice_client.post(f"/memories/{memory.pk}/tombstone/", {"reason": "chit-chat"}, headers=HTMX)

    assert ">Restore<" in response.content.decode()
    memory.refresh_from_db()
    assert memory.status == Memory.Status.TOMBSTONED
    assert memory.tombstone_reason == "chit-chat"


def test_tombstone_without_a_reason_is_refused_into_the_alerts_region(alice_client, make_memory):
    memory = make_memory("在吗?", kind="note")

    response = alice_client.post(f"/memories/{memory.pk}/tombstone/", {"reason": "  "}, headers=HTMX)

    assert response.status_code == 400
    assert response["X-Memoryui-State"] == "invalid"
    assert response["HX-Retarget"] == "#alerts"
    assert "a tombstone needs a reason" in response.content.decode()
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE


def test_restoring_into_a_taken_entity_key_is_a_conflict_not_a_crash(alice_client, make_memory):
    old = make_memory("Phone 186.", kind="entity", entity_key="phone:186")
    old.tombstone("replaced", actor="test")
    make_memory("Phone is 186.", kind="entity", entity_key="phone:186")

    response = alice_client.post(f"/memories/{old.pk}/restore/", headers=HTMX)

    assert response.status_code == 409
    assert response["HX-Retarget"] == "#alerts"
    assert "already has entity_key phone:186" in response.content.decode()


def test_row_actions_work_without_javascript_and_return_to_the_list(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.post(f"/memories/{memory.pk}/pin/", {"next": "/memories/?kind=preference"})

    assert response.status_code == 302
    assert response["Location"] == "/memories/?kind=preference"
    assert MemoryEvent.objects.filter(memory=memory, action="pinned").count() == 1


def test_row_actions_never_redirect_off_site(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.post(f"/memories/{memory.pk}/pin/", {"next": "https://evil.example/"})

    assert response["Location"] == f"/memories/{memory.pk}/"


def test_an_unknown_row_action_is_not_found(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    assert alice_client.post(f"/memories/{memory.pk}/delete/").status_code == 404


def test_row_actions_only_accept_post(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    assert alice_client.get(f"/memories/{memory.pk}/pin/").status_code == 405


def test_column_headers_flip_the_sort_and_show_the_current_order(alice_client, make_memory):
    make_memory("Prefers terse answers.")

    default = alice_client.get("/memories/?kind=preference").content.decode()
    ascending = alice_client.get("/memories/?kind=preference&sort=importance").content.decode()

    assert 'href="/memories/?kind=preference&amp;sort=updated"' in default  # flip the current -updated
    assert "Updated ↓" in default
    assert 'href="/memories/?kind=preference&amp;sort=-importance"' in ascending
    assert "Importance ↑" in ascending
