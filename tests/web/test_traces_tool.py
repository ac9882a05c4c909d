"""The trace pages as a tool: the list's columns and filters (in the database), text search over
queries, two traces compared side by side, and a saved trace's "why not recalled?"."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from recall.models import RecallTrace, trace_columns
from recall.pipeline import recall

pytestmark = pytest.mark.django_db

NOT_CONFIGURED = "selector not configured (no MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)"


def memory(n: int) -> dict:
    return {"id": str(uuid.UUID(int=n)), "text": f"memory number {n}", "kind": "fact", "tier": "working", "score": 1.0}


def make_trace(
    query: str = "the user's phone",
    *,
    answered: bool = True,
    selected: tuple[int, ...] = (),
    latency: float | None = 20.0,
    minutes_ago: float = 0,
    knobs: dict | None = None,
    candidates: list[dict] | None = None,
    **fields,
) -> RecallTrace:
    """A trace as the pipeline saves one, its columns read from its result as on save."""
    result = {
        "answer": {"answered": answered, "reason": "strong match" if answered else "no strong match", "signals": {}},
        "selected": [memory(n) for n in selected],
        "candidates": candidates or [],
        "timings_ms": {} if latency is None else {"total": latency},
        "block": "",
    }
    values = {
        "source": "api", "actor": "token:agent", "scope": "agent:main", "limit": 5, "profile_name": "default",
        "mode": "heuristic", "fallback_reason": NOT_CONFIGURED, **fields,
    }  # fmt: skip
    return RecallTrace.objects.create(
        query=query,
        knobs=knobs or {"rrf_k": 60, "vector_k": 20},
        selected_ids=[memory(n)["id"] for n in selected],
        result=result,
        created_at=timezone.now() - timedelta(minutes=minutes_ago),
        **trace_columns(result),
        **values,
    )


def listed(client, **params) -> list[str]:
    """The ids of the traces the list shows for these filters, in order."""
    response = client.get("/recall/traces/", params)
    assert response.status_code == 200, response.content
    return re.findall(r'<tr data-trace="([0-9a-f-]{36})"', response.content.decode())


def test_the_list_needs_a_login_and_shows_outcome_latency_block_source_scope_profile_and_query(client, alice_client):
    assert client.get("/recall/traces/").status_code == 302
    make_trace("deploy day?", selected=(1, 2, 3), latency=1234.4, source="mcp", scope="agent:ops", profile_name="wide")
    make_trace("quantum entanglement", answered=False, latency=8.0, source="cli")
    html = alice_client.get("/recall/traces/", {"scope": ""}).content.decode()
    rows = re.findall(r'<tr data-trace="[^"]+" data-outcome="(\w+)" data-source="(\w+)">(.*?)</tr>', html, re.S)
    assert [(outcome, source) for outcome, source, _ in rows] == [("silent", "cli"), ("answered", "mcp")]
    silent, answered = rows[0][2], rows[1][2]
    assert (
        "quantum entanglement" in silent and "8 ms" in silent and '<td class="num small" data-block-size>0<' in silent
    )
    assert "by the heuristic" in silent and "selector not configured" in silent
    assert "deploy day?" in answered and "1234 ms" in answered and "data-block-size>3<" in answered
    assert "agent:ops" in answered and "wide" in answered


def test_each_filter_keeps_only_its_traces_and_is_applied_in_the_database(alice_client, django_assert_max_num_queries):
    silent = make_trace("quantum", answered=False, source="cli", minutes_ago=30)
    by_selector = make_trace("phone", mode="selector", fallback_reason="", source="mcp", minutes_ago=120)
    playground = make_trace("deploys", source="playground", profile_name="narrow", minutes_ago=3 * 24 * 60)
    other_scope = make_trace("phone", scope="agent:other", minutes_ago=20 * 24 * 60)
    everything = [silent, by_selector, playground, other_scope]
    ids = {trace.pk: str(trace.pk) for trace in everything}

    def only(*traces):
        return [ids[t.pk] for t in traces]

    assert listed(alice_client, scope="") == only(*everything)  # newest first
    assert listed(alice_client, scope="", outcome="silent") == only(silent)
    assert listed(alice_client, scope="", outcome="answered") == only(by_selector, playground, other_scope)
    assert listed(alice_client, scope="", outcome="selector") == only(by_selector)
    assert listed(alice_client, scope="", outcome="heuristic") == only(silent, playground, other_scope)
    assert listed(alice_client, scope="", source="playground") == only(playground)
    assert listed(alice_client, scope="", source="mcp") == only(by_selector)
    assert listed(alice_client, scope="agent:other") == only(other_scope)
    assert listed(alice_client, scope="", profile="narrow") == only(playground)
    assert listed(alice_client, scope="", within="hour") == only(silent)
    assert listed(alice_client, scope="", within="day") == only(silent, by_selector)
    assert listed(alice_client, scope="", within="week") == only(silent, by_selector, playground)
    day = timezone.localdate()
    assert listed(alice_client, scope="", since=str(day - timedelta(days=4)), until=str(day - timedelta(days=2))) == (
        only(playground)
    )
    assert listed(alice_client, scope="", until=str(day - timedelta(days=10))) == only(other_scope)
    three_days_ago = str(day - timedelta(days=3))  # from and to the same day: that whole day
    assert listed(alice_client, scope="", since=three_days_ago, until=three_days_ago) == only(playground)
    assert listed(alice_client, scope="", source="cli", outcome="answered") == []
    with django_assert_max_num_queries(6):  # session, user, count, page, profiles: never a row-by-row check
        alice_client.get("/recall/traces/", {"scope": "", "outcome": "silent", "q": "quan"})


def test_text_search_finds_queries_by_any_case_and_escapes_them(alice_client):
    phone = make_trace("What is the user's PHONE number?")
    script = make_trace("<script>alert('x')</script> phone")
    make_trace("deploy day")
    assert listed(alice_client, scope="", q="phone") == [str(script.pk), str(phone.pk)]
    assert listed(alice_client, scope="", q="Phone Number") == [str(phone.pk)]
    one = alice_client.get("/recall/traces/", {"scope": "", "q": "Phone Number"}).content.decode()
    assert "1 trace matches these filters." in one
    none = alice_client.get("/recall/traces/", {"scope": "", "q": "galaxies"}).content.decode()
    assert "No trace matches these filters" in none and 'data-trace="' not in none
    html = alice_client.get("/recall/traces/", {"scope": "", "q": "<script>"}).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    assert 'value="&lt;script&gt;"' in html  # the search box shows what was searched, escaped


def test_a_bad_value_is_an_error_next_to_its_field_not_a_crash(alice_client):
    make_trace()
    response = alice_client.get("/recall/traces/", {"scope": "", "since": "yesterday", "outcome": "great"})
    html = response.content.decode()
    assert response.status_code == 400
    since = re.search(r'<div class="filter filter-since has-error" data-filter="since">(.*?)</div>', html, re.S)
    assert since and "&#x27;yesterday&#x27; is not a date: use YYYY-MM-DD" in since.group(1)
    outcome = re.search(r'<div class="filter filter-outcome has-error" data-filter="outcome">(.*?)</div>', html, re.S)
    assert outcome and "&#x27;great&#x27; is not an outcome; use one of: answered, silent" in outcome.group(1)
    backwards = alice_client.get("/recall/traces/", {"scope": "", "since": "2026-05-02", "until": "2026-05-01"})
    assert backwards.status_code == 400 and b"must not be before since" in backwards.content
    assert 'data-trace="' not in backwards.content.decode()


def test_the_list_sorts_by_time_latency_or_block_size(alice_client):
    slow = make_trace("slow", latency=900.0, selected=(1,), minutes_ago=3)
    untimed = make_trace("untimed", latency=None, selected=(1, 2, 3), minutes_ago=2)
    fast = make_trace("fast", latency=4.0, minutes_ago=1)
    assert listed(alice_client, scope="") == [str(fast.pk), str(untimed.pk), str(slow.pk)]
    assert listed(alice_client, scope="", sort="oldest") == [str(slow.pk), str(untimed.pk), str(fast.pk)]
    assert listed(alice_client, scope="", sort="slowest") == [str(slow.pk), str(fast.pk), str(untimed.pk)]
    assert listed(alice_client, scope="", sort="largest") == [str(untimed.pk), str(slow.pk), str(fast.pk)]
    wrong = alice_client.get("/recall/traces/", {"scope": "", "sort": "loudest"})
    assert wrong.status_code == 400 and b"&#x27;loudest&#x27; is not a sort order" in wrong.content


def test_the_pager_keeps_the_filters(alice_client):
    for n in range(52):
        make_trace(f"phone {n}", source="cli", minutes_ago=n)
    make_trace("phone from the api", source="api")
    html = alice_client.get("/recall/traces/", {"scope": "", "source": "cli", "q": "phone"}).content.decode()
    older = re.search(r'<a href="\?([^"]+)" data-pager="older">', html).group(1)
    params = parse_qs(older.replace("&amp;", "&"), keep_blank_values=True)
    assert params == {"scope": [""], "source": ["cli"], "q": ["phone"], "page": ["2"]}
    second = alice_client.get("/recall/traces/", {"scope": "", "source": "cli", "q": "phone", "page": 2})
    assert len(re.findall(r'<tr data-trace="', second.content.decode())) == 2
    assert "phone from the api" not in second.content.decode()


# --- compare ---------------------------------------------------------------------------------------


def test_two_traces_side_by_side_mark_what_differs_and_what_only_one_block_holds(alice_client):
    candidates = [{"id": memory(3)["id"], "decision": "below_floor"}]
    a = make_trace("phone?", selected=(1, 2), latency=40.0, knobs={"rrf_k": 60, "vector_k": 20})
    b = make_trace(
        "Phone number?", selected=(2,), latency=900.0, knobs={"rrf_k": 10, "vector_k": 20}, candidates=candidates,
        mode="selector", fallback_reason="", profile_name="wide",
    )  # fmt: skip
    c = make_trace("phone?", selected=(3,), knobs={"rrf_k": 60, "vector_k": 20})
    response = alice_client.get("/recall/traces/compare/", {"a": a.pk, "b": b.pk})
    html = response.content.decode()
    assert response.status_code == 200
    differs = set(re.findall(r'data-setting="([a-z ]+)" data-differs', html))
    assert differs == {"query", "profile", "outcome", "block"}
    assert re.findall(r'data-knob="([a-z_]+)"', html) == ["rrf_k"]
    assert "40 ms" in html and "900 ms" in html
    sides = dict(re.findall(r'data-block-side="(\w)">(.*?)</div>\s*(?=<div class="compare-block"|</div>)', html, re.S))
    in_a = re.findall(r'data-memory="([0-9a-f-]+)" data-in-both="(\w+)"', sides["a"])
    assert in_a == [(memory(1)["id"], "no"), (memory(2)["id"], "yes")]
    assert "in B: <span data-elsewhere>not a candidate</span>" in sides["a"]
    assert re.findall(r'data-memory="([0-9a-f-]+)" data-in-both="(\w+)"', sides["b"]) == [(memory(2)["id"], "yes")]
    same = alice_client.get("/recall/traces/compare/", {"a": a.pk, "b": c.pk}).content.decode()
    assert "None: both ran with the same 2 knobs." in same
    assert "in B: <span data-elsewhere>not a candidate</span>" in same
    b_side = alice_client.get("/recall/traces/compare/", {"a": c.pk, "b": b.pk}).content.decode()
    assert "in B: <span data-elsewhere>below floor</span>" in b_side  # b's candidate, left below the floor


def test_the_lists_compare_form_leads_to_the_comparison_of_the_two_checked(alice_client):
    a, b = make_trace("one"), make_trace("two")
    html = alice_client.get("/recall/traces/", {"scope": ""}).content.decode()
    assert '<form id="compare-form"' in html and f'name="ids" value="{a.pk}" form="compare-form"' in html
    response = alice_client.get("/recall/traces/compare/", {"ids": [str(a.pk), str(b.pk)]})
    assert response.status_code == 302
    assert parse_qs(urlsplit(response["Location"]).query) == {"a": [str(a.pk)], "b": [str(b.pk)]}


def test_wrong_or_missing_ids_get_a_page_saying_why(alice_client):
    a = make_trace()
    one = alice_client.get("/recall/traces/compare/", {"ids": [str(a.pk)]})
    assert one.status_code == 400 and b"Check exactly two traces to compare; 1 was checked." in one.content
    missing = alice_client.get("/recall/traces/compare/", {"a": a.pk})
    assert missing.status_code == 400 and b"b: missing" in missing.content
    malformed = alice_client.get("/recall/traces/compare/", {"a": a.pk, "b": "<b>not-an-id"})
    assert malformed.status_code == 400 and b"b: &#x27;&lt;b&gt;not-an-id&#x27; is not a trace id." in malformed.content
    unknown = uuid.uuid4()
    gone = alice_client.get("/recall/traces/compare/", {"a": unknown, "b": a.pk})
    assert gone.status_code == 404 and f"a: no trace has the id {unknown}.".encode() in gone.content


# --- why not recalled? -----------------------------------------------------------------------------


@pytest.fixture
def saved(indexes, write) -> dict:
    """A recall of the phone number in a small store, saved as a trace; and a memory of another scope."""
    memories = {
        "phone": write("The user's phone number is 18600000000.", kind="entity", entity_key="phone:18600000000"),
        "deploy": write("Deploys go out on Thursdays after the smoke tests.", kind="procedure"),
        "other": write("The user's phone in agent:other is 13900000000.", kind="fact", scope="agent:other"),
    }
    result = recall("phone number 18600000000", scope="agent:main", selector_config=None)
    memories["trace"] = RecallTrace.record(result, source="api", actor="token:agent")
    return memories


def why(client, trace: RecallTrace, typed: str) -> str:
    html = client.get(trace.get_absolute_url(), {"why": typed}).content.decode()
    found = re.search(r"<div class=\"why-not\" data-why-not>(.*?)</div>", html, re.S)
    assert found, "no answer to why not recalled"
    return found.group(1)


def test_a_saved_trace_answers_why_not_recalled_from_its_candidates(saved, alice_client):
    trace = saved["trace"]
    candidate_ids = {c["id"] for c in trace.candidates}
    page = alice_client.get(trace.get_absolute_url()).content.decode()
    assert f'href="{trace.get_absolute_url()}?why={saved["phone"].pk}" data-why-link' in page
    recalled = why(alice_client, trace, str(saved["phone"].pk)[:8])  # a short id, as the pages show it
    assert "<b>selected</b>: Ranked 1st by the heuristic" in recalled
    assert f"of this recall&#x27;s {len(trace.candidates)} candidates" in recalled
    assert str(saved["deploy"].pk) in candidate_ids  # the vector search finds every memory of a store this small
    left_out = why(alice_client, trace, str(saved["deploy"].pk))
    assert "<b>below floor</b>: Too weak a match: neither retriever found it close enough" in left_out
    elsewhere = why(alice_client, trace, str(saved["other"].pk))
    assert "It is in scope agent:other; this recall ran in agent:main." in elsewhere
    assert "data-why-rerun" not in elsewhere
    unknown = why(alice_client, trace, "deadbeef")
    assert "no memory&#x27;s id starts with &#x27;deadbeef&#x27;" in unknown


def test_a_memory_that_was_no_candidate_is_said_so_with_a_rerun_in_the_playground(saved, alice_client, write):
    trace = saved["trace"]
    later = write("The office plants are watered on Mondays.", kind="fact")
    answer = why(alice_client, trace, str(later.pk))
    assert f"It was not among this recall&#x27;s {len(trace.candidates)} candidates" in answer
    rerun = re.search(r'<a class="btn btn-sm" href="([^"]+)" data-why-rerun>', answer).group(1)
    params = parse_qs(urlsplit(rerun.replace("&amp;", "&")).query)
    assert urlsplit(rerun).path == "/recall/"
    assert params["q"] == [trace.query] and params["scope"] == ["agent:main"] and params["why"] == [str(later.pk)]
    followed = alice_client.get(rerun.replace("&amp;", "&")).content.decode()
    assert '<ol class="stages">' in followed  # the playground follows it through the stages
    later.tombstone("outdated", actor="test")
    assert "<b>memory</b>: It is tombstoned now: only active memories are recalled." in why(
        alice_client, trace, str(later.pk)
    )


def test_why_not_escapes_what_was_typed(saved, alice_client):
    answer = why(alice_client, saved["trace"], "<img src=x onerror=alert(1)>")
    assert "<img" not in answer and "&lt;img src=x" in answer
