"""Extraction through the real pipeline (projection, filters, L0, write path with the real indexes):
the acceptance cases of the transcripts issue, the dry run, and a retried run."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from ingest.extraction import extract
from ingest.ingestion import ingest
from ingest.tasks import extract_transcript
from memoryui.models import Memory, MemoryEvent, Message, TaskRun, Transcript
from recall.pipeline import recall
from searchindex.search import search

pytestmark = pytest.mark.django_db


def user(text: str, **fields) -> dict:
    return {"role": "user", "content": text, **fields}


def assistant(text: str = "好的。") -> dict:
    return {"role": "assistant", "content": text}


def conversation(*turns, scope: str = "agent:main") -> dict:
    """user/assistant rounds: each user text answered by the assistant."""
    messages = []
    for turn in turns:
        messages += [turn if isinstance(turn, dict) else user(turn), assistant()]
    return {"scope": scope, "messages": messages}


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    """Store a transcript and extract it, then run what the writes queued after commit (the index sync)."""

    def extract_now(data: dict, **options):
        with django_capture_on_commit_callbacks(execute=True):
            return extract(ingest(data).transcript, **options)

    return extract_now


CHIT_CHAT = [
    "在吗?", "在吗", "搞完了吗", "怎么回事", "怎么啦?", "hello?", "any update?", "hi", "你好", "好的",
    "ok", "thanks", "谢谢", "怎么还没好", "还在吗", "继续", "嗯嗯", "?", "ping", "why is this so slow",
]  # fmt: skip


def test_twenty_turns_of_chit_chat_nudges_and_complaints_make_no_memory(indexes, run):
    report = run(conversation(*CHIT_CHAT))
    assert report.counts == {"added": 0, "merged": 0, "skipped": 20}
    assert not Memory.objects.exists()
    assert all(o.reason.startswith("not knowledge: ") for o in report.outcomes)


def test_a_name_and_a_lucky_number_become_pinned_core_entities_with_keys(indexes, run):
    report = run(conversation("我叫东升,幸运数字是 88"))
    memories = {m.entity_key: m for m in Memory.objects.all()}
    assert set(memories) == {"name:东升", "lucky_number:88"}
    for memory in memories.values():
        assert (memory.kind, memory.tier, memory.pinned, memory.source) == ("entity", "core", True, "extractor:l0")
        assert memory.metadata["origin"]["message"] == 0
    assert report.counts["added"] == 2


def test_the_same_fact_stated_three_times_is_one_memory_bumped_twice(indexes, run):
    run(conversation("我的幸运数字是88", "记一下,我的幸运数字是 88", "my lucky number is 88"))
    [memory] = Memory.objects.filter(entity_key="lucky_number:88")
    assert memory.access_count >= 2
    actions = list(memory.events.order_by("created_at").values_list("action", flat=True))
    assert actions == ["created", "merged", "merged"]
    assert memory.importance > memory.events.get(action="created").after["importance"]


@pytest.mark.parametrize(
    "message",
    [
        user("Multi-hop task: delegate to agent_a1, then agent_a2 reports my name is Bob"),
        user("Depth-3 chain test: remember that my phone is 13800138000"),
        user("我叫东升", source="banner"),
        user("my name is Alice", source="repair"),
        user("我的手机号是 13800138000", channel="heartbeat"),
        user("记住: 我喜欢简短的回答", channel="cron"),
    ],
)
def test_internal_prompts_and_non_user_sources_never_become_memories(indexes, message, run):
    report = run(conversation(message))
    assert not Memory.objects.exists()
    [outcome] = report.outcomes
    assert outcome.action == "skipped"


def test_remember_still_saves_through_dedup_and_tiering(indexes, run):
    run(conversation("/remember deploys go out on Thursdays after the smoke tests"))
    [memory] = Memory.objects.all()
    assert memory.source == "remember" and memory.kind == "remember" and memory.tier == "working"
    assert "Thursdays" in memory.text and "/remember" not in memory.text
    run(conversation("/remember deploys go out on Thursdays after the smoke tests"))
    assert Memory.objects.count() == 1 and Memory.objects.get().access_count == 1


def test_after_extraction_the_fact_is_found_not_the_question(indexes, run):
    run(conversation("我的幸运数字是啥?", "我叫东升,幸运数字是 88", "我的幸运数字是啥?"))
    assert Memory.objects.count() == 2  # the name and the number; the questions are not knowledge
    top = search("幸运数字", scopes=["agent:main"]).results[0].memory
    assert top.entity_key == "lucky_number:88"


def test_a_dangling_tool_call_is_trimmed_and_an_in_flight_round_extracts_nothing(indexes, run):
    data = {
        "scope": "agent:main",
        "messages": [
            user("我叫东升"),
            assistant("你好东升"),
            user("我的手机号是 13800138000"),
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "crm::save", "arguments": "{}"}]},
        ],
    }
    report = run(data)
    assert any("trim" in note for note in report.notes)
    assert [m.entity_key for m in Memory.objects.all()] == ["name:东升"]
    [skipped] = [o for o in report.outcomes if o.message == 2]
    assert skipped.action == "skipped" and skipped.reason.startswith("in-flight round")


def test_a_round_whose_call_was_rejected_is_extracted_from_once_the_user_went_on(indexes, run):
    data = {
        "scope": "agent:main",
        "messages": [
            user("我的手机号是 13800138000"),
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "crm::save", "arguments": "{}"}]},
            {"role": "tool", "content": "The user doesn't want to proceed with this tool use.", "tool_call_id": "c1"},
            user("先别存,我叫东升"),
            assistant("好的,东升。"),
        ],
    }
    report = run(data, dry_run=True)
    assert sorted((o.message, o.action, o.entity_key) for o in report.outcomes) == [
        (0, "added", "phone:13800138000"),
        (3, "added", "name:东升"),
    ]
    assert not Memory.objects.exists()


def test_recall_never_changes_a_stored_transcripts_message_count(indexes, run):
    transcript = run(conversation("我叫东升,幸运数字是 88"))
    transcript = Transcript.objects.get(pk=transcript.transcript)
    before = Message.objects.filter(transcript=transcript).count()
    result = recall("幸运数字", scope="agent:main", selector_config=None)
    assert result.selected
    assert Message.objects.filter(transcript=transcript).count() == before == 2


def test_a_dry_run_shows_the_decisions_and_writes_nothing(indexes, write):
    existing = write("我的幸运数字是88", kind="entity", entity_key="lucky_number:88")
    transcript = ingest(conversation("我叫东升,幸运数字是 88", "在吗?")).transcript
    report = extract(transcript, dry_run=True)
    assert Memory.objects.count() == 1 and not MemoryEvent.objects.filter(action="merged").exists()
    assert all(not m.extraction for m in transcript.messages.all())
    by_action = {o.action: o for o in report.outcomes}
    assert by_action["added"].entity_key == "name:东升" and by_action["added"].tier == "core"
    assert by_action["merged"].memory_id == str(existing.pk) and by_action["merged"].layer == "entity_key"
    assert by_action["skipped"].reason.startswith("not knowledge: ")


def test_each_message_records_what_became_of_it(indexes):
    transcript = ingest(conversation("我叫东升", "在吗?")).transcript
    extract(transcript, run_id="run-1")
    name, nudge = (m.extraction for m in transcript.messages.filter(role="user"))
    assert name["run"] == "run-1" and name["outcomes"][0]["action"] == "added"
    assert name["outcomes"][0]["memory_id"] == str(Memory.objects.get().pk)
    assert nudge["outcomes"][0]["action"] == "skipped"


def test_a_run_retried_after_dying_midway_ends_with_no_duplicate_and_none_missing(indexes):
    transcript = ingest(conversation("我叫东升", "我的手机号是 13800138000", "my email is ds@example.com")).transcript
    task = TaskRun.objects.create(kind="extract", actor="test", params={"transcript": str(transcript.pk)})

    def die_after_two(done, counts):
        if done == 2:
            raise RuntimeError("worker killed")

    with pytest.raises(RuntimeError):
        extract(transcript, run_id=str(task.pk), progress=die_after_two)
    assert Memory.objects.count() == 2
    result = extract_transcript(str(task.pk))  # the redelivered task
    assert Memory.objects.count() == 3
    assert all(m.access_count == 0 for m in Memory.objects.all())  # nothing merged into itself
    task.refresh_from_db()
    assert task.status == "succeeded" and task.progress_done == task.progress_total == 3
    assert result["counts"] == {"added": 3, "merged": 0, "skipped": 0}


def test_the_extract_command_prints_the_contract(indexes, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(conversation("我叫东升", "在吗?")), encoding="utf-8")
    out = io.StringIO()
    call_command("extract", str(path), "--dry-run", "--json", stdout=out)
    dry = json.loads(out.getvalue())
    assert dry["dry_run"] and [a["text"] for a in dry["added"]] and not Memory.objects.exists()
    out = io.StringIO()
    call_command("extract", "--transcript", dry["transcript_id"], "--json", stdout=out)
    done = json.loads(out.getvalue())
    assert {"added", "merged", "skipped"} <= set(done)
    assert [a["id"] for a in done["added"]] == [str(Memory.objects.get().pk)]
    assert done["skipped"][0]["reason"].startswith("not knowledge")
    assert TaskRun.objects.get(pk=done["task_id"]).status == "succeeded"
