"""import_memories --format markdown-dir: one memory per front-matter file, types mapped to kinds."""

from __future__ import annotations

import shutil

import pytest

from ingest.memoryfiles import markdown, stable_id
from memoryui.models import IndexOutbox, Memory, MemoryEvent

from .formats import FIXTURES, counts, run, run_failing, store_state

pytestmark = pytest.mark.django_db

DIRECTORY = FIXTURES / "markdown-dir"


def test_a_memory_directory_imports_every_memory_file_by_its_type():
    report = run("import_memories", DIRECTORY, "--format", "markdown-dir", "--scope", "agent:main")

    assert (report["imported"], report["skipped"], report["errors"], report["format"]) == (8, 1, [], "markdown-dir")
    assert counts("kind") == {"entity": 1, "preference": 2, "project_state": 2, "fact": 1, "procedure": 1, "note": 1}
    assert counts("tier") == {"core": 3, "working": 4, "peripheral": 1}
    assert counts("source") == {"import": 8}
    # user and feedback memories are core and pinned (identity, stable explicit preferences)
    assert set(Memory.objects.filter(pinned=True).values_list("kind", flat=True)) == {"entity", "preference"}
    assert Memory.objects.get(kind="note").expires_at is not None  # unknown type: peripheral with a TTL


def test_the_index_file_is_skipped_with_its_reason():
    report = run("import_memories", DIRECTORY, "--scope", "agent:main")
    assert report["skipped_files"] == [
        {"file": "MEMORY.md", "line": 1, "reason": "an index that only links other memory files, not a memory"}
    ]
    assert not Memory.objects.filter(text__contains="Memory index").exists()


def test_origin_and_stable_id_are_kept():
    run("import_memories", DIRECTORY, "--scope", "agent:main")
    memory = Memory.objects.get(pk=stable_id("markdown-dir", "agent:main", "feedback_testing.md"))
    assert memory.text.startswith("Integration tests must run against a real PostgreSQL database")
    assert "**How to apply:**" in memory.text  # the whole body is the memory
    assert memory.metadata["origin"] == {
        "format": "markdown-dir",
        "file": "feedback_testing.md",
        "name": "Run the real database in tests",
        "description": "Integration tests must hit a real PostgreSQL, not mocks",
        "type": "feedback",
    }
    events = MemoryEvent.objects.filter(memory=memory)
    assert [(e.action, e.actor) for e in events] == [("created", "import")]
    assert IndexOutbox.objects.filter(memory_id=memory.pk).exists()  # queued for the indexes


def test_importing_again_changes_nothing():
    run("import_memories", DIRECTORY, "--scope", "agent:main")
    before = store_state()
    again = run("import_memories", DIRECTORY, "--scope", "agent:main")
    assert (again["imported"], again["updated"], again["skipped"], again["batch"]) == (0, 0, 9, None)
    assert store_state() == before


def test_a_changed_file_updates_its_memory_in_place(tmp_path):
    copy = shutil.copytree(DIRECTORY, tmp_path / "memory")
    run("import_memories", copy, "--scope", "agent:main")
    path = copy / "feedback_commits.md"
    path.write_text(path.read_text().replace("in this repository", "in every repository"))
    report = run("import_memories", copy, "--scope", "agent:main")
    assert (report["imported"], report["updated"], report["skipped"]) == (0, 1, 8)
    memory = Memory.objects.get(pk=stable_id("markdown-dir", "agent:main", "feedback_commits.md"))
    assert memory.text.endswith("in every repository.")
    assert memory.events.filter(action="edited", actor="import").exists()


def test_dry_run_writes_nothing_and_says_what_would_happen():
    report = run("import_memories", DIRECTORY, "--scope", "agent:main", "--dry-run")
    assert (report["imported"], report["dry_run"]) == (8, True)
    assert Memory.objects.count() == 0 and MemoryEvent.objects.count() == 0
    row = next(r for r in report["preview"] if r["file"] == "user_role.md")
    assert row == {
        "file": "user_role.md",
        "line": 6,
        "action": "new",
        "id": str(stable_id("markdown-dir", "agent:main", "user_role.md")),
        "scope": "agent:main",
        "kind": "entity",
        "tier": "core",
        "text": row["text"],
        "changes": [],
    }
    run("import_memories", DIRECTORY, "--scope", "agent:main")
    again = run("import_memories", DIRECTORY, "--scope", "agent:main", "--dry-run")
    assert {r["action"] for r in again["preview"]} == {"unchanged"}


def test_a_broken_file_is_named_while_the_rest_import():
    report = run_failing("import_memories", FIXTURES / "markdown-dir-broken", "--scope", "agent:main")
    assert report["imported"] == 2
    assert [(e["file"], e["line"]) for e in report["errors"]] == [("broken_front_matter.md", 4)]
    assert "not valid YAML" in report["errors"][0]["error"]


def test_a_file_without_front_matter_or_text_is_an_error(tmp_path):
    (tmp_path / "notes.md").write_text("Just some notes, no front matter.\n")
    (tmp_path / "empty.md").write_text("---\nname: Empty\ntype: user\n---\n\n")
    (tmp_path / "ok.md").write_text("---\nname: Editor\ntype: feedback\n---\nUse vim keybindings.\n")
    report = run_failing("import_memories", tmp_path, "--scope", "agent:main")
    assert report["imported"] == 1
    assert {e["file"]: e["error"].split(":")[0] for e in report["errors"]} == {
        "empty.md": "text",
        "notes.md": "no front matter",
    }


def test_a_directory_needs_a_scope():
    report = run_failing("import_memories", DIRECTORY)
    assert report["imported"] == 0
    assert {e["file"] for e in report["errors"]} == {p.name for p in DIRECTORY.iterdir()} - {"MEMORY.md"}
    assert "--scope" in report["errors"][0]["error"]


@pytest.mark.parametrize(
    ("type_", "body", "kind"),
    [
        ("user", "Senior Go engineer.", "entity"),
        ("feedback", "Terse answers.", "preference"),
        ("project", "Freeze from Monday.", "project_state"),
        ("reference", "Dashboards are at grafana.internal.", "fact"),
        ("reference", "1. Build.\n2. Deploy.", "procedure"),
        ("Feedback ", "Case and spaces do not matter.", "preference"),
        ("todo", "Whatever.", "note"),
        (None, "No type at all.", "note"),
    ],
)
def test_type_to_kind_rule(type_, body, kind):
    assert markdown.kind_for(type_, body)[0] == kind


def test_atomic_writes_nothing_when_one_file_is_broken():
    report = run_failing("import_memories", FIXTURES / "markdown-dir-broken", "--scope", "agent:main", "--atomic")
    assert (report["imported"], len(report["errors"]), Memory.objects.count()) == (0, 1, 0)


def test_two_files_of_one_id_are_an_error_on_the_second(tmp_path):
    body = "---\nname: Editor\ntype: feedback\nmemoryui:\n  id: 6c1e2a8b-1f0a-4c55-9a51-8f8f5a1d2b3c\n---\n"
    (tmp_path / "a.md").write_text(body + "Use vim keybindings.\n")
    (tmp_path / "b.md").write_text(body + "Use emacs keybindings.\n")
    report = run_failing("import_memories", tmp_path, "--scope", "agent:main")
    assert report["imported"] == 1
    assert report["errors"][0]["file"] == "b.md" and "already used in a.md" in report["errors"][0]["error"]
