"""The L1 extractor against an OpenAI-compatible server of our own: good answers written through the
write path, asked for as a strict structured output (the prompt alone where the endpoint refuses
that), every invalid answer rejected with its reason and JSON path recorded, the tool guard on its
output."""

from __future__ import annotations

import json

import pytest

from ingest.extraction import extract
from ingest.extraction.l1 import ANSWER, KINDS, L1Failed, parse_answer
from ingest.ingestion import ingest
from memoryui.models import Memory

pytestmark = pytest.mark.django_db

MIGRATION = "我们下周三要把支付服务迁到新机房,负责人是王芳"


@pytest.fixture
def server(l1_server):
    return l1_server


def answer(*memories: dict) -> str:
    return json.dumps({"memories": list(memories)}, ensure_ascii=False)


def run(*texts: str, **options):
    messages = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "好的"}]
    return extract(ingest({"scope": "agent:main", "messages": messages}).transcript, **options)


def test_l1_reads_what_l0_cannot_and_its_facts_go_through_the_write_path(server):
    server.chat_replies = [
        answer({"kind": "project_state", "text": "支付服务下周三迁到新机房,负责人是王芳。", "confidence": 0.8})
    ]
    report = run(MIGRATION)
    [memory] = Memory.objects.all()
    assert (memory.kind, memory.tier, memory.source) == ("project_state", "working", "extractor:l1")
    assert report.outcomes[0].reason == "L1 (model)"
    sent = json.loads(server.requests[-1]["body"]["messages"][-1]["content"])
    assert sent == {"message": MIGRATION}
    assert "Never store tool names" in server.requests[-1]["body"]["messages"][0]["content"]


def test_l1_is_only_asked_about_turns_l0_found_nothing_in_unless_always(server):
    run("我叫东升", "在吗?")
    assert server.requests == []  # L0 found the name; the nudge is not knowledge
    server.chat_reply = answer()
    run("我叫东升", l1="always")
    assert len(server.requests) == 1


def test_the_answer_is_asked_for_as_a_strict_structured_output(server):
    server.chat_replies = [answer({"kind": "fact", "text": "支付服务下周三迁到新机房。", "confidence": 0.8})]
    run(MIGRATION)
    [request] = server.requests
    schema = request["body"]["response_format"]["json_schema"]
    assert request["body"]["response_format"]["type"] == "json_schema"
    assert (schema["name"], schema["strict"]) == ("memories", True)
    item = schema["schema"]["properties"]["memories"]["items"]
    assert item["required"] == ["kind", "text", "confidence", "entity_key"]  # strict: every property, nullable
    assert item["properties"]["kind"]["enum"] == list(KINDS) and item["additionalProperties"] is False
    assert Memory.objects.get().source == "extractor:l1"


def test_an_endpoint_refusing_the_structured_output_is_asked_with_the_prompt_alone_from_then_on(server, settings):
    # Refusals are remembered per base URL and model: a model of its own keeps this one from
    # reaching a later test whose server happens to get the same port.
    settings.MEMORYUI_LLM_MODEL = "fake-extractor-without-structured-outputs"
    server.structured_outputs = "none"
    server.chat_replies = [
        answer({"kind": "fact", "text": "支付服务下周三迁到新机房。", "confidence": 0.8}),
        answer({"kind": "procedure", "text": "数据库每周日凌晨备份。", "confidence": 0.8}),
    ]
    run(MIGRATION)
    assert [r["body"].get("response_format", {}).get("type") for r in server.requests] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert Memory.objects.get().source == "extractor:l1"
    run("我们的数据库在上海机房,每周日凌晨备份")
    assert len(server.requests) == 4 and "response_format" not in server.requests[-1]["body"]  # remembered
    assert sorted(Memory.objects.values_list("kind", flat=True)) == ["fact", "procedure"]


def test_a_server_taking_only_json_object_is_asked_with_the_schema_that_way(server, settings):
    settings.MEMORYUI_LLM_MODEL = "fake-extractor-json-object-only"  # as llama-cpp-python's server
    server.structured_outputs = "json_object"
    server.chat_replies = [answer({"kind": "fact", "text": "支付服务下周三迁到新机房。", "confidence": 0.8})]
    run(MIGRATION)
    asked = [r["body"].get("response_format", {}) for r in server.requests]
    assert [f.get("type") for f in asked] == ["json_schema", "json_object"]
    assert asked[1]["schema"]["required"] == ["memories"]
    assert Memory.objects.get().source == "extractor:l1"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Sure, here are the memories!", "invalid json: the answer is not JSON (Expecting value at character 0)"),
        (json.dumps({"facts": []}), "invalid answer: $: 'memories' is a required property"),
        (
            answer({"kind": "xyz", "text": "x", "confidence": 0.5}),
            f"invalid answer: $.memories[0].kind: 'xyz' is not one of {list(KINDS)!r}",
        ),
        (
            answer({"kind": "fact", "text": "x", "confidence": 0.5}, {"kind": "note", "text": "x", "confidence": 0.5}),
            f"invalid answer: $.memories[1].kind: 'note' is not one of {list(KINDS)!r}",
        ),
        (
            answer({"kind": "fact", "text": "x", "confidence": 1.5}),
            "invalid answer: $.memories[0].confidence: 1.5 is greater than the maximum of 1",
        ),
        (
            answer({"kind": "fact", "text": "x", "confidence": True}),
            "invalid answer: $.memories[0].confidence: True is not of type 'number'",
        ),
        (
            answer({"kind": "fact", "text": "x", "confidence": 0.5, "source": "me"}),
            "invalid answer: $.memories[0]: Additional properties are not allowed ('source' was unexpected)",
        ),
        (
            answer({"kind": "fact", "text": "  ", "confidence": 0.5}),
            "invalid answer: $.memories[0].text: '  ' does not match '\\\\S'",
        ),
        (
            answer({"kind": "entity", "text": "x", "confidence": 0.9, "entity_key": "no colon"}),
            "invalid answer: $.memories[0].entity_key: 'no colon' is not type:value",
        ),
    ],
)
def test_an_invalid_answer_is_rejected_whole_and_the_reason_names_its_path(server, reply, reason):
    server.chat_replies = [reply]
    report = run(MIGRATION)
    assert not Memory.objects.exists()
    [outcome] = report.outcomes
    assert (outcome.action, outcome.reason) == ("skipped", f"L1 answer rejected: {reason}")


def test_a_failing_endpoint_is_recorded_and_nothing_is_written(server):
    server.script = ["http_500"]
    [outcome] = run(MIGRATION).outcomes
    assert outcome.reason == "L1 answer rejected: error: HTTP 500 from the LLM endpoint (InternalServerError)"


def test_the_tool_guard_stops_a_tool_schema_the_model_returns_and_keeps_a_gotcha(server):
    server.chat_replies = [
        answer(
            {
                "kind": "procedure",
                "text": "article-list-query parameter schema: page_size int, query str",
                "confidence": 0.7,
            },
            {
                "kind": "fact",
                "text": "article-list-query returns 500 when page > 10; use the cursor instead",
                "confidence": 0.8,
            },
        )
    ]
    report = run("article-list-query 又报错了,翻到第11页就500,换成cursor就好了")
    actions = [(o.action, o.reason.split(":")[0]) for o in report.outcomes]
    assert actions == [("skipped", "tool guard"), ("added", "L1 (model)")]
    assert [m.text for m in Memory.objects.all()] == [
        "article-list-query returns 500 when page > 10; use the cursor instead"
    ]


def test_without_an_llm_the_reason_says_so(settings):
    settings.MEMORYUI_LLM_BASE_URL = None
    [outcome] = run(MIGRATION).outcomes
    assert outcome.reason == "no durable fact found (L0; no LLM configured for L1)"


def test_parse_answer_accepts_a_fenced_answer_and_normalizes_keys():
    [fact] = parse_answer(
        '```json\n{"memories": [{"kind": "entity", "text": " Name is  Bob ", "confidence": 1, '
        '"entity_key": "NAME:bob"}]}\n```'
    )
    assert (fact.kind, fact.text, fact.entity_key, fact.confidence) == ("entity", "Name is Bob", "name:bob", 1.0)
    [fact] = parse_answer(answer({"kind": "fact", "text": "x", "confidence": 0.5, "entity_key": None}))
    assert fact.entity_key is None  # what a strict structured output gives for "no key"
    with pytest.raises(L1Failed) as rejected:
        parse_answer(answer(*[{"kind": "fact", "text": "x", "confidence": 0.5}] * 11))
    assert str(rejected.value) == "invalid answer: $.memories: [… 11 items] is too long"
    assert ANSWER.schema["properties"]["memories"]["maxItems"] == 10
