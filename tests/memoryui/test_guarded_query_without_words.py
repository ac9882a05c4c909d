"""A query with no letter or digit (`!!`, `??`, an emoji) is a query with nothing to search for:
`/api/search/`, `POST /api/recall/` and the MCP tools all answer it 200, nothing found and why,
and the schema allows it on both. A query of nothing visible is a 400 on both, as the schema's
pattern (the same on both) says.

Who is who: alice's session uses the API (a superuser, every scope); the local stdio caller uses
the MCP tools on agent:main.
"""

from __future__ import annotations

import re

import pytest

from api.schema import VISIBLE_TEXT
from mcpserver import tools
from recall.pipeline import recall
from searchindex.search import NO_WORDS, has_words, search

pytestmark = pytest.mark.django_db

NO_WORD_QUERIES = ["!!", "??", "+", "…", "👍", "-- // --"]
INVISIBLE = ["\u200b\u2060", "\ufeff", "\x01\x02"]


@pytest.fixture
def stored(indexes, write):
    write("The user's lucky numbers are 88 66 99.", kind="fact")
    write("Never add Co-Authored-By to commits!!", kind="preference")


@pytest.mark.parametrize("query", NO_WORD_QUERIES)
def test_search_and_recall_answer_a_query_without_words_alike_with_nothing_found(alice_client, stored, query):
    searched = alice_client.get("/api/search/", {"q": query, "scope": "agent:main"})
    recalled = alice_client.post("/api/recall/", {"query": query, "scope": "agent:main"}, "application/json")

    assert searched.status_code == 200 and recalled.status_code == 200, (searched.content, recalled.content)
    found, answer = searched.json(), recalled.json()
    assert found["results"] == [] and found["below_floor"] == []
    assert found["answer"]["answered"] is False and found["answer"]["reason"] == NO_WORDS
    assert answer["selected"] == [] and answer["candidates"] == [] and answer["block"] == ""
    assert answer["answer"]["answered"] is False and answer["answer"]["reason"] == NO_WORDS
    assert any(NO_WORDS in notice for notice in found["notices"])
    assert any(NO_WORDS in notice for notice in answer["notices"])


@pytest.mark.parametrize("query", INVISIBLE)
def test_a_query_of_nothing_visible_is_a_400_on_both_naming_the_query(alice_client, query):
    searched = alice_client.get("/api/search/", {"q": query})
    recalled = alice_client.post("/api/recall/", {"query": query, "scope": "agent:main"}, "application/json")

    assert searched.status_code == 400 and list(searched.json()["error"]["details"]) == ["q"]
    assert recalled.status_code == 400 and list(recalled.json()["error"]["details"]) == ["query"]


def test_the_schema_gives_both_queries_the_same_pattern_which_says_what_is_refused(alice_client):
    schema = alice_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    recall_query = schema["components"]["schemas"]["RecallRequestRequest"]["properties"]["query"]["pattern"]
    (search_q,) = [
        p["schema"]["pattern"] for p in schema["paths"]["/api/search/"]["get"]["parameters"] if p["name"] == "q"
    ]

    assert recall_query == search_q == VISIBLE_TEXT
    assert all(re.search(VISIBLE_TEXT, query) for query in NO_WORD_QUERIES)  # allowed, and answered 200
    assert not any(re.search(VISIBLE_TEXT, query) for query in ["", *INVISIBLE])  # refused, and answered 400
    recall_responses = schema["paths"]["/api/recall/"]["post"]["responses"]
    assert "200" in recall_responses and "400" in recall_responses


def test_the_mcp_tools_answer_it_as_the_api_does(stored):
    local = tools.Caller(scope="agent:main")

    searched = tools.search_memory(local, "!!")
    recalled = tools.recall(local, "!!")

    assert searched["results"] == [] and searched["answer"]["reason"] == NO_WORDS
    assert recalled["selected"] == [] and recalled["answer"]["reason"] == NO_WORDS


def test_words_in_any_script_are_words_and_found():
    assert all(has_words(query) for query in ["88", "仓库", "Привет", "x!", "+db-stg-3"])
    assert not any(has_words(query) for query in NO_WORD_QUERIES)


def test_a_query_with_words_beside_the_marks_is_searched(stored):
    found = search("lucky numbers!!", scopes=["agent:main"], floor=False)
    recalled = recall("lucky numbers??", scope="agent:main", selector_config=None)

    assert found.answer.reason != NO_WORDS and found.results
    assert recalled.answer.reason != NO_WORDS and recalled.candidates
