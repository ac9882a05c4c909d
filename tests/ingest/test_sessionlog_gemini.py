"""gemini-cli and qwen-code chat checkpoints as transcripts: the tag as the id, function calls
and responses paired by id or by name (with stable ids), the CLI's setup turn on the system
channel, the crashed checkpoint's open exchange trimmed, extraction (L0)."""

from __future__ import annotations

import json

import pytest

from ingest import sessionlogs
from ingest.transcripts import projection_of
from memoryui.models import Transcript
from tests.ingest.sessionlog_support import (
    SESSIONS,
    added,
    export,
    extract_l0,
    ingest,
    openai_problems,
    run,
    skipped,
    stored,
)

pytestmark = pytest.mark.django_db


def test_the_checkpoint_tag_is_the_transcript_id_and_the_format_is_remembered():
    transcript = ingest("gemini/checkpoint-staging-db.json")

    assert transcript.external_id == "staging-db"
    assert transcript.metadata == {"format": "gemini", "tag": "staging-db"}
    assert ingest("gemini/checkpoint-hotfix.json").metadata["auth_type"] == "oauth-personal"  # {"history": ...}


def test_calls_without_ids_get_stable_ids_and_responses_pair_with_them_by_name():
    messages = stored(ingest("gemini/checkpoint-staging-db.json"))

    call = messages[5]
    assert call["role"] == "assistant" and call["content"] == "Noted. Let me check that the cron job agrees."
    assert [(c["id"], c["name"]) for c in call["tool_calls"]] == [
        ("gemini-5-2", "read_file"),  # content 5, part 2: the thought part is left out, not renumbered
        ("gemini-5-3", "run_shell_command"),
    ]
    assert [(m["role"], m["tool_call_id"]) for m in messages[6:8]] == [("tool", "gemini-5-2"), ("tool", "gemini-5-3")]
    assert messages[6]["content"].startswith("jobs:\n  refresh-staging:")  # {"output": text} is the text
    again = run("ingest_transcript", str(SESSIONS / "gemini" / "checkpoint-staging-db.json"), "--scope", "agent:main")
    assert (again["created"], again["added"]) == (False, 0)  # the same ids again: nothing differs


def test_responses_pair_by_id_when_the_cli_gave_ids(tmp_path):
    # Two calls of one tool answered in the opposite order: only the ids can pair them.
    checkpoint = [
        {"role": "user", "parts": [{"text": "Read both files."}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"id": "read-a", "name": "read_file", "args": {"absolute_path": "/a"}}},
                {"functionCall": {"id": "read-b", "name": "read_file", "args": {"absolute_path": "/b"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "read-b", "name": "read_file", "response": {"output": "B"}}},
                {"functionResponse": {"id": "read-a", "name": "read_file", "response": {"output": "A"}}},
            ],
        },
    ]
    path = tmp_path / "checkpoint-two-reads.json"
    path.write_text(json.dumps(checkpoint))

    report = run("ingest_transcript", str(path), "--scope", "agent:main")
    messages = stored(Transcript.objects.get(pk=report["transcript_id"]))

    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [("read-b", "B"), ("read-a", "A")]


def test_the_setup_turn_is_internal_and_the_source_filter_skips_it():
    transcript = ingest("gemini/checkpoint-staging-db.json")
    messages = stored(transcript)

    assert [(m["role"], m.get("channel"), m.get("source")) for m in messages[:2]] == [
        ("user", "system", "internal"),
        ("assistant", "system", "internal"),
    ]
    assert skipped(extract_l0(transcript)) == {0: "system channel"}


def test_extraction_gives_the_users_name_remember_request_and_preference():
    assert added(extract_l0(ingest("gemini/checkpoint-staging-db.json"))) == [
        ("entity", "The user's name is Lena Fischer."),
        ("preference", "The user prefers two-space indentation in YAML files."),
        ("remember", "The staging database is refreshed every Monday at 06:00 UTC."),
    ]


def test_a_qwen_code_checkpoint_reads_the_same_way():
    transcript = ingest("qwen-code/checkpoint-release-notes.json", "--format", "qwen-code")

    assert (transcript.external_id, transcript.metadata["format"]) == ("release-notes", "gemini")
    assert stored(transcript)[0]["source"] == "internal"  # "This is the Qwen Code. We are setting up…"
    assert added(extract_l0(transcript)) == [
        ("entity", "The user's name is Wei Zhang."),
        ("preference", "The user prefers release notes in English."),
    ]


def test_a_crashed_checkpoint_projects_without_its_partly_answered_exchange():
    transcript = ingest("gemini/checkpoint-hotfix.json")

    projection = projection_of(transcript)

    assert [m.index for m in projection.trimmed] == [5, 6]
    assert [r.state for r in projection.rounds] == ["complete", "complete", "in_flight"]
    assert any("lookup_owner" in note and "no result" in note for note in projection.notes)
    report = extract_l0(transcript)
    assert added(report) == [("entity", "The user's name is Lena Fischer.")]
    assert skipped(report)[4].startswith("in-flight round")


def test_the_projected_export_of_a_crashed_checkpoint_is_a_valid_openai_request():
    transcript = ingest("gemini/checkpoint-hotfix.json")

    projected = json.loads(export(transcript, "--projected", "--format", "openai"))

    assert openai_problems(projected) == []
    assert openai_problems(json.loads(export(transcript, "--format", "openai")))  # unprojected: refused


def test_the_projection_is_written_back_as_a_checkpoint_that_reads_back_the_same():
    transcript = ingest("gemini/checkpoint-staging-db.json")

    history = json.loads(export(transcript, "--projected"))
    again = sessionlogs.read(json.dumps(history), filename="checkpoint-staging-db.json")

    assert [content["role"] for content in history][:4] == ["user", "model", "user", "model"]
    assert [p["functionResponse"]["name"] for p in history[6]["parts"]] == ["read_file", "run_shell_command"]
    assert again.transcript["messages"] == stored(transcript)
