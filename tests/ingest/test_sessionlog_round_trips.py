"""What a session log holds that a transcript message has no field for is kept or named: a
Claude Code tool result's `is_error` and a Gemini orphan result's tool name are written back on
export; an image replaced by `[image]` and a tool result cut to the content limit are counted
in the import's notes; an error flag a format cannot carry is in the export's notes."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from ingest import sessionlogs
from ingest.ingestion import MAX_CONTENT_CHARS
from memoryui.models import Transcript
from tests.ingest.sessionlog_support import SESSIONS, run

pytestmark = pytest.mark.django_db


def session_file(tmp_path, name: str, lines: list[dict] | None = None, document: object = None):
    path = tmp_path / name
    text = "".join(json.dumps(line) + "\n" for line in lines) if lines is not None else json.dumps(document)
    path.write_text(text)
    return path


def ingest(path, *args: str) -> tuple[Transcript, dict]:
    report = run("ingest_transcript", str(path), "--scope", "agent:main", *args)
    return Transcript.objects.get(pk=report["transcript_id"]), report


def user(content, **fields) -> dict:
    return {"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": content}, **fields}


def assistant(message_id: str, *blocks: dict) -> dict:
    message = {"id": message_id, "role": "assistant", "content": list(blocks)}
    return {"type": "assistant", "sessionId": "s-1", "message": message}


FAILED_READ = [
    user("Read the config."),
    assistant("m1", {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.yml"}}),
    user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "File does not exist.", "is_error": True}]),
    assistant("m2", {"type": "text", "text": "The file is missing."}),
]


def results_of(events: list[dict]) -> list[dict]:
    return [
        block
        for event in events
        if event["type"] == "user" and isinstance(event["message"]["content"], list)
        for block in event["message"]["content"]
        if block.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("projected", [True, False])
def test_a_claude_code_error_result_is_still_an_error_when_exported(tmp_path, projected):
    transcript, _ = ingest(session_file(tmp_path, "s-1.jsonl", FAILED_READ))

    events = sessionlogs.export(transcript, projected=projected).items

    assert results_of(events) == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File does not exist.", "is_error": True}
    ]


def test_a_growing_session_keeps_the_error_flag_of_a_result_it_gained(tmp_path):
    first = [*FAILED_READ[:2], {**FAILED_READ[2], "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File does not exist."}]}}]  # fmt: skip
    transcript, _ = ingest(session_file(tmp_path, "s-1.jsonl", [*first, FAILED_READ[3]]))
    retry = [
        user("Try b.yml."),
        assistant("m3", {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "b.yml"}}),
        user([{"type": "tool_result", "tool_use_id": "toolu_2", "content": "Permission denied.", "is_error": True}]),
    ]
    grown, report = ingest(session_file(tmp_path, "s-1.jsonl", [*first, FAILED_READ[3], *retry]))

    assert grown.pk == transcript.pk and (report["created"], report["added"]) == (False, 3)
    results = results_of(sessionlogs.export(grown).items)
    assert [result.get("is_error", False) for result in results] == [False, True]


def test_an_error_flag_the_format_has_no_place_for_is_in_the_export_notes(tmp_path):
    transcript, _ = ingest(session_file(tmp_path, "s-1.jsonl", FAILED_READ))

    for fmt in ("openai", "gemini"):
        notes = sessionlogs.export(transcript, fmt).notes
        assert any("messages #2: tool results marked as errors" in note for note in notes), fmt


def test_export_transcript_reports_the_notes_in_json_in_its_summary_and_on_stderr(tmp_path, capsys):
    transcript, _ = ingest(session_file(tmp_path, "s-1.jsonl", FAILED_READ))
    lost = "messages #2: tool results marked as errors"

    report = run("export_transcript", str(transcript.pk), str(tmp_path / "out.json"), "--format", "openai")
    call_command("export_transcript", str(transcript.pk), str(tmp_path / "out.json"), "--format", "gemini")
    summary = capsys.readouterr().out
    call_command("export_transcript", str(transcript.pk), "--format", "openai")
    to_stdout = capsys.readouterr()

    assert any(lost in note for note in report["notes"]), report
    assert f"note: {lost}" in summary
    assert json.loads(to_stdout.out)  # the export alone on standard output …
    assert f"note: {lost}" in to_stdout.err  # … and what it lost on standard error


def test_images_replaced_by_a_placeholder_are_counted_in_the_notes(tmp_path):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    claude = [
        user([{"type": "text", "text": "What is in these?"}, image, image]),
        assistant("m1", {"type": "tool_use", "id": "toolu_1", "name": "Screenshot", "input": {}}),
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": [image]}]),
        assistant("m2", {"type": "text", "text": "Two charts and a screenshot."}),
    ]
    picture = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}
    openai = [{"role": "user", "content": [{"type": "text", "text": "And this?"}, picture]}]

    _, from_claude = ingest(session_file(tmp_path, "s-1.jsonl", claude))
    _, from_openai = ingest(session_file(tmp_path, "o.json", document=openai), "--format", "openai")

    assert "replaced 3 image(s) with [image]: the transcript keeps text only" in from_claude["notes"]
    assert "replaced 1 image(s) with [image]: the transcript keeps text only" in from_openai["notes"]


def test_a_gemini_orphan_function_response_keeps_its_name(tmp_path):
    checkpoint = [
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "x = 1"}}}]},
        {"role": "user", "parts": [{"text": "What did the file say?"}]},
        {"role": "model", "parts": [{"text": "x = 1"}]},
    ]
    transcript, _ = ingest(session_file(tmp_path, "checkpoint-orphan.json", document=checkpoint))

    history = sessionlogs.export(transcript, projected=False).items

    assert history[0]["parts"][0]["functionResponse"]["name"] == "read_file"


def test_a_tool_result_over_the_content_limit_is_cut_and_the_notes_say_which_and_how_long(tmp_path):
    lines = [*FAILED_READ[:2], user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "y" * 300_000}])]
    transcript, report = ingest(session_file(tmp_path, "s-1.jsonl", lines))

    assert len(transcript.messages.get(index=2).content) <= MAX_CONTENT_CHARS
    assert (
        "message #2 (tool, tool result for call toolu_1): 300,000 characters, "
        "cut to 200,000 (a message holds at most that)"
    ) in report["notes"]


def test_what_gemini_and_openai_have_no_place_for_is_in_the_export_notes():
    report = run("ingest_transcript", str(SESSIONS / "claude-code" / "session.jsonl"), "--scope", "agent:main")
    transcript = Transcript.objects.get(pk=report["transcript_id"])
    system = [m.index for m in transcript.messages.filter(role="system")]

    gemini = sessionlogs.export(transcript, "gemini")
    openai = sessionlogs.export(transcript, "openai")
    claude = sessionlogs.export(transcript, "claude-code")

    shown = ", ".join(f"#{index}" for index in system)
    assert f"messages {shown}: system messages left out; a Gemini checkpoint has no place for them" in gemini.notes
    assert "the messages' times left out: a Gemini checkpoint's content has no time" in gemini.notes
    assert "the messages' times left out: an OpenAI message has no time" in openai.notes
    assert not [note for note in claude.notes if "left out" in note]  # Claude Code events keep both
