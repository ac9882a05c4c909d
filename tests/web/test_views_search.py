"""The memory list's search box: hybrid search with its explanations, and the plain-text toggle."""

from __future__ import annotations

import socket

import pytest

from memoryui.models import IndexOutbox
from searchindex import indexes as search_indexes

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "results"}
STORE = [
    ("The user's phone number is 18600000000.", {"kind": "entity", "entity_key": "phone:18600000000"}),
    ("Remember: my lucky number is 88, use it for demo seeds.", {"kind": "remember"}),
    ("Releases go out on Thursdays after 14:00; nothing ships on Fridays.", {"kind": "procedure"}),
    ("用户喜欢简洁的回答，不要长篇大论。", {"kind": "preference"}),
    ("Staging runs on k3s with three nodes.", {"kind": "fact"}),
    ("The GPU fleet in the Dongguan IDC runs RTX4070 cards.", {"kind": "fact"}),
    ("<script>alert('lucky')</script> lucky number trap", {"kind": "note", "scope": "agent:test-w"}),
]


@pytest.fixture
def store(indexes, write):
    return {text: write(text, **fields) for text, fields in STORE}


def html_of(response) -> str:
    return response.content.decode()


def test_the_search_box_ranks_by_relevance_and_says_why(store, alice_client):
    response = alice_client.get("/memories/", {"q": "幸运数字", "scope": "main"})
    html = html_of(response)
    assert response.status_code == 200 and 'data-state="search"' in html
    above_the_line = html.split("data-below-floor")[0]
    lucky = store["Remember: my lucky number is 88, use it for demo seeds."]
    first_row = above_the_line.split('<tr id="row-')[1]
    assert first_row.startswith(str(lucky.pk)), "the lucky number ranks first"
    why = html.split(f'id="why-{lucky.pk}"')[1].split("</tr>")[0]
    words, numbers = why.split("<details")
    assert '<span class="label label-strong" data-why="label">Strong match</span>' in words
    assert "Found by " in words and "it holds all of the query&#x27;s words." in words
    assert "BM25" not in words and "fused" not in words.lower(), "the arithmetic waits behind “numbers”"
    assert "<summary" in numbers and "data-numbers" in numbers and " open" not in numbers.split(">")[0]
    assert '<dd data-why="bm25">#1 · score' in numbers and "covers 100% of the query" in numbers
    assert 'data-why="vector"' in numbers and 'data-why="fused"' in numbers
    assert "Answered: " in html


def test_the_header_counts_strong_weak_and_below_floor_apart_and_calls_only_strong_relevant(store, alice_client):
    response = alice_client.get("/memories/", {"q": "lucky number", "scope": "main"})
    result = response.context["results"]["search"]["result"]
    labels = [found.candidate.label for found in result.candidates]
    head = html_of(response).split('data-state="search"')[1].split("</div>")[0]
    strong, weak = labels.count("strong"), labels.count("weak")
    assert strong >= 1 and strong + weak + labels.count("below_floor") == len(labels)
    assert f'<b data-count="strong">{strong}</b> relevant memor' in head
    assert f'<span data-count="weak">{weak}</span> weak match' in head
    assert f'<span data-count="below">{len(labels) - strong - weak}</span> below the floor' in head


def test_a_query_nothing_answers_keeps_its_ranking_collapsed_under_the_floor_line(store, alice_client):
    html = html_of(alice_client.get("/memories/", {"q": "quantum entanglement"}, headers=HTMX))
    assert "Nothing relevant to" in html and 'data-state="empty"' in html and "Not answered: " in html
    above, below = html.split("data-below-floor")
    assert '<tr id="row-' not in above, "no result above the line"
    assert "<details" in above[-200:] and " open" not in above[-200:], "the ranking is collapsed"
    assert "relevance floor" in below and below.count('<tr id="row-') == len(STORE)  # every scope: all of them
    assert "below floor" in below


def test_the_plain_text_toggle_matches_substrings_in_any_status(store, alice_client):
    html = html_of(alice_client.get("/memories/", {"q": "thursdays", "match": "text"}))
    assert 'data-state="search"' not in html and "Releases go out on Thursdays" in html
    hybrid = html_of(alice_client.get("/memories/", {"q": "thursdays"}))
    assert "match=text" in hybrid and "plain-text match instead" in hybrid


def test_hybrid_search_over_tombstoned_memories_falls_back_to_plain_text_and_says_so(
    store, alice_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        store["Staging runs on k3s with three nodes."].tombstone("moved", actor="test")
    html = html_of(alice_client.get("/memories/", {"q": "k3s", "status": "tombstoned"}))
    assert "Hybrid search covers active memories" in html and "Staging runs on k3s" in html


def test_the_other_filters_narrow_hybrid_results_and_the_hidden_ones_are_counted(store, alice_client):
    html = html_of(alice_client.get("/memories/", {"q": "lucky number", "kind": "entity"}))
    assert "Remember: my lucky number" not in html.split("near-misses")[0]
    assert "hidden by the kind, tier, pinned or source filter" in html


def test_memory_text_in_search_results_is_escaped(store, alice_client):
    html = html_of(alice_client.get("/memories/", {"q": "lucky number trap"}))
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html


def test_pending_index_work_is_announced_beside_the_results(store, alice_client, make_memory):
    make_memory("Written but not yet indexed: the VPN config lives in vault.", kind="fact")
    assert IndexOutbox.objects.count() == 1
    html = html_of(alice_client.get("/memories/", {"q": "vpn config"}))
    assert "1 change is still waiting to reach the search indexes" in html


def test_a_down_vector_server_degrades_the_search_and_both_down_is_the_unavailable_panel(
    store, alice_client, settings, tmp_path
):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        settings.CHROMA_URL = f"http://127.0.0.1:{probe.getsockname()[1]}"
    search_indexes.close_indexes()
    html = html_of(alice_client.get("/memories/", {"q": "18600000000"}))
    assert "vector index unavailable, answered from BM25 alone" in html
    assert "The user&#x27;s phone number is 18600000000." in html

    broken = tmp_path / "not-a-directory"
    broken.write_text("x")
    settings.MEMORYUI_INDEX_DIR = broken
    settings.MEMORYUI_LEXICAL = "whoosh"  # a BM25 index that can be down while the database is up
    search_indexes.close_indexes()
    response = alice_client.get("/memories/", {"q": "18600000000"}, headers=HTMX)
    assert response.status_code == 503 and response["X-Memoryui-State"] == "unavailable"
    assert "search index" in html_of(response)
