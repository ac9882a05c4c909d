"""import_memories without --format: the format is detected from PATH; JSONL keeps its behaviour."""

from __future__ import annotations

import io
import zipfile

import pytest

from ingest.memoryfiles import FormatError, SourceFile, detect
from memoryui.models import Memory

from .formats import FIXTURES, counts, run, run_failing

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("markdown-dir", "markdown-dir"),
        ("CLAUDE.md", "context-file"),
        ("GEMINI.md", "context-file"),
        ("QWEN.md", "context-file"),
        ("mem0-export.json", "mem0"),
        ("memories.jsonl", "jsonl"),
        ("markdown-dir/user_role.md", "markdown-dir"),  # one memory file on its own
    ],
)
def test_the_format_is_detected_from_the_fixture(name, expected):
    path = FIXTURES / name
    assert detect.detect(detect.read_path(path), given_a_directory=path.is_dir()) == expected


def test_a_markdown_file_with_an_added_memories_section_is_a_context_file_whatever_its_name():
    text = b"# Notes\n\n## Qwen Added Memories\n- Deploys happen on Tuesdays.\n"
    assert detect.detect([SourceFile("notes.md", text)]) == "context-file"


def test_what_cannot_be_told_apart_is_refused_with_the_choices():
    with pytest.raises(FormatError, match="choose one"):
        detect.detect([SourceFile("memories.txt", b"hello")])
    with pytest.raises(FormatError, match="not a mem0 export"):
        detect.detect([SourceFile("transcript.json", b'{"messages": []}')])


def test_a_zip_of_a_memory_directory_is_read_relative_to_its_folder():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted((FIXTURES / "markdown-dir").iterdir()):
            archive.write(path, f"memory/{path.name}")
        archive.writestr("__MACOSX/memory/._user_role.md", b"\x00\x05")
    files = detect.read_upload("memory.zip", buffer.getvalue())
    assert sorted(f.name for f in files) == sorted(p.name for p in (FIXTURES / "markdown-dir").iterdir())
    assert detect.detect(files, given_a_directory=True) == "markdown-dir"


def test_a_zip_may_not_point_outside_itself():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../escape.md", "---\ntype: user\n---\nx\n")
    with pytest.raises(FormatError, match="outside the archive"):
        detect.read_upload("evil.zip", buffer.getvalue())


def test_every_fixture_imports_with_the_format_detected():
    assert run("import_memories", FIXTURES / "markdown-dir", "--scope", "agent:md")["format"] == "markdown-dir"
    assert run("import_memories", FIXTURES / "GEMINI.md", "--scope", "agent:gemini")["format"] == "context-file"
    assert run("import_memories", FIXTURES / "mem0-export.json")["format"] == "mem0"
    assert run("import_memories", FIXTURES / "memories.jsonl")["format"] == "jsonl"
    assert counts("scope") == {"agent:md": 8, "agent:gemini": 4, "user:alice": 4, "agent:scheduler": 1, "agent:main": 4}


def test_jsonl_keeps_its_errors_by_line_and_gains_a_dry_run(tmp_path):
    path = tmp_path / "memories.jsonl"
    path.write_text((FIXTURES / "memories.jsonl").read_text() + "not json\n")
    report = run_failing("import_memories", path, "--dry-run")
    assert (report["imported"], report["dry_run"], Memory.objects.count()) == (4, True, 0)
    assert report["errors"] == [{"line": 5, "error": report["errors"][0]["error"]}]  # no file: one file
    assert [(row["line"], row["kind"], row["tier"], row["id"]) for row in report["preview"]] == [
        (1, "entity", "core", "0b5e7f1a-2c3d-4e5f-8a9b-1c2d3e4f5a6b"),
        (2, "preference", "core", "1c6f8a2b-3d4e-4f6a-9b0c-2d3e4f5a6b7c"),
        (3, "procedure", "working", None),  # no id in the line: a new one when written
        (4, "note", "peripheral", None),
    ]
    report = run_failing("import_memories", path)
    assert counts("kind") == {"entity": 1, "preference": 1, "procedure": 1, "note": 1}
    assert counts("tier") == {"core": 2, "working": 1, "peripheral": 1}
