"""Roll-ups of older complete rounds into a summary memory, against an OpenAI-compatible server of our own:
written only after the summary exists, a new generation supersedes the old one, the focus window and
in-flight rounds are never rolled up (interrupted ones are), and without an LLM nothing is written and the
reason given."""

from __future__ import annotations

import json

import pytest

from ingest.ingestion import ingest
from ingest.rollup import rollup
from ingest.tasks import extract_transcript
from memoryui.models import Memory, TaskRun
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.django_db

TID = "5d0f7a1e-9c2b-4e8f-8a3d-6b1c2e4f7a90"


@pytest.fixture
def server(settings):
    with FakeOpenAIServer() as fake:
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = fake.base_url, "fake-summarizer"
        settings.MEMORYUI_L1_TIMEOUT_MS = 20_000
        yield fake


@pytest.fixture(autouse=True)
def _focus_of_three_short_rounds(settings):
    """These conversations are short: the focus window is the last 3 rounds, whatever their tokens."""
    settings.MEMORYUI_FOCUS_TOKENS = 0


def rounds(count: int, start: int = 0) -> list[dict]:
    messages = []
    for n in range(start, start + count):
        messages += [
            {"role": "user", "content": f"Step {n}: migrate table t{n} to the new cluster."},
            {"role": "assistant", "content": f"Table t{n} migrated."},
        ]
    return messages


def post(messages: list[dict]):
    return ingest({"id": TID, "scope": "agent:main", "messages": messages}).transcript


def summary(text: str) -> str:
    return json.dumps({"summary": text})


def test_older_complete_rounds_become_a_summary_and_the_focus_window_stays_out(server):
    transcript = post(rounds(5))
    server.chat_replies = [summary("Tables t0 and t1 were migrated to the new cluster.")]
    result = rollup(transcript)
    assert result.generation == 1 and result.rounds == (1, 2)  # rounds 3-5 are the focus window
    memory = result.written
    assert (memory.kind, memory.source, memory.status) == ("summary", "compaction", "active")
    rolled_up = {"transcript": str(transcript.pk), "generation": 1, "rounds": [1, 2], "supersedes": None}
    assert memory.metadata["rollup"] == rolled_up
    sent = json.loads(server.requests[-1]["body"]["messages"][-1]["content"])
    assert "t0" in sent["conversation"] and "t1" in sent["conversation"] and "t2" not in sent["conversation"]
    assert rollup(transcript).reason == "nothing to roll up: up to date"
    assert len(server.requests) == 1


def test_a_new_roll_up_absorbs_and_supersedes_the_previous_one(server):
    transcript = post(rounds(5))
    server.chat_replies = [summary("t0 and t1 migrated.")]
    first = rollup(transcript).written
    transcript = post(rounds(5) + rounds(2, start=5))
    server.chat_replies = [summary("t0 to t3 migrated.")]
    second = rollup(transcript)
    sent = json.loads(server.requests[-1]["body"]["messages"][-1]["content"])
    assert sent["previous_summary"] == "t0 and t1 migrated." and "t3" in sent["conversation"]
    assert "t1" not in sent["conversation"]  # already in the previous summary
    assert second.generation == 2 and second.rounds == (1, 4)
    assert second.written.metadata["rollup"]["supersedes"] == str(first.pk)
    first.refresh_from_db()
    assert first.status == "tombstoned" and str(second.written.pk) in first.tombstone_reason
    assert Memory.objects.filter(kind="summary", status="active").count() == 1


def migrate_t9(result: str) -> list[dict]:
    """A round whose call got a result and no answer after it."""
    return [
        {"role": "user", "content": "Now migrate t9."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c9", "name": "db::migrate", "arguments": "{}"}]},
        {"role": "tool", "content": result, "tool_call_id": "c9"},
    ]


def test_an_in_flight_round_is_never_rolled_up(server, settings):
    settings.MEMORYUI_FOCUS_ROUNDS = 0  # so only its being in flight keeps the last round out
    server.chat_replies = [summary("t0 and t1 migrated.")]
    result = rollup(post(rounds(2) + migrate_t9("running")))
    sent = json.loads(server.requests[-1]["body"]["messages"][-1]["content"])
    assert "t9" not in sent["conversation"]
    assert result.rounds == (1, 2)


def test_a_round_the_user_went_on_from_without_an_answer_is_rolled_up(server):
    messages = rounds(1) + migrate_t9("The user doesn't want to proceed with this tool use.") + rounds(3, start=1)
    server.chat_replies = [summary("t0 migrated; the user stopped the t9 migration.")]
    result = rollup(post(messages))
    sent = json.loads(server.requests[-1]["body"]["messages"][-1]["content"])
    assert "Now migrate t9." in sent["conversation"]
    assert result.rounds == (1, 2)  # rounds 3-5 are the focus window


def test_the_summary_is_asked_for_as_a_structured_output_of_its_schema(server):
    server.chat_replies = [json.dumps({"summary": "用户在迁移支付服务。"}, ensure_ascii=False)]
    result = rollup(post(rounds(5)))
    assert result.written is not None
    sent = server.requests[-1]["body"]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "summary"
    assert sent["json_schema"]["schema"]["required"] == ["summary"]


@pytest.mark.parametrize(
    ("mode", "reply", "reason"),
    [
        ("good", "not json at all", "the model's answer is not JSON"),
        ("good", json.dumps({"text": "x"}), 'not {"summary": "..."}: $: \'summary\' is a required property'),
        ("good", json.dumps({"summary": "x" * 3001}), 'not {"summary": "..."}: $.summary: '),
        ("good", json.dumps({"summary": "   "}), "the summary is empty"),
        ("http_500", None, "the model failed (HTTP 500"),
    ],
)
def test_nothing_is_written_unless_the_summary_exists(server, mode, reply, reason):
    server.script = [mode]
    if reply is not None:
        server.chat_replies = [reply]
    result = rollup(post(rounds(5)))
    assert result.written is None and reason in result.reason
    assert not Memory.objects.exists()


def test_without_an_llm_the_extraction_task_says_why_there_is_no_roll_up(settings, indexes):
    settings.MEMORYUI_LLM_BASE_URL = None
    transcript = post(rounds(5))
    run = TaskRun.objects.create(kind="extract", actor="test", params={"transcript": str(transcript.pk), "l1": "off"})
    result = extract_transcript(str(run.pk))
    assert result["rollup"] == {"written": False, "reason": result["rollup"]["reason"]}
    assert result["rollup"]["reason"].startswith("no roll-up: summaries need an LLM")
    assert not Memory.objects.filter(kind="summary").exists()
