"""One scope for every page: the session remembers it, pages open on it, the picker switches it,
and a scope that holds nothing is said so with the closest one that does."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from recall.models import GoldenSet
from web import scopes

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(make_memory):
    make_memory("Deploys go out on Fridays.", scope="agent:assistant", kind="fact")
    make_memory("Prefers terse answers.", scope="agent:assistant")
    make_memory("The staging cluster runs k3s.", scope="agent:assistant", kind="fact")
    make_memory("Releases ship on Tuesdays.", scope="agent:ops-bot", kind="procedure")
    make_memory("Likes green tea.", scope="user:42")
    make_memory("Lives in Berlin.", scope="user:42", kind="fact")


def _opened_on(html: str, name: str = "scope") -> str:
    """The value of the page form's scope field."""
    match = re.search(rf'<input[^>]*name="{name}"[^>]*value="([^"]*)"', html) or re.search(
        rf'<input[^>]*value="([^"]*)"[^>]*name="{name}"', html
    )
    assert match, f"no {name} field on the page"
    return match.group(1)


def test_without_a_chosen_scope_every_page_that_needs_one_opens_on_the_largest(alice_client, store):
    for url in ("/duplicates/", "/cleanup/", "/recall/"):
        response = alice_client.get(url)
        assert response.status_code == 200, url
        assert _opened_on(response.content.decode()) == "agent:assistant", url


def test_the_scope_a_page_fell_back_on_is_kept_for_the_next_page_and_shown_in_the_top_bar(alice_client, store):
    assert 'data-scope-current=""' in alice_client.get("/memories/").content.decode()  # all scopes
    assert 'data-scope-current="agent:assistant"' in alice_client.get("/cleanup/").content.decode()
    listed = alice_client.get("/memories/").content.decode()
    assert "Deploys go out on Fridays." in listed and "Likes green tea." not in listed


def test_a_page_opened_in_a_scope_makes_every_other_page_open_on_it(alice_client, store):
    assert alice_client.get("/duplicates/?scope=user:42").status_code == 200
    assert alice_client.session[scopes.SESSION_KEY] == "user:42"
    for url in ("/cleanup/", "/recall/"):
        assert _opened_on(alice_client.get(url).content.decode()) == "user:42", url
    listed = alice_client.get("/memories/").content.decode()
    assert "Likes green tea." in listed and "Deploys go out on Fridays." not in listed
    # The top bar says which scope the pages are in.
    assert 'data-scope-current="user:42"' in listed


def test_the_picker_lists_the_scopes_with_their_counts_the_largest_first(alice_client, store):
    response = alice_client.get("/scopes/?next=/duplicates/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    listed = re.findall(r'data-scope-option="([^"]+)">\s*<span class="scope-name mono">[^<]+</span>'
                        r'<span class="scope-count muted">(\d+)</span>', html)  # fmt: skip
    assert listed == [("agent:assistant", "3"), ("user:42", "2"), ("agent:ops-bot", "1")]
    assert "All scopes" in html and "<html" not in html  # the menu alone, for the top bar


def test_picking_a_scope_reloads_the_page_in_it_and_keeps_its_other_parameters(alice_client, store):
    response = alice_client.get(
        "/scopes/", {"use": "agent:ops-bot", "next": "/memories/?scope=user:42&kind=fact&page=3"}
    )
    assert response.status_code == 302
    target = urlsplit(response["Location"])
    assert target.path == "/memories/"
    assert parse_qs(target.query) == {"scope": ["agent:ops-bot"], "kind": ["fact"]}  # page 3 may not exist there
    assert alice_client.session[scopes.SESSION_KEY] == "agent:ops-bot"


def test_picking_from_a_page_of_one_memory_leads_to_the_memory_list_of_the_scope(alice_client, store):
    response = alice_client.get("/scopes/", {"use": "main", "next": "/memories/3f2a/"})
    assert response["Location"] == "/memories/?scope=agent%3Amain"
    assert alice_client.session[scopes.SESSION_KEY] == "agent:main"


def test_all_scopes_lists_everything_and_a_page_that_needs_one_falls_back_to_the_largest(alice_client, store):
    alice_client.get("/memories/?scope=user:42")
    response = alice_client.get("/scopes/", {"use": "", "next": "/memories/?scope=user:42"})
    assert response["Location"] == "/memories/?scope="
    assert alice_client.session[scopes.SESSION_KEY] == ""
    listed = alice_client.get("/memories/").content.decode()
    assert "Likes green tea." in listed and "Deploys go out on Fridays." in listed
    assert alice_client.get("/scopes/", {"use": "", "next": "/duplicates/?scope=user:42"})["Location"] == (
        "/duplicates/"
    )
    assert _opened_on(alice_client.get("/duplicates/").content.decode()) == "agent:assistant"


@pytest.mark.parametrize("next_url", ["https://elsewhere.example/", "//elsewhere.example/x", "javascript:alert(1)"])
def test_the_picker_never_leads_off_the_site(alice_client, store, next_url):
    response = alice_client.get("/scopes/", {"use": "user:42", "next": next_url})
    assert response.status_code == 302 and response["Location"] == "/?scope=user%3A42"


def test_picking_something_that_is_not_a_scope_says_why(alice_client, store):
    response = alice_client.get("/scopes/", {"use": "agent:has spaces", "next": "/memories/"})
    assert response.status_code == 400
    assert "use: " in response.content.decode()
    assert scopes.SESSION_KEY not in alice_client.session


def test_a_mistyped_scope_says_it_holds_nothing_and_suggests_the_closest(alice_client, store):
    response = alice_client.get("/recall/?scope=agent:asistant")
    html = response.content.decode()
    assert "No active memory is in the scope" in html and "agent:asistant" in html
    suggestion = re.search(r'Did you mean <a class="mono" href="([^"]+)">([^<]+)</a>', html)
    assert suggestion and suggestion.group(2) == "agent:assistant"
    assert parse_qs(urlsplit(suggestion.group(1).replace("&amp;", "&")).query)["scope"] == ["agent:assistant"]
    assert _opened_on(html) == "agent:asistant"  # the form shows what was asked, to be corrected
    # A scope that holds nothing is not remembered: the next page still opens where there is something.
    assert alice_client.session.get(scopes.SESSION_KEY) is None
    assert "No active memory" not in alice_client.get("/recall/?scope=agent:assistant").content.decode()


def test_a_scope_far_from_any_other_gets_no_suggestion(alice_client, store):
    html = alice_client.get("/duplicates/?scope=agent:zzzzzzzzzzzz").content.decode()
    assert "No active memory is in the scope" in html and "Did you mean" not in html


def test_the_api_does_not_touch_the_session_scope(alice_client, store):
    assert alice_client.get("/api/memories/?scope=user:42").status_code == 200
    assert scopes.SESSION_KEY not in alice_client.session


def test_closest_compares_whole_scopes_and_their_ids():
    known = ["agent:assistant", "agent:ops-bot", "user:42"]
    assert scopes.closest("agent:asistant", known) == "agent:assistant"
    assert scopes.closest("asistant", known) == "agent:assistant"
    assert scopes.closest("agent:opsbot", known) == "agent:ops-bot"
    assert scopes.closest("team:unrelated", known) is None


def test_golden_sets_and_a_new_memory_open_in_the_chosen_scope(alice_client, store):
    GoldenSet.objects.create(name="assistant basics", scope="agent:assistant")
    GoldenSet.objects.create(name="user basics", scope="user:42")
    alice_client.get("/memories/?scope=user:42")
    listed = alice_client.get("/recall/golden/").content.decode()
    assert "user basics" in listed and "assistant basics" not in listed
    assert "Show the 1 set of other scopes too" in listed
    assert _opened_on(listed) == "user:42"  # the new set's scope
    everything = alice_client.get("/recall/golden/?scope=").content.decode()
    assert "user basics" in everything and "assistant basics" in everything
    alice_client.get("/memories/?scope=user:42")
    assert _opened_on(alice_client.get("/memories/new/").content.decode()) == "user:42"
