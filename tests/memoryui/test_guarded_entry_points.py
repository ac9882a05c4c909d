"""Every way JSON text memoryui did not write comes in is read under the API's limits: JSON nested
thousands of levels deep in a *text* (a session log's line, a pasted log, a mem0 file, a JSONL
line, a markdown file's YAML, the metadata field, a model's answer, a labelled set) is refused
naming the line, file or field, never a 500 from a RecursionError, and nothing is written.

Who is who: alice's session posts to the API (a superuser, every scope); erin, an editor, uses
the dashboard's pages.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from ingest import jsonl, sessionlogs
from ingest.memoryfiles import SourceFile
from ingest.memoryfiles.importing import import_files
from memoryui.models import Memory, MemoryEvent, Message, Transcript
from recall.selector import SelectorFailed, parse_answer

pytestmark = pytest.mark.django_db

DEPTH = 2_000
TOO_DEEP = "is nested more than 32 levels deep"
SESSION = "5f0c2d1e-7a4b-4c3d-9e8f-0a1b2c3d4e5f"
FIRST_LINE = json.dumps(
    {"type": "user", "sessionId": SESSION, "uuid": "u1", "message": {"role": "user", "content": "I deploy on Fridays."}}
)


def deep(depth: int = DEPTH) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def deep_event() -> str:
    """A Claude Code event whose unread `toolUseResult` nests DEPTH levels: a line of the log."""
    return FIRST_LINE[:-1] + ', "toolUseResult": ' + deep() + "}"


@pytest.fixture
def api(alice) -> Client:
    """alice's session, answering 500s as a server would instead of raising them into the test."""
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def refused_body(response) -> str:
    assert response.status_code == 400, response.content
    details = response.json()["error"]["details"]
    assert list(details) == ["body"]
    return details["body"][0]


def nothing_stored() -> bool:
    return not Transcript.objects.exists() and not Message.objects.exists()


def nothing_written() -> bool:
    return not Memory.objects.exists() and not MemoryEvent.objects.exists()


# --- session logs over the API -----------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/jsonl", "text/plain"])
def test_a_deep_line_of_a_claude_code_log_is_a_400_naming_the_line(api, content_type):
    body = "\n".join([FIRST_LINE, deep_event(), FIRST_LINE]) + "\n"

    reason = refused_body(api.post("/api/transcripts/?as=claude-code&scope=agent:main", body, content_type))

    assert reason.startswith(f"is not a Claude Code session (.jsonl): line 2 {TOO_DEEP} (at $.toolUseResult.a.a")
    assert nothing_stored()


def test_a_deep_line_after_a_valid_first_line_is_a_400_when_the_format_is_detected(api):
    body = "\n".join([FIRST_LINE, deep_event()]) + "\n"

    for url in ("/api/transcripts/?scope=agent:main", "/api/transcripts/?as=auto&scope=agent:main"):
        reason = refused_body(api.post(url, body, "text/plain"))
        assert reason.startswith(f"line 2 {TOO_DEEP}")
    assert nothing_stored()


def test_a_deep_last_line_is_refused_not_left_out_as_a_line_cut_short(api):
    body = "\n".join([FIRST_LINE, FIRST_LINE.replace("u1", "u2"), deep_event()])

    reason = refused_body(api.post("/api/transcripts/?as=claude-code&scope=agent:main", body, "text/plain"))

    assert f"line 3 {TOO_DEEP}" in reason
    assert nothing_stored()


def test_a_line_with_a_number_json_has_none_of_is_a_400_naming_the_line(api):
    body = "\n".join([FIRST_LINE, FIRST_LINE[:-1] + ', "costUSD": NaN}'])

    reason = refused_body(api.post("/api/transcripts/?as=claude-code&scope=agent:main", body, "text/plain"))

    assert "line 2 is not JSON: NaN is not a number JSON allows" in reason
    assert nothing_stored()


@pytest.mark.parametrize("fmt", ["gemini", "openai", "memoryui", "auto"])
def test_a_deep_document_posted_as_text_is_a_400_naming_the_body(api, fmt):
    body = '[{"role": "user", "parts": [{"text": "hi"}], "x": ' + deep() + "}]"

    reason = refused_body(api.post(f"/api/transcripts/?as={fmt}&scope=agent:main", body, "text/plain"))

    assert TOO_DEEP in reason
    assert nothing_stored()


# --- the dashboard's transcript form --------------------------------------------------------------


@pytest.mark.parametrize(
    ("pasted", "fmt"),
    [
        ("\n".join([FIRST_LINE, deep_event()]), ""),
        ("\n".join([FIRST_LINE, deep_event()]), "claude-code"),
        ('{"scope": "agent:main", "messages": [' + deep() + "]}", ""),
        ('[{"role": "user", "parts": [{"text": "hi"}]}, ' + deep() + "]", "gemini"),
    ],
)
def test_a_deep_session_log_pasted_on_the_page_is_an_error_on_the_form(erin_client, pasted, fmt):
    response = erin_client.post("/transcripts/", {"transcript": pasted, "format": fmt, "scope": "agent:main"})

    assert response.status_code == 400
    assert TOO_DEEP in response.content.decode()
    assert nothing_stored()


def test_a_deep_session_log_uploaded_on_the_page_is_an_error_on_the_form(erin_client):
    upload = SimpleUploadedFile("session.jsonl", "\n".join([FIRST_LINE, deep_event()]).encode())

    response = erin_client.post("/transcripts/", {"file": upload, "scope": "agent:main"})

    assert response.status_code == 400 and "line 2 " + TOO_DEEP in response.content.decode()
    assert nothing_stored()


def test_ingest_transcript_refuses_a_deep_line_naming_it(tmp_path):
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join([FIRST_LINE, deep_event()]) + "\n", encoding="utf-8")

    with pytest.raises(CommandError, match="line 2 is nested more than 32 levels deep"):
        call_command("ingest_transcript", str(path), "--scope", "agent:main", stdout=io.StringIO())
    assert nothing_stored()


# --- memory files -------------------------------------------------------------------------------

MEM0_ITEM = {"id": "m-1", "memory": "Name is Alice Chen.", "user_id": "alice"}


def mem0_file(metadata: str) -> bytes:
    good = json.dumps({**MEM0_ITEM, "id": "m-0", "memory": "Lives in Shanghai."})
    return ('{"results": [' + good + ", " + json.dumps(MEM0_ITEM)[:-1] + ', "metadata": ' + metadata + "}]}").encode()


@pytest.mark.parametrize("depth", [DEPTH, 30])
def test_a_mem0_file_whose_metadata_nests_past_the_limit_is_an_error_naming_the_file(depth):
    # The file is one JSON document, read as the API reads a body: nested at most 32 levels in
    # all, so an item's metadata (4 levels down: results, the list, the item) at most 29.
    report = import_files([SourceFile("mem0.json", mem0_file(deep(depth)))], format="mem0")

    (error,) = report.errors
    assert error["file"] == "mem0.json"
    assert error["error"] == "$.results[1].metadata" + ".a" * 29 + " " + TOO_DEEP
    assert report.imported == 0 and nothing_written()


def test_a_mem0_files_metadata_nested_to_the_limit_is_imported_and_exported():
    report = import_files([SourceFile("mem0.json", mem0_file(deep(29)))], format="mem0")

    assert report.errors == [] and report.imported == 2
    origin = Memory.objects.get(text="Name is Alice Chen.").metadata["origin"]
    assert json.dumps(origin["metadata"]) == deep(29)


def test_the_import_page_previews_a_deep_mem0_file_as_an_error_and_writes_nothing(erin_client):
    upload = SimpleUploadedFile("mem0-export.json", mem0_file(deep()))

    response = erin_client.post(reverse("memory_import"), {"file": upload})

    assert response.status_code == 200
    assert TOO_DEEP in response.content.decode()
    assert nothing_written()


def test_import_memories_reports_a_deep_mem0_file_and_writes_nothing(tmp_path):
    path = tmp_path / "mem0-export.json"
    path.write_bytes(mem0_file(deep()))
    out = io.StringIO()

    with pytest.raises(CommandError):
        call_command("import_memories", str(path), "--json", stdout=out, stderr=io.StringIO())

    (error,) = json.loads(out.getvalue())["errors"]
    assert error["file"] == "mem0-export.json" and TOO_DEEP in error["error"]
    assert nothing_written()


def test_a_deep_jsonl_line_is_an_error_naming_the_line_on_the_import_page(erin_client):
    good = json.dumps({"scope": "agent:main", "kind": "fact", "text": "The staging database is db-stg-3."})
    bad = json.dumps({"scope": "agent:main", "kind": "fact", "text": "x", "metadata": "@"}).replace('"@"', deep())
    upload = SimpleUploadedFile("memories.jsonl", f"{good}\n{bad}\n".encode())

    response = erin_client.post(reverse("memory_import"), {"file": upload})

    assert response.status_code == 200
    assert TOO_DEEP in response.content.decode()
    assert nothing_written()
    report = jsonl.import_lines(io.BytesIO(f"{good}\n{bad}\n".encode()))
    assert [(e["line"], e["error"].endswith(TOO_DEEP)) for e in report.errors] == [(2, True)]
    assert report.imported == 1


def markdown(front: str, body: str = "The user deploys on Fridays.") -> SourceFile:
    return SourceFile("deploys.md", f"---\n{front}\n---\n\n{body}\n".encode())


@pytest.mark.parametrize(
    ("front", "says"),
    [
        ("name: deploys\nrelated: " + "[" * DEPTH + "]" * DEPTH, "is nested more than 34 levels deep"),
        ("name: deploys\nrelated:\n" + "".join("  " * n + "- \n" for n in range(1, 60)), "levels deep"),
        (
            "name: deploys\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
            "an alias (*name) is not read in front matter",
        ),
    ],
)
def test_markdown_front_matter_that_would_blow_up_is_an_error_naming_the_file(front, says):
    report = import_files([markdown(front)], format="markdown-dir", scope="agent:main")

    (error,) = report.errors
    assert error["file"] == "deploys.md" and says in error["error"]
    assert nothing_written()


def test_yaml_values_json_has_none_of_are_kept_as_text_and_the_memory_exports(alice_client):
    front = (
        "name: deploys\ntype: project\nwhen: 2026-11-25\nodds: .inf\ntags: !!set {a, b}\n"
        "memoryui:\n  scope: agent:main\n  kind: fact\n  metadata: {score: .nan, day: 2026-01-02}"
    )

    report = import_files([markdown(front)], format="markdown-dir")

    assert report.errors == [] and report.imported == 1
    metadata = Memory.objects.get().metadata
    assert metadata == {"score": "nan", "day": "2026-01-02"}
    response = alice_client.get("/api/memories/")
    assert response.status_code == 200 and response.json()["results"][0]["metadata"] == metadata


# --- fields and other texts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        (deep(), "metadata" + ".a" * 32 + " " + TOO_DEEP),
        ('{"score": NaN}', "Invalid JSON: NaN is not a number JSON allows"),
        ('{"score": 1e999}', "Invalid JSON: the number 1e999 is too large"),
    ],
)
def test_the_metadata_field_refuses_what_the_api_refuses(erin_client, metadata, says):
    form = {"scope": "agent:main", "kind": "fact", "text": "Deploys on Fridays.", "metadata": metadata}

    response = erin_client.post(reverse("memory_create"), form)

    assert response.status_code == 400
    assert says in response.content.decode()
    assert nothing_written()


def test_the_back_offices_metadata_field_refuses_deep_json_as_an_invalid_value(alice_client, make_memory):
    memory = make_memory()
    form = {
        "scope": "agent:main", "kind": "fact", "text": "Deploys on Fridays.", "tier": "working", "importance": 0.5,
        "confidence": 0.5, "status": "active", "source": "user", "entity_key": "", "metadata": deep(),
    }  # fmt: skip

    response = alice_client.post(f"/admin/memoryui/memory/{memory.pk}/change/", form)

    assert response.status_code == 200 and TOO_DEEP in response.content.decode()
    memory.refresh_from_db()
    assert memory.text == "The user prefers short answers."


def test_a_models_deep_answer_is_an_invalid_answer_not_a_crash():
    with pytest.raises(SelectorFailed) as failed:
        parse_answer('{"selected": ' + "[" * DEPTH + "]" * DEPTH + "}", ["m1"], 5)

    assert failed.value.code == "invalid_json" and TOO_DEEP in str(failed.value)


def test_import_golden_refuses_a_deep_file_naming_it(tmp_path):
    path = tmp_path / "set.json"
    path.write_text('{"memories": [], "queries": ' + deep() + "}", encoding="utf-8")

    with pytest.raises(CommandError, match=f"path: {path}: .*{TOO_DEEP}"):
        call_command("import_golden", str(path), stdout=io.StringIO())


def test_session_log_detection_reads_a_deep_text_without_recursing():
    with pytest.raises(sessionlogs.SessionLogError, match=TOO_DEEP):
        sessionlogs.read("\n".join([FIRST_LINE, deep_event()]))
    with pytest.raises(sessionlogs.SessionLogError, match=TOO_DEEP):
        sessionlogs.read(deep(100_000))
