"""export_memories --format markdown-dir|mem0: what import_memories reads back exactly."""

from __future__ import annotations

import json

import pytest

from memoryui.models import Memory

from .formats import FIXTURES, run, run_failing, wipe

pytestmark = pytest.mark.django_db


def _files(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _memories() -> list[tuple]:
    return list(
        Memory.objects.order_by("id").values_list(
            "id", "scope", "kind", "tier", "text", "importance", "pinned", "entity_key", "metadata", "created_at"
        )
    )


@pytest.fixture
def store():
    """Every format's fixture imported, and one memory of ours tombstoned."""
    run("import_memories", FIXTURES / "markdown-dir", "--scope", "agent:main")
    run("import_memories", FIXTURES / "GEMINI.md", "--scope", "user:42")
    run("import_memories", FIXTURES / "mem0-export.json")
    run("import_memories", FIXTURES / "memories.jsonl")
    Memory.objects.get(kind="note", scope="agent:main", source="import", text__startswith="Leftover").tombstone(
        "obsolete", actor="test"
    )
    return Memory.objects.count()


@pytest.mark.parametrize("format", ["markdown-dir", "mem0"])
def test_export_import_into_an_empty_store_export_again_gives_identical_files(tmp_path, store, format):
    first, second = tmp_path / "first", tmp_path / "second"
    assert run("export_memories", first, "--format", format, "--include-tombstoned") == {"exported": store}
    before = _memories()
    wipe()
    report = run("import_memories", first, "--format", format)
    assert (report["imported"], report["errors"]) == (store, [])
    assert _memories() == before  # the same ids, texts, kinds, tiers, metadata, times
    run("export_memories", second, "--format", format, "--include-tombstoned")
    if format == "markdown-dir":
        assert _files(second) == _files(first)
        assert len(_files(first)) == store + 1  # and MEMORY.md
    else:
        assert second.read_bytes() == first.read_bytes()


def test_an_exported_markdown_directory_reads_like_an_agents_memory_directory(tmp_path, store):
    target = tmp_path / "memory"
    run("export_memories", target, "--format", "markdown-dir", "--scope", "agent:main")
    index = (target / "MEMORY.md").read_text()
    assert "- [Run the real database in tests](run-the-real-database-in-tests-" in index
    name = next(n for n in _files(target) if n.startswith("run-the-real-database"))
    text = (target / name).read_text()
    assert text.startswith("---\nname: Run the real database in tests\ndescription: Integration tests must hit")
    assert "\ntype: feedback\nmemoryui:\n" in text
    assert text.endswith("`make db`.\n")
    # without our block, the agent's fields alone give the same kind and tier back
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    front, body = text.split("memoryui:", 1)
    (stripped / name).write_text(front + "---" + body.split("\n---", 1)[1])
    report = run("import_memories", stripped, "--scope", "agent:copy")
    assert report["imported"] == 1
    assert Memory.objects.filter(scope="agent:copy").values_list("kind", "tier").get() == ("preference", "core")


def test_a_mem0_export_keeps_mem0_ids_and_owners(tmp_path, store):
    path = tmp_path / "mem0.json"
    run("export_memories", path, "--format", "mem0", "--scope", "user:alice")
    items = json.loads(path.read_text())["results"]
    original = {item["id"] for item in json.loads((FIXTURES / "mem0-export.json").read_text())["results"]}
    assert {item["id"] for item in items} <= original and len(items) == 4
    assert {item["user_id"] for item in items} == {"alice"}
    assert all(len(item["hash"]) == 32 and item["metadata"]["memoryui"]["scope"] == "user:alice" for item in items)


def test_markdown_export_needs_a_new_or_empty_directory(tmp_path, store):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.md").write_text("mine")
    report = run_failing("export_memories", tmp_path / "taken", "--format", "markdown-dir")
    assert "not an empty directory" in report["error"]
    assert (tmp_path / "taken" / "keep.md").read_text() == "mine"
    assert "writes to a PATH" in run_failing("export_memories", "-", "--format", "mem0")["error"]


@pytest.mark.parametrize("format", ["markdown-dir", "mem0"])
def test_an_export_imported_into_another_scope_is_copied_there_and_the_originals_stay(tmp_path, store, format):
    exported = tmp_path / "export"
    scope = "agent:main" if format == "markdown-dir" else "user:alice"
    count = run("export_memories", exported, "--format", format, "--scope", scope)["exported"]
    before = _memories()

    report = run("import_memories", exported, "--format", format, "--scope", "agent:copy")
    assert (report["imported"], report["copied"], report["errors"]) == (count, count, [])
    copies = Memory.objects.filter(scope="agent:copy")
    exported_ones = Memory.objects.active().filter(scope=scope)
    originals = {str(pk): text for pk, text in exported_ones.values_list("id", "text")}
    assert {copy.metadata["copied_from"]["id"]: copy.text for copy in copies} == originals
    assert {copy.metadata["copied_from"]["scope"] for copy in copies} == {scope}
    assert [row for row in _memories() if row[1] != "agent:copy"] == before, "the originals are untouched"

    again = run("import_memories", exported, "--format", format, "--scope", "agent:copy")
    assert (again["imported"], again["updated"], again["copied"]) == (0, 0, count), "each copy is found again"
    assert Memory.objects.filter(scope="agent:copy").count() == count
