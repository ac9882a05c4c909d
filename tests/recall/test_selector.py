"""The model selector against an OpenAI-compatible server of our own: its answer is asked for as a strict
structured output (the prompt alone where the endpoint refuses that) and checked against the same
schema, and a refused answer says which JSON path is wrong. No database: headers are plain values.
"""

from __future__ import annotations

import json

import pytest

from recall.selector import ANSWER, Header, SelectorConfig, SelectorFailed, parse_answer, select
from tests.fakes.openai_server import FakeOpenAIServer

HEADERS = [
    Header(id="m-escalation", kind="procedure", tier="core", age="2d", first_line="Escalation path: #ata-oncall"),
    Header(id="m-gotcha", kind="procedure", tier="working", age="5d", first_line="Gotcha: pass locale=zh"),
]
IDS = [header.id for header in HEADERS]


@pytest.fixture
def server():
    with FakeOpenAIServer(stall_seconds=10) as fake:
        yield fake


def config(server, model: str = "fake-selector") -> SelectorConfig:
    return SelectorConfig(base_url=server.base_url, model=model, api_key="test", timeout_ms=20_000)


def picks(*ids: str) -> str:
    return json.dumps({"selected": [{"id": pk, "reason": "relevant"} for pk in ids]})


def test_the_selection_is_asked_for_as_a_strict_structured_output_and_accepted(server):
    server.chat_reply = picks("m-gotcha")
    selection = select("how do I call article-list-query", HEADERS, ["mcp__ata__q"], 5, config(server))
    assert (selection.ids, selection.reasons) == (["m-gotcha"], {"m-gotcha": "relevant"})
    [request] = server.requests
    assert request["body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "selection", "schema": ANSWER.response_format["json_schema"]["schema"], "strict": True},
    }
    pick = request["body"]["response_format"]["json_schema"]["schema"]["properties"]["selected"]["items"]
    assert pick["required"] == ["id", "reason"] and pick["additionalProperties"] is False  # strict: every property


def test_an_endpoint_refusing_the_structured_output_is_asked_with_the_prompt_alone_from_then_on(server):
    # Refusals are remembered per base URL and model: a model of its own keeps this one from
    # reaching a later test whose server happens to get the same port.
    refusing = config(server, model="fake-selector-without-structured-outputs")
    server.structured_outputs = "none"
    server.chat_replies = [picks("m-escalation"), picks("m-gotcha", "m-escalation")]
    first = select("escalation", HEADERS, [], 5, refusing)
    assert first.ids == ["m-escalation"]
    assert [r["body"].get("response_format", {}).get("type") for r in server.requests] == [
        "json_schema",
        "json_object",
        None,
    ]
    again = select("gotcha", HEADERS, [], 5, refusing)
    assert again.ids == ["m-gotcha", "m-escalation"]
    assert len(server.requests) == 4 and "response_format" not in server.requests[-1]["body"]  # remembered


def test_a_server_taking_only_json_object_gets_the_schema_that_way_from_then_on(server):
    # As llama-cpp-python's server: json_schema is an HTTP 500, json_object with a schema is constrained.
    llama = config(server, model="fake-selector-json-object-only")
    server.structured_outputs = "json_object"
    server.chat_replies = [picks("m-escalation"), picks("m-gotcha")]
    assert select("escalation", HEADERS, [], 5, llama).ids == ["m-escalation"]
    asked = [r["body"].get("response_format", {}) for r in server.requests]
    assert [f.get("type") for f in asked] == ["json_schema", "json_object"]
    assert asked[1]["schema"] == asked[0]["json_schema"]["schema"], "the same schema, the other way"
    assert select("gotcha", HEADERS, [], 5, llama).ids == ["m-gotcha"]
    assert [r["body"]["response_format"]["type"] for r in server.requests[2:]] == ["json_object"]  # remembered


def test_an_answer_out_of_shape_is_refused_whichever_way_it_was_asked_for(server):
    llama = config(server, model="fake-selector-json-object-unchecked")
    server.structured_outputs = "json_object"
    server.chat_reply = '{"selected": [{"id": 7}]}'
    with pytest.raises(SelectorFailed) as failed:
        select("escalation", HEADERS, [], 5, llama)
    assert failed.value.reason == "invalid answer: $.selected[0].id: 7 is not of type 'string'"


def test_an_endpoint_failing_otherwise_is_not_retried(server):
    server.script = ["http_500"]
    with pytest.raises(SelectorFailed) as failed:
        select("escalation", HEADERS, [], 5, config(server))
    assert failed.value.reason == "error: HTTP 500 from the LLM endpoint (InternalServerError)"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('{"selected": [{"id": 7}]}', "invalid answer: $.selected[0].id: 7 is not of type 'string'"),
        (
            '{"selected": [{"id": "m-gotcha", "why": "x"}]}',
            "invalid answer: $.selected[0]: Additional properties are not allowed ('why' was unexpected)",
        ),
        ('{"selected": {"id": "m-gotcha"}}', "invalid answer: $.selected: {'id': 'm-gotcha'} is not of type 'array'"),
        (
            '{"selected": [{"id": "m-gotcha"}, {"id": "m-unknown"}]}',
            "invalid answer: $.selected[1].id: 'm-unknown' is not one of the candidates",
        ),
        ("I pick the gotcha.", "invalid json: the answer is not JSON (Expecting value at character 0)"),
    ],
)
def test_a_refused_answer_names_the_json_path_of_its_first_error(server, reply, reason):
    server.chat_reply = reply
    with pytest.raises(SelectorFailed) as failed:
        select("gotcha", HEADERS, [], 5, config(server))
    assert failed.value.reason == reason
    assert failed.value.raw == reply  # kept for the trace


def test_a_fenced_answer_is_read_repeats_count_once_and_extra_picks_are_cut_with_notices():
    raw = '```json\n{"selected": [{"id": "m-gotcha"}, {"id": "m-gotcha"}, {"id": "m-escalation"}]}\n```'
    ids, reasons, notices = parse_answer(raw, IDS, 1)
    assert (ids, reasons) == (["m-gotcha"], {"m-gotcha": "", "m-escalation": ""})
    assert notices == [
        "the selector picked m-gotcha twice; counted once",
        "the selector picked 2 memories; the first 1 are kept",
    ]
