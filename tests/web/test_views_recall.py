"""The recall pages: playground (run, why not, save trace), traces, profiles and golden sets."""

from __future__ import annotations

import re

import pytest
from django.core import signing

from memoryui.models import Memory
from recall.models import GoldenQuery, GoldenSet, RecallProfile, RecallTrace
from web import demo
from web.views_recall import TRACE_SALT

pytestmark = pytest.mark.django_db

SCHEMA = "Parameter schema for article-list-query: page_size int ≤ 50, query string."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team."
PHONE = "The user's phone number is 18600000000."
SCRIPT = "<script>alert('x')</script> article-list-query returns HTML in errors"
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    memories = {text: write(text, kind="procedure") for text in (SCHEMA, ESCALATION, SCRIPT)}
    memories[PHONE] = write(PHONE, kind="entity", entity_key="phone:18600000000")
    memories["deploy"] = write("Deploys go out on Thursdays after the smoke tests.", kind="procedure")
    memories["other"] = write("Escalation for article-list-query in agent:other.", scope="agent:other")
    return memories


def run(client, headers: dict | None = None, **params):
    params.setdefault("scope", "agent:main")
    return client.get("/recall/", params, **(headers or {}))


def row_of(html: str, memory: Memory) -> str:
    match = re.search(rf'<tr data-candidate="{memory.pk}" data-decision="([a-z_]+)">', html)
    assert match, f"no candidate row for {memory.text!r}"
    return match.group(1)


def test_the_playground_asks_for_a_query_and_needs_a_login(client, alice_client):
    assert client.get("/recall/").status_code == 302
    page = alice_client.get("/recall/")
    assert page.status_code == 200
    assert b"Type a query and press Recall" in page.content


def test_a_run_shows_each_candidates_decisions_the_answer_path_and_the_block(store, alice_client):
    response = run(alice_client, q="article-list-query", tools="mcp__ata__article-list-query")
    html = response.content.decode()
    assert response.status_code == 200
    assert row_of(html, store[SCHEMA]) == "filtered"
    assert "active tool mcp__ata__article-list-query + marker &#x27;parameter schema&#x27;" in html
    assert row_of(html, store[ESCALATION]) == "selected"
    assert "data-answered-by>heuristic</b>" in html and "selector not configured" in html
    block = re.search(r"<pre class=\"recall-block\" data-block>(.*?)</pre>", html, re.S).group(1)
    assert f"[{store[ESCALATION].pk}]" in block and "for this turn only" in block
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html  # memory text is escaped
    assert Memory.objects.get(pk=store[ESCALATION].pk).access_count == 0  # playground runs are not recalls


def test_htmx_gets_only_the_result_fragment(store, alice_client):
    response = run(alice_client, HX, q="18600000000")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and "recall-form" not in html
    assert row_of(html, store[PHONE]) == "selected"


def test_bad_input_names_the_field(store, alice_client):
    blank = run(alice_client, q="  ")
    assert blank.status_code == 400 and b"q: This field is required." in blank.content
    scope = run(alice_client, q="deploys", scope="Not A Scope!")
    assert scope.status_code == 400 and b"scope:" in scope.content
    syntax = run(alice_client, q="select:")
    assert syntax.status_code == 400 and b"select: names no memory" in syntax.content


def test_why_not_recalled_follows_one_memory_to_the_stage_that_dropped_it(store, alice_client):
    tools = "ata::article-list-query"
    filtered = run(alice_client, q="article-list-query", tools=tools, why=str(store[SCHEMA].pk)).content.decode()
    stages = re.search(r"<ol class=\"stages\">(.*?)</ol>", filtered, re.S).group(1)
    assert "<b>heuristic</b>: filtered: active tool ata::article-list-query" in stages
    other = run(alice_client, q="article-list-query", why=str(store["other"].pk)).content.decode()
    assert "It is in scope agent:other; this recall ran in agent:main." in other
    RecallProfile.objects.create(name="narrow", knobs={"vector_k": 1, "bm25_k": 1})
    missed = run(alice_client, q="18600000000", profile="narrow", why=str(store["deploy"].pk)).content.decode()
    assert "it is in neither the vector top 1 nor the BM25 top 1 for this query" in missed
    assert re.search(r"its similarity to the query is 0\.\d{3}; the last vector candidate had 0\.\d{3}", missed)
    assert "it holds 0 of the query&#x27;s 1 search terms" in missed
    store["deploy"].tombstone("outdated", actor="test")
    gone = run(alice_client, q="deploys", why=str(store["deploy"].pk)).content.decode()
    assert "It is tombstoned (outdated)" in gone


def test_a_run_is_saved_as_shown_and_reopens_from_the_trace_list(store, alice_client):
    html = run(alice_client, q="article-list-query", tools="mcp__ata__article-list-query").content.decode()
    payload = re.search(r'name="payload" value="([^"]+)"', html).group(1)
    saved = alice_client.post("/recall/traces/save/", {"payload": payload, "note": "schema note must stay out"})
    trace = RecallTrace.objects.get()
    assert saved.status_code == 302 and saved["Location"] == f"/recall/traces/{trace.pk}/"
    assert trace.source == "playground" and trace.actor == "user:alice" and trace.note == "schema note must stay out"
    assert str(store[ESCALATION].pk) in trace.selected_ids and str(store[SCHEMA].pk) not in trace.selected_ids
    assert trace.tools == ["mcp__ata__article-list-query"]
    listing = alice_client.get("/recall/traces/").content.decode()
    assert f'data-trace="{trace.pk}"' in listing
    detail = alice_client.get(trace.get_absolute_url()).content.decode()
    assert row_of(detail, store[SCHEMA]) == "filtered" and "schema note must stay out" in detail
    assert re.search(r"<pre class=\"recall-block\" data-block>(.*?)</pre>", detail, re.S).group(1) in html


def test_saving_over_htmx_keeps_the_playground_and_links_the_trace_in_the_messages(store, alice_client):
    html = run(alice_client, q="article-list-query", tools="mcp__ata__article-list-query").content.decode()
    payload = re.search(r'name="payload" value="([^"]+)"', html).group(1)
    clicked = {**HX, "HTTP_X_MEMORYUI_REPLACE_ALERTS": "1"}
    saved = alice_client.post("/recall/traces/save/", {"payload": payload, "note": "kept"}, **clicked)
    trace = RecallTrace.objects.get()
    assert saved.status_code == 200 and saved["HX-Reswap"] == "none"  # nothing on the page is replaced
    assert "HX-Redirect" not in saved
    alerts = saved.content.decode()
    assert 'id="alerts"' in alerts and 'hx-swap-oob="true"' in alerts
    assert f'Trace saved. <a href="{trace.get_absolute_url()}" data-saved-trace>Open the trace</a>' in alerts


def test_a_forged_or_stale_payload_is_refused(store, alice_client):
    forged = signing.dumps({"fields": {}, "profile": None}, salt="another-salt")
    response = alice_client.post("/recall/traces/save/", {"payload": forged}, **HX)
    assert response.status_code == 400 and b"cannot be saved" in response.content
    assert not RecallTrace.objects.exists()
    assert signing.loads(signing.dumps({"a": 1}, salt=TRACE_SALT), salt=TRACE_SALT) == {"a": 1}


def test_a_profile_stores_only_the_knobs_that_differ_and_names_bad_ones(store, alice_client):
    page = alice_client.get("/recall/profiles/new/")
    assert page.status_code == 200 and b'name="rrf_k"' in page.content
    bad = alice_client.post("/recall/profiles/new/", {"name": "strict", "rrf_k": "-3", "limit": "many"})
    assert bad.status_code == 400
    assert (
        b"<b>RRF k</b>: must be between" in bad.content and b"<b>Memories recalled</b>: must be a number" in bad.content
    )
    ok = alice_client.post(
        "/recall/profiles/new/",
        {"name": "strict", "limit": "2", "selector": "off", "schema_markers": "parameter schema\n调用格式"},
    )
    assert ok.status_code == 302
    profile = RecallProfile.objects.get(name="strict")
    assert profile.knobs == {"limit": 2, "selector": False, "schema_markers": ["parameter schema", "调用格式"]}
    assert profile.settings.retrieval.limit == 2
    listing = alice_client.get("/recall/profiles/").content.decode()
    assert 'data-profile="strict"' in listing and 'data-profile="default"' in listing
    result = run(alice_client, q="article-list-query", profile="strict").content.decode()
    assert 'profile <span class="mono">strict</span>' in result and "selector off in this profile" in result


def test_golden_sets_run_against_a_profile_and_compare_two(store, alice_client):
    created = alice_client.post("/recall/golden/", {"name": "ata", "scope": "main"})
    golden = GoldenSet.objects.get()
    assert created.status_code == 302 and golden.scope == "agent:main"
    url = golden.get_absolute_url()
    bad = alice_client.post(url, {"query": "x", "expected_text": f"nonsense, {store['other'].pk}"})
    assert bad.status_code == 400
    assert b"&#x27;nonsense&#x27; is not a memory id" in bad.content and b"not in this set" in bad.content
    add = alice_client.post(url, {"query": "article-list-query escalation", "expected_text": str(store[ESCALATION].pk)})
    assert add.status_code == 302
    alice_client.post(url, {"query": "quantum entanglement of photons", "expected_text": "", "silent": "on"})
    assert GoldenQuery.objects.count() == 2
    RecallProfile.objects.create(
        name="nothing", knobs={"strong_margin": 2.0, "strong_coverage": 2.0, "agree_margin": 2.0}
    )
    result = alice_client.get(f"/recall/golden/{golden.pk}/run/", {"a": "default", "b": "nothing"}, **HX)
    html = result.content.decode()
    assert result.status_code == 200 and "<html" not in html
    a_cells = dict(re.findall(r'data-metric="([^"]+)">.*?data-profile-a[^>]*>([^<]+)<', html, re.S))
    assert a_cells["top1"] == "100%" and a_cells["no_result_recall"] == "100%"
    b_cells = dict(re.findall(r'data-metric="([^"]+)">(?:(?!</tr>).)*?data-profile-b[^>]*>([^<]+)<', html, re.S))
    assert b_cells["top1"] == "0%"
    assert "− Escalation path for article-list-query" in html  # moved out with the strict floors


def test_golden_runs_judge_the_block_and_a_failing_row_opens_the_playground_on_why_not(store, alice_client):
    golden = GoldenSet.objects.create(name="block", scope="agent:main")
    # Expects a memory the query does not find: the row fails, and its link asks why not.
    GoldenQuery.objects.create(
        golden_set=golden, query="article-list-query escalation", expected_ids=[str(store[PHONE].pk)]
    )
    html = alice_client.get(f"/recall/golden/{golden.pk}/run/", {"a": "default"}, **HX).content.decode()
    cells = dict(re.findall(r'data-metric="([^"]+)">.*?data-profile-a[^>]*>([^<]+)<', html, re.S))
    assert cells["block_precision"] == "0%" and "handed over nothing unexpected" in html
    assert re.search(r'data-unexpected="\d+">handed over \d+ unexpected', html)
    link = re.search(r'<a href="([^"]+)" data-why-link>Why not recalled\?', html).group(1).replace("&amp;", "&")
    assert "q=article-list-query+escalation" in link and "scope=agent%3Amain" in link
    assert f"why={store[PHONE].pk}" in link and "profile=default" in link
    followed = alice_client.get(link).content.decode()
    assert "Why not recalled?" in followed and str(store[PHONE].pk) in followed


def test_each_candidate_and_each_memory_page_lead_to_why_not_recalled(store, alice_client):
    html = run(alice_client, q="article-list-query", tools="ata::article-list-query").content.decode()
    link = re.search(rf'<a href="([^"]+{store[SCHEMA].pk})" data-why-link>', html).group(1).replace("&amp;", "&")
    followed = alice_client.get(link).content.decode()
    assert "<b>heuristic</b>: filtered: active tool ata::article-list-query" in followed
    detail = alice_client.get(store[PHONE].get_absolute_url()).content.decode()
    form = re.search(r'<form class="why-form" method="get" action="/recall/" data-why-form>(.*?)</form>', detail, re.S)
    assert f'name="why" value="{store[PHONE].pk}"' in form.group(1)
    assert 'name="scope" value="agent:main"' in form.group(1)


def test_candidates_not_recalled_are_grouped_under_their_stage_and_the_selector_column_says_how_to_set_one_up(
    store, alice_client
):
    html = run(alice_client, q="article-list-query", tools="mcp__ata__article-list-query").content.decode()
    recalled, _, rest = html.partition('<details class="candidate-group"')
    assert f'data-candidate="{store[ESCALATION].pk}"' in recalled  # recalled: shown in full, not collapsed
    filtered = re.search(
        r'data-stage="filtered">\s*<summary data-stage-summary>(.*?)</summary>(.*?)</details>', rest, re.S
    )
    assert "1 filtered by the active-tool filter" in filtered.group(1)
    assert f'data-candidate="{store[SCHEMA].pk}" data-decision="filtered"' in filtered.group(2)
    assert "it names mcp__ata__article-list-query, a tool the agent is using right now" in filtered.group(2)
    assert 'data-selector-hint="not_configured"' in html and 'href="/recall/llm/#local-llm"' in html


def test_the_empty_playground_offers_the_demo_example_once_the_demo_is_loaded(alice_client):
    assert b"data-example" not in alice_client.get("/recall/").content
    demo.seed_clean()
    page = alice_client.get("/recall/").content.decode()
    link = re.search(r'<a class="btn btn-sm" href="([^"]+)" data-example>', page).group(1).replace("&amp;", "&")
    assert (
        link == "/recall/?q=how+do+I+call+article-list-query&scope=agent%3Aops-bot&tools=mcp__ata__article-list-query"
    )


def test_a_golden_query_takes_none_or_short_ids_and_is_removed_only_when_confirmed(store, alice_client):
    golden = GoldenSet.objects.create(name="ata", scope="agent:main")
    url = golden.get_absolute_url()
    short = str(store[ESCALATION].pk)[:8]
    assert alice_client.post(url, {"query": "who owns article-list-query", "expected_text": short}).status_code == 302
    assert alice_client.post(url, {"query": "quantum entanglement", "expected_text": "none"}).status_code == 302
    assert list(golden.queries.values_list("expected_ids", flat=True)) == [[str(store[ESCALATION].pk)], []]
    query = golden.queries.first()
    delete = f"/recall/golden/{golden.pk}/queries/{query.pk}/delete/"
    asked = alice_client.post(delete)
    assert (
        asked.status_code == 200 and "Remove the golden query “who owns article-list-query”?" in asked.content.decode()
    )
    assert golden.queries.count() == 2
    assert alice_client.post(delete, {"confirmed": "1"}).status_code == 302
    assert golden.queries.count() == 1


def test_the_playground_tries_another_block_cut_and_says_it_in_each_reason(store, alice_client):
    strict = run(alice_client, q="article-list-query", cut="1.01").content.decode()
    loose = run(alice_client, q="article-list-query", cut="0").content.decode()
    assert strict.count('data-decision="selected"') == 1
    assert loose.count('data-decision="selected"') > 1
    assert "the cut is 101%" in strict and "the cut is 0%" in loose
    bad = run(alice_client, q="article-list-query", cut="2")
    assert bad.status_code == 400 and b"cut" in bad.content
