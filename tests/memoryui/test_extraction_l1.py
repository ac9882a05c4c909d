"""The L1 extractor against an OpenAI-compatible server of our own: good answers written through the
write path, every invalid answer rejected with its reason recorded, the tool guard on its output."""

from __future__ import annotations

import json

import pytest

from memoryui.extraction import extract
from memoryui.extraction_l1 import L1Failed, parse_answer
from memoryui.ingestion import ingest
from memoryui.models import Memory
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.django_db

MIGRATION = "我们下周三要把支付服务迁到新机房,负责人是王芳"


@pytest.fixture
def server(settings):
    with FakeOpenAIServer(stall_seconds=10) as fake:
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = fake.base_url, "fake-extractor"
        settings.MEMORYUI_L1_TIMEOUT_MS = 20_000
        yield fake


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


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Sure, here are the memories!", "invalid json"),
        (json.dumps({"facts": []}), 'expected {"memories": [...]}'),
        (answer({"kind": "note", "text": "x", "confidence": 0.5}), "kind 'note' is not one of"),
        (answer({"kind": "fact", "text": "x", "confidence": 1.5}), "confidence must be a number from 0 to 1"),
        (answer({"kind": "fact", "text": "x", "confidence": 0.5, "source": "me"}), "must have kind, text"),
        (answer({"kind": "entity", "text": "x", "confidence": 0.9, "entity_key": "no colon"}), "is not type:value"),
    ],
)
def test_an_invalid_answer_is_rejected_whole_and_the_reason_recorded(server, reply, reason):
    server.chat_replies = [reply]
    report = run(MIGRATION)
    assert not Memory.objects.exists()
    [outcome] = report.outcomes
    assert (
        outcome.action == "skipped" and outcome.reason.startswith("L1 answer rejected: ") and reason in outcome.reason
    )


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
    with pytest.raises(L1Failed, match="at most 10"):
        parse_answer(answer(*[{"kind": "fact", "text": "x", "confidence": 0.5}] * 11))
