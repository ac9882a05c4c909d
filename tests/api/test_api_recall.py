"""`POST /api/recall/` and `manage.py recall`: the pipeline's contract, errors, tokens, traces, profiles,
and why a memory (by its full or short id) was not recalled."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import CommandError, call_command

from memoryui.models import Memory, MemoryEvent
from recall.models import RecallProfile, RecallTrace

pytestmark = pytest.mark.django_db

SCHEMA = "Parameter schema for article-list-query: page_size int ≤ 50, query string."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team."
PHONE = "The user's phone number is 18600000000."


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    memories = {text: write(text, kind="procedure") for text in (SCHEMA, ESCALATION)}
    memories[PHONE] = write(PHONE, kind="entity", entity_key="phone:18600000000")
    memories["other"] = write("Escalation for article-list-query in agent:other.", scope="agent:other")
    return memories


def post(client, body: dict, **extra):
    return client.post("/api/recall/", data=json.dumps(body), content_type="application/json", **extra)


def bearer(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def test_recall_answers_the_contract_and_counts_the_recall(store, client, agent_token):
    body = {"query": "article-list-query", "scope": "main", "tools": ["mcp__ata__article-list-query"], "limit": 3}
    response = post(client, body, **bearer(agent_token))
    assert response.status_code == 200
    answer = response.json()
    assert answer["mode"] == "heuristic" and "not configured" in answer["fallback_reason"]
    assert [s["text"] for s in answer["selected"]] == [ESCALATION]
    assert set(answer["selected"][0]) >= {"id", "text", "kind", "tier", "score"}
    decisions = {c["id"]: c for c in answer["candidates"]}
    schema = decisions[str(store[SCHEMA].pk)]
    assert schema["decision"] == "filtered"
    assert schema["reasons"] == ["active tool mcp__ata__article-list-query + marker 'parameter schema'"]
    assert answer["block"].splitlines()[1].startswith(f"- [{store[ESCALATION].pk}]")
    assert answer["tools"] == ["mcp__ata__article-list-query"] and answer["scope"] == "agent:main"
    [event] = MemoryEvent.objects.filter(action="recalled")
    assert event.memory_id == store[ESCALATION].pk and event.actor == "token:agent"
    assert Memory.objects.get(pk=store[ESCALATION].pk).access_count == 1


def test_bad_requests_are_400_naming_each_field(store, client, agent_token):
    body = {"query": "  ", "scope": "Not A Scope!", "tools": "mcp__x", "limit": "many"}
    response = post(client, body, **bearer(agent_token))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["details"]) == {"scope", "tools", "limit"}
    empty = post(client, {"query": "  ", "scope": "main"}, **bearer(agent_token))
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["details"]["query"][0]
    missing = post(client, {}, **bearer(agent_token))
    assert set(missing.json()["error"]["details"]) == {"query", "scope"}
    unknown = post(client, {"query": "x y", "scope": "main", "profile": "nope"}, **bearer(agent_token))
    assert "no profile named 'nope'" in unknown.json()["error"]["details"]["profile"][0]


def test_a_token_recalls_only_in_its_own_scopes_and_anonymous_callers_are_401(store, client, mallory_token):
    response = post(client, {"query": "article-list-query", "scope": "main"}, **bearer(mallory_token))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    own = post(client, {"query": "escalation article-list-query", "scope": "agent:other"}, **bearer(mallory_token))
    assert [s["id"] for s in own.json()["selected"]] == [str(store["other"].pk)]
    assert post(client, {"query": "x", "scope": "main"}).status_code == 401


def test_recalls_are_traced_on_request_or_by_the_sampling_rate(store, client, agent_token, settings):
    settings.MEMORYUI_RECALL_TRACE_RATE = 0.0
    untraced = post(client, {"query": "18600000000", "scope": "main"}, **bearer(agent_token)).json()
    assert untraced["trace_id"] is None and not RecallTrace.objects.exists()
    traced = post(client, {"query": "18600000000", "scope": "main", "trace": True}, **bearer(agent_token)).json()
    trace = RecallTrace.objects.get(pk=traced["trace_id"])
    assert trace.source == "api" and trace.actor == "token:agent" and trace.scope == "agent:main"
    assert trace.selected_ids == [str(store[PHONE].pk)] and trace.block == traced["block"]
    assert trace.knobs["rrf_k"] == 60 and trace.profile_name == "default"
    settings.MEMORYUI_RECALL_TRACE_RATE = 1.0
    sampled = post(client, {"query": "18600000000", "scope": "main"}, **bearer(agent_token)).json()
    assert sampled["trace_id"] is not None
    never = post(client, {"query": "18600000000", "scope": "main", "trace": False}, **bearer(agent_token)).json()
    assert never["trace_id"] is None and RecallTrace.objects.count() == 2


def test_a_profile_changes_the_knobs_the_recall_runs_with(store, client, agent_token):
    RecallProfile.objects.create(name="one-only", knobs={"limit": 1, "selector": False})
    body = {"query": "article-list-query", "scope": "main", "profile": "one-only", "trace": True}
    answer = post(client, body, **bearer(agent_token)).json()
    assert answer["profile"] == "one-only" and answer["limit"] == 1 and len(answer["selected"]) == 1
    assert answer["fallback_reason"] == "selector off in this profile"
    assert RecallTrace.objects.get(pk=answer["trace_id"]).profile.name == "one-only"


def test_the_recall_command_prints_the_contract_as_json(store):
    out = io.StringIO()
    call_command(
        "recall", "article-list-query", "--scope", "main", "--tools", "ata::article-list-query", "--json", stdout=out
    )
    answer = json.loads(out.getvalue())
    assert {"mode", "fallback_reason", "selected", "candidates", "block"} <= set(answer)
    assert [s["text"] for s in answer["selected"]] == [ESCALATION]
    assert all({"id", "decision", "reasons"} <= set(c) for c in answer["candidates"])
    assert Memory.objects.get(pk=store[ESCALATION].pk).access_count == 1


def test_the_recall_command_explains_in_text_and_can_dry_run_and_trace(store):
    out = io.StringIO()
    call_command("recall", "18600000000", "--scope", "main", "--dry-run", "--trace", stdout=out)
    text = out.getvalue()
    assert "answered by: heuristic" in text and "selected" in text and PHONE in text
    assert "trace saved:" in text and RecallTrace.objects.get().source == "cli"
    assert Memory.objects.get(pk=store[PHONE].pk).access_count == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["   ", "--scope", "main"], "query: The query is empty"),
        (["x y", "--scope", "Bad Scope!"], "--scope:"),
        (["x y", "--scope", "main", "--profile", "nope"], "--profile: no profile named 'nope'"),
    ],
)
def test_the_recall_command_fails_clearly(store, args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("recall", *args, stdout=io.StringIO())


def test_agents_get_compact_candidates_and_explain_gives_every_one_in_full(store, client, agent_token):
    body = {"query": "article-list-query", "scope": "main", "tools": ["mcp__ata__article-list-query"]}
    compact = post(client, body, **bearer(agent_token)).json()
    assert all(
        set(c) == {"id", "decision", "reasons", "score", "fused_score", "vector_rank", "bm25_rank", "block"}
        for c in compact["candidates"]
    )
    placed = [c for c in compact["candidates"] if c["block"]]
    assert placed and all(c["block"]["kept"] == (c["decision"] == "selected") for c in placed)
    below = [c for c in compact["candidates"] if c["decision"] == "below_floor"]
    assert len(below) <= 5
    full = post(client, {**body, "explain": True}, **bearer(agent_token)).json()
    assert len(full["candidates"]) >= len(compact["candidates"])
    schema = next(c for c in full["candidates"] if c["id"] == str(store[SCHEMA].pk))
    assert schema["text"] == SCHEMA and schema["heuristic"]["decision"] == "filtered"
    assert [c["id"] for c in full["candidates"] if c["decision"] != "below_floor"] == [
        c["id"] for c in compact["candidates"] if c["decision"] != "below_floor"
    ]


def test_explain_gives_each_reason_as_its_code_beside_its_words(store, client, agent_token):
    body = {"query": "article-list-query", "scope": "main", "tools": ["mcp__ata__article-list-query"]}
    compact = post(client, body, **bearer(agent_token)).json()
    assert "fallback_reason_code" not in compact and "reason_code" not in compact["answer"]
    full = post(client, {**body, "explain": True}, **bearer(agent_token)).json()
    assert full["fallback_reason_code"] == {"code": "selector_not_configured"}
    assert full["answer"]["reason_code"]["code"] in ("one_strong_match", "strong_matches")
    schema = next(c for c in full["candidates"] if c["id"] == str(store[SCHEMA].pk))
    assert schema["reasons"] == ["active tool mcp__ata__article-list-query + marker 'parameter schema'"]
    assert schema["reason_codes"] == [
        {"code": "active_tool_schema", "tool": "mcp__ata__article-list-query", "marker": "parameter schema"}
    ]
    assert schema["heuristic"]["reason_codes"] == schema["reason_codes"]
    for c in full["candidates"]:
        for key in ("reasons", "label_reasons", "signals"):
            assert len(c[key.removesuffix("s") + "_codes"]) == len(c[key])
        if c["decision"] == "below_floor":
            assert {code["code"] for code in c["reason_codes"]} == {"floored"}
            assert [code["why"] for code in c["reason_codes"]] == c["label_reason_codes"]


# Two memories of agent:main whose ids share their first 8 hex digits: a short id of them is ambiguous.
TWIN_A = uuid.UUID("37ddb874-0bf0-438b-adb7-9fbd1fd55725")
TWIN_B = uuid.UUID("37ddb874-77aa-4c1e-8a2b-000000000001")


@pytest.fixture
def twins(store, write) -> dict[str, Memory]:
    return {
        "a": write("Deploys go out on Thursdays.", kind="fact", id=TWIN_A),
        "b": write("Staging is refreshed nightly.", kind="fact", id=TWIN_B),
    }


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    return error


def test_why_takes_a_short_id_and_follows_the_memory_to_the_stage_that_dropped_it(store, client, agent_token):
    schema = store[SCHEMA]
    body = {"query": "article-list-query", "scope": "main", "tools": ["mcp__ata__article-list-query"]}
    answer = post(client, {**body, "why": str(schema.pk)[:8]}, **bearer(agent_token)).json()
    stages = {stage["stage"]: stage["text"] for stage in answer["why"]}
    assert stages["final"].startswith("filtered")
    without = post(client, body, **bearer(agent_token)).json()
    assert "why" not in without


def test_why_finds_a_tombstoned_memory_since_that_is_the_reason(store, client, agent_token):
    store[PHONE].tombstone("moved house", actor="test")
    answer = post(client, {"query": "18600000000", "scope": "main", "why": str(store[PHONE].pk)[:8].upper()},
                  **bearer(agent_token)).json()  # fmt: skip
    assert answer["why"] == [
        {"stage": "memory", "text": "It is tombstoned (moved house): only active memories are recalled."}
    ]


def test_an_ambiguous_or_malformed_why_is_400_naming_the_field_with_the_candidates(twins, client, agent_token):
    ambiguous = post(client, {"query": "deploys", "scope": "main", "why": "37ddb874"}, **bearer(agent_token))
    error = error_of(ambiguous, 400)
    assert error["code"] == "invalid" and set(error["details"]) == {"why"}
    [problem] = error["details"]["why"]
    assert problem.startswith("'37ddb874' is ambiguous: 2 memories start with it: ")
    assert "37ddb874-0 (agent:main) “Deploys go out on Thursdays.”" in problem
    assert "37ddb874-7 (agent:main) “Staging is refreshed nightly.”" in problem
    short = post(client, {"query": "deploys", "scope": "main", "why": "37ddb"}, **bearer(agent_token))
    assert error_of(short, 400)["details"] == {
        "why": ["'37ddb' is too short: give at least the 8 characters the pages show"]
    }
    told_apart = post(client, {"query": "deploys", "scope": "main", "why": "37ddb874-7"}, **bearer(agent_token))
    assert told_apart.status_code == 200 and told_apart.json()["why"]


def test_an_unknown_why_or_one_outside_the_tokens_scopes_is_404_naming_the_field(store, client, mallory_token):
    hidden = str(store[PHONE].pk)
    for why in (hidden, hidden[:8], "deadbeef"):
        body = {"query": "escalation", "scope": "agent:other", "why": why}
        error = error_of(post(client, body, **bearer(mallory_token)), 404)
        assert error["code"] == "not_found" and set(error["details"]) == {"why"}
        assert "agent:main" not in str(error) and PHONE not in str(error)


def test_the_recall_command_explains_why_a_memory_given_by_its_short_id_was_not_recalled(store):
    out = io.StringIO()
    call_command("recall", "18600000000", "--scope", "main", "--why", str(store["other"].pk)[:8], stdout=out)
    text = out.getvalue()
    assert f"why not recalled {store['other'].pk}:" in text
    assert "  scope: It is in scope agent:other; this recall ran in agent:main." in text
    out = io.StringIO()
    call_command("recall", "18600000000", "--scope", "main", "--why", str(store[SCHEMA].pk), "--json", stdout=out)
    stages = json.loads(out.getvalue())["why"]
    assert stages[0]["stage"] == "retrieval" and all(set(s) == {"stage", "text"} for s in stages)


def test_the_recall_command_refuses_an_ambiguous_why_listing_the_candidates(twins):
    with pytest.raises(CommandError) as refused:
        call_command("recall", "deploys", "--scope", "main", "--why", "37ddb874", stdout=io.StringIO())
    message = str(refused.value)
    assert message.startswith("--why: '37ddb874' is ambiguous: 2 memories start with it")
    assert "“Deploys go out on Thursdays.”" in message
    with pytest.raises(CommandError, match="--why: no memory's id starts with 'deadbeef'"):
        call_command("recall", "deploys", "--scope", "main", "--why", "deadbeef", stdout=io.StringIO())
