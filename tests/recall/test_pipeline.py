"""The recall pipeline through the real indexes: selector and heuristic, the active-tool filter on
both paths, the fallbacks with their reasons, query syntax, the recall block and access counts.

The selector talks to tests.fakes.openai_server, so the real `openai` client code runs.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from memoryui.models import Memory, MemoryEvent
from recall.explain import BLOCK_CAUSES, Group, explain
from recall.knobs import RecallSettings
from recall.models import RecallTrace
from recall.pipeline import BLOCK_HEADING, recall, record_recall
from searchindex.fusion import SettingsError
from searchindex.search import SearchError
from tests.fakes.openai_server import FakeOpenAIServer
from tests.recall.reason_recalls import config, picks

pytestmark = pytest.mark.django_db

SCHEMA = "Parameter schema and usage reference for article-list-query: page_size int ≤ 50, query string, locale enum."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
SCHEMA_ZH = "article-list-query 的调用格式：先传 query 再传 page_size。"
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
OTHERS = [
    ("The user's phone number is 18600000000.", {"kind": "entity", "entity_key": "phone:18600000000"}),
    ("Releases go out on Thursdays after 14:00; nothing ships on Fridays.", {"kind": "procedure"}),
    ("Staging runs on k3s with three nodes.", {"kind": "fact"}),
    ("用户喜欢简洁的回答，不要长篇大论。", {"kind": "preference"}),
]
QUERY = "how do I call article-list-query"


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    memories = {}
    for text in (SCHEMA, ESCALATION, SCHEMA_ZH, GOTCHA):
        memories[text] = write(text, kind="procedure")
    for text, fields in OTHERS:
        memories[text] = write(text, **fields)
    write("Escalation for article-list-query in another agent.", scope="agent:other")
    return memories


@pytest.fixture
def server():
    with FakeOpenAIServer(stall_seconds=10) as fake:
        yield fake


def decisions(result) -> dict[str, tuple[str, list[str]]]:
    return {c.found.memory.text: (c.final.decision, c.final.reasons) for c in result.candidates}


def selected_texts(result) -> list[str]:
    return [c.found.memory.text for c in result.selected]


# --- the active-tool filter, heuristic path ----------------------------------------------------------


@pytest.mark.parametrize("tool", ["mcp__ata__article-list-query", "ata::article-list-query"])
def test_heuristic_filters_the_schema_notes_of_an_active_tool_and_keeps_its_durable_ones(store, tool):
    result = recall(QUERY, scope="agent:main", tools=[tool], selector_config=None)
    assert result.mode == "heuristic"
    assert "not configured" in result.fallback_reason
    found = decisions(result)
    assert found[SCHEMA][0] == "filtered"
    assert found[SCHEMA][1] == [f"active tool {tool} + marker 'parameter schema'"]
    assert found[SCHEMA_ZH][0] == "filtered" and "调用格式" in found[SCHEMA_ZH][1][0]
    assert set(selected_texts(result)) >= {ESCALATION, GOTCHA}
    assert SCHEMA not in selected_texts(result) and SCHEMA_ZH not in selected_texts(result)
    assert f"names active tool {tool}, no schema marker" in found[ESCALATION][1]


def test_an_unrelated_recent_tool_filters_nothing(store):
    result = recall(QUERY, scope="agent:main", tools=["mcp__web__fetch"], selector_config=None)
    assert all(decision != "filtered" for decision, _ in decisions(result).values())
    assert SCHEMA in selected_texts(result)


# --- the selector ------------------------------------------------------------------------------------------


def test_a_good_selection_answers_and_is_recorded_beside_the_heuristic(store, server):
    server.chat_replies = [picks("Escalation", "Gotcha")]
    result = recall(QUERY, scope="agent:main", tools=["mcp__ata__article-list-query"], selector_config=config(server))
    assert result.mode == "selector" and result.fallback_reason is None
    assert selected_texts(result) == [ESCALATION, GOTCHA]
    escalation = result.decision_of(store[ESCALATION].pk)
    assert escalation.selector.reasons[:2] == ["selector pick 1", "relevant"]
    assert escalation.heuristic.decision == "selected"  # both decisions are kept
    assert json.loads(result.selector_answer)["selected"][0]["id"] == str(store[ESCALATION].pk)


def test_the_selectors_pick_of_a_schema_note_for_an_active_tool_is_filtered_out(store, server):
    server.chat_replies = [picks("Parameter schema", "Escalation")]
    result = recall(QUERY, scope="agent:main", tools=["ata::article-list-query"], selector_config=config(server))
    assert result.mode == "selector"
    assert selected_texts(result) == [ESCALATION]
    schema = result.decision_of(store[SCHEMA].pk)
    assert schema.selector.decision == "filtered" and schema.final.decision == "filtered"
    assert schema.final.reasons[0] == "active tool ata::article-list-query + marker 'parameter schema'"
    assert "selector pick 1" in schema.final.reasons


def test_the_selector_sees_headers_only_with_the_query_and_the_recent_tools(indexes, write, server):
    write("Deploy checklist for the payments service:\nstep one: drain the queue\nstep two: run the migration")
    recall(
        "payments deploy checklist",
        scope="agent:main",
        tools="mcp__ci__run, mcp__ci__run",
        selector_config=config(server),
    )
    [request] = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
    sent = json.loads(request["body"]["messages"][-1]["content"])
    assert sent["query"] == "payments deploy checklist"
    assert sent["recent_tools"] == ["mcp__ci__run"]
    [candidate] = sent["candidates"]
    assert set(candidate) == {"id", "kind", "tier", "age", "first_line"}
    assert candidate["first_line"] == "Deploy checklist for the payments service:"
    assert "drain the queue" not in json.dumps(request["body"])
    assert "usage references" in request["body"]["messages"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "mode", "reason"),
    [
        ("Sure! I would pick the escalation note.", None, "invalid json: the answer is not JSON"),
        (
            '{"selected": [{"id": "3f2c9a1b-0000-4000-8000-000000000000"}]}',
            None,
            "invalid answer: $.selected[0].id: '3f2c9a1b-0000-4000-8000-000000000000' is not one of the candidates",
        ),
        ('{"picked": []}', None, "invalid answer: $: 'selected' is a required property"),
        (None, "http_500", "error: HTTP 500"),
        (None, "slow_http_500", "error: HTTP 500"),
        (None, "invalid_json", "error: "),
    ],
)
def test_a_broken_selector_answer_falls_back_to_the_heuristic_with_the_reason(store, server, reply, mode, reason):
    if reply is not None:
        server.chat_replies = [reply]
    if mode is not None:
        server.script = [mode]
    result = recall(QUERY, scope="agent:main", tools=["mcp__ata__article-list-query"], selector_config=config(server))
    assert result.mode == "heuristic"
    assert reason in result.fallback_reason
    assert set(selected_texts(result)) >= {ESCALATION, GOTCHA} and SCHEMA not in selected_texts(result)
    assert all(c.final is c.heuristic for c in result.candidates)


def test_a_stalled_selector_falls_back_at_its_budget_not_when_the_server_answers(store, server):
    server.script = ["stall"]  # answers after 10 s
    started = time.monotonic()
    result = recall(QUERY, scope="agent:main", selector_config=config(server, timeout_ms=300))
    waited = time.monotonic() - started
    assert result.mode == "heuristic"
    assert result.fallback_reason == "timeout: no answer within 300 ms"
    assert waited < server.stall_seconds  # it did not wait for the answer
    assert result.selected


def test_the_configured_endpoint_is_used_from_settings(store, server, settings):
    settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = server.base_url, "fake-selector"
    settings.MEMORYUI_SELECTOR_TIMEOUT_MS = 20_000
    server.chat_replies = [picks("Gotcha")]
    result = recall(QUERY, scope="agent:main")
    assert result.mode == "selector" and selected_texts(result) == [GOTCHA]
    assert server.requests[-1]["body"]["model"] == "fake-selector"
    off = recall(QUERY, scope="agent:main", settings=RecallSettings(selector=False))
    assert off.mode == "heuristic" and off.fallback_reason == "selector off in this profile"


# --- relevance, query syntax, block ---------------------------------------------------------------------


def test_an_unanswerable_query_recalls_nothing_and_asks_no_model(store, server):
    result = recall("quantum entanglement of photons", scope="agent:main", selector_config=config(server))
    assert result.selected == [] and result.block == ""
    assert all(c.final.decision == "below_floor" for c in result.candidates)
    assert all(c.final.reasons[0].startswith("below floor: ") for c in result.candidates)
    assert "nothing for the selector to choose from" in result.fallback_reason
    assert server.requests == []


def test_exact_tokens_are_recalled_first_and_scopes_stay_apart(store):
    result = recall("18600000000", scope="agent:main", selector_config=None)
    assert selected_texts(result)[0] == "The user's phone number is 18600000000."
    assert "exact key match 'phone:18600000000'" in result.selected[0].final.reasons
    other = recall("escalation article-list-query", scope="agent:other", selector_config=None)
    assert selected_texts(other) == ["Escalation for article-list-query in another agent."]


def test_a_required_word_drops_the_memories_without_it(store):
    result = recall(f"{QUERY} +locale", scope="agent:main", selector_config=None)
    assert result.search_text == f"{QUERY} locale"
    assert set(selected_texts(result)) == {SCHEMA, GOTCHA}
    decision, reasons = decisions(result)[ESCALATION]
    assert decision == "not_selected" and reasons == ["missing required 'locale'"]


def test_select_picks_memories_directly_in_the_scope(store):
    phone, gotcha = store["The user's phone number is 18600000000."], store[GOTCHA]
    other = Memory.objects.get(scope="agent:other")
    # Full ids, or the 8-character ids the pages show.
    result = recall(f"select:{str(gotcha.pk)[:8]},{phone.pk}, {other.pk},nonsense", scope="agent:main")
    assert result.mode == "select"
    assert [c.id for c in result.selected] == [str(gotcha.pk), str(phone.pk)]
    assert f"select: no active memory {other.pk} in agent:main" in result.notices
    assert "select: 'nonsense' is not a memory id (a full id, or its first 8 characters)" in result.notices
    # A short id of a memory in another scope names nothing here.
    elsewhere = recall(f"select:{str(other.pk)[:8]}", scope="agent:main")
    assert elsewhere.selected == [] and elsewhere.notices == [
        f"select: no memory's id starts with '{str(other.pk)[:8]}'"
    ]


@pytest.mark.parametrize(("asked", "limit"), [(0, 1), (2, 2), (99, 20), (None, 5)])
def test_the_limit_is_clamped_and_the_block_never_holds_more(store, asked, limit):
    result = recall("article-list-query", scope="agent:main", limit=asked, selector_config=None)
    assert result.limit == limit
    assert len(result.selected) <= limit
    assert len(result.block.splitlines()) == len(result.selected) + 1
    assert (asked in (None, 2)) == (not any(notice.startswith("limit ") for notice in result.notices))


def test_the_block_is_headed_as_current_turn_only_with_id_kind_tier_score_and_age(store):
    result = recall(QUERY, scope="agent:main", limit=3, selector_config=None)
    heading, *lines = result.block.splitlines()
    assert heading == BLOCK_HEADING and "this turn only" in heading
    assert len(lines) == len(result.selected) == 3
    for line, rc in zip(lines, result.selected, strict=True):
        memory = rc.found.memory
        assert line.startswith(f"- [{memory.pk}] {memory.kind}/{memory.tier} · score {rc.score:.2f} · <1m old: ")
        assert line.endswith(memory.text)


@pytest.mark.parametrize("query", ["", "   ", "select:"])
def test_a_query_without_words_is_refused_naming_q(store, query):
    with pytest.raises(SearchError) as excinfo:
        recall(query, scope="agent:main", selector_config=None)
    assert excinfo.value.field == "q"


def test_recall_changes_nothing_until_recorded_then_bumps_access_with_an_event(store):
    result = recall(QUERY, scope="agent:main", tools=["mcp__ata__article-list-query"], selector_config=None)
    assert not MemoryEvent.objects.filter(action="recalled").exists()
    assert record_recall(result, actor="agent:test") == len(result.selected)
    for rc in result.selected:
        memory = Memory.objects.get(pk=rc.id)
        assert memory.access_count == 1 and memory.accessed_at is not None
        [event] = memory.events.filter(action="recalled")
        assert event.actor == "agent:test" and QUERY in event.reason
    assert Memory.objects.get(pk=store[SCHEMA].pk).access_count == 0


# --- settings -----------------------------------------------------------------------------------------


def test_recall_settings_round_trip_and_name_each_bad_knob():
    knobs = RecallSettings(candidates=10, selector=False, weight_exact=2.0, schema_markers=("参数格式",)).to_dict()
    assert RecallSettings.from_dict(knobs) == RecallSettings.from_dict(json.loads(json.dumps(knobs)))
    assert RecallSettings.from_dict({}).to_dict()["rrf_k"] == 60
    with pytest.raises(SettingsError) as excinfo:
        RecallSettings.from_dict({"candidates": 0, "selector": "yes", "rrf_k": -1, "bogus": 1, "durable_markers": []})
    assert set(excinfo.value.errors) == {"candidates", "selector", "rrf_k", "bogus", "durable_markers"}


# --- the page's words for what the pipeline decided ------------------------------------------------


def test_every_decision_of_a_real_recall_reads_in_words_on_the_page(store):
    """recall.explain reads the pipeline's reasons: if their wording changes, the page must not fall
    back to the raw strings without this test saying so."""
    result = recall(QUERY, scope="agent:main", tools=["mcp__ata__article-list-query"], limit=1, selector_config=None)
    explained = explain(RecallTrace.fields_of(result)["result"])

    stages = {group.stage: group for group in explained.groups}
    assert set(stages) >= {"selected", "filtered", "not_selected"}
    [recalled] = stages["selected"].rows
    assert recalled.why.startswith("Ranked 1st by the heuristic: ")
    assert all(
        row.why.startswith("Kept out by the active-tool filter: it names mcp__ata__article-list-query")
        for row in stages["filtered"].rows
    )
    assert {row.cause for row in stages["not_selected"].rows} <= set(BLOCK_CAUSES.values())
    for row in stages["not_selected"].rows:
        assert re.fullmatch(r"Ranked \d+(st|nd|rd|th) by the heuristic and left out of the block: .+\.", row.why)
        assert row.candidate["block"]["code"] in BLOCK_CAUSES
    for row in stages.get("below_floor", Group("below_floor")).rows:
        assert row.why.startswith(("Too weak a match: ", "Recall stays silent on this query"))
    for group in explained.groups:
        for row in group.rows:
            assert "heuristic rank" not in row.why and "marker '" not in row.why
