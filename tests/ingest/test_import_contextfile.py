"""import_memories --format context-file: the bullets of the "added memories" sections only."""

from __future__ import annotations

import pytest

from ingest.memoryfiles import contextfile
from memoryui.models import Memory

from .formats import FIXTURES, counts, run, run_failing, store_state

pytestmark = pytest.mark.django_db


def test_gemini_added_memories_become_remember_memories():
    report = run("import_memories", FIXTURES / "GEMINI.md", "--scope", "user:42")
    assert (report["imported"], report["errors"], report["format"]) == (4, [], "context-file")
    assert counts("kind") == {"remember": 4}
    # an explicit remember is working; one that states an entity (a phone number) is core
    assert counts("tier") == {"working": 3, "core": 1}
    phone = Memory.objects.get(tier="core")
    assert (phone.text, phone.entity_key) == ("My phone number is 186 0000 1234.", "phone:18600001234")
    assert phone.metadata["origin"] == {
        "format": "context-file",
        "file": "GEMINI.md",
        "section": "Gemini Added Memories",
    }


def test_text_outside_the_memory_sections_is_not_imported():
    run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main")
    texts = set(Memory.objects.values_list("text", flat=True))
    assert texts == {
        "The staging database is reset every Sunday at 02:00 UTC; do not keep test data there.",
        "Alice Wang (alice@example.com) approves every schema migration.",
        "Use pnpm, not npm, for the dashboard in `web/`.",
    }


def test_a_continuation_line_belongs_to_its_bullet():
    run("import_memories", FIXTURES / "GEMINI.md", "--scope", "user:42")
    assert Memory.objects.filter(
        text="The project I'm currently working on is called ops-bot; its deploy target is the k8s cluster prod-sh-2."
    ).exists()


def test_a_repeated_bullet_is_skipped_with_its_reason():
    report = run("import_memories", FIXTURES / "QWEN.md", "--scope", "agent:qwen")
    assert (report["imported"], report["skipped"]) == (3, 1)
    assert report["skipped_files"] == [{"file": "QWEN.md", "line": 8, "reason": "the same bullet as line 6"}]
    assert counts("kind") == {"remember": 3}
    assert not Memory.objects.filter(text__contains="接口返回").exists()  # a later section, not memories


def test_importing_again_changes_nothing_and_dry_run_writes_nothing():
    preview = run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main", "--dry-run")
    assert ([r["action"] for r in preview["preview"]], Memory.objects.count()) == (["new"] * 3, 0)
    assert [r["line"] for r in preview["preview"]] == [17, 18, 19]
    run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main")
    before = store_state()
    again = run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main")
    assert (again["imported"], again["skipped"]) == (0, 3)
    assert store_state() == before


def test_the_same_file_in_another_scope_is_a_copy_there():
    run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main")
    run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:other")
    assert counts("scope") == {"agent:main": 3, "agent:other": 3}


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    bad = tmp_path / "GEMINI.md"
    bad.write_bytes(b"## Gemini Added Memories\n- caf\xe9\n")
    report = run_failing("import_memories", bad, "--scope", "agent:main")
    assert report["errors"] == [{"file": "GEMINI.md", "line": 1, "error": "not valid UTF-8 (byte 30)"}]


def test_a_bad_bullet_is_reported_by_file_and_line_while_the_rest_import(settings, tmp_path):
    settings.MEMORYUI_TEXT_MAX_LENGTH = 40
    path = tmp_path / "QWEN.md"
    path.write_text("## Qwen Added Memories\n- short one\n- " + "very long " * 10 + "\n- another short one\n")
    report = run_failing("import_memories", path, "--scope", "agent:main")
    assert report["imported"] == 2
    assert [(e["file"], e["line"]) for e in report["errors"]] == [("QWEN.md", 3)]
    assert "the limit is 40" in report["errors"][0]["error"]


def test_sections_end_at_the_next_heading_of_their_level_and_code_blocks_are_skipped():
    text = (
        "# Notes\n## Claude Added Memories\n- one\n### Details\n- two\n```\n- not a bullet\n```\n"
        "## Other\n- three\n## memories\n* four\n  continued\n\n- five\n"
    )
    assert [(line, bullet) for line, _, bullet in contextfile.bullets(text)] == [
        (3, "one"),
        (5, "two"),
        (12, "four continued"),
        (15, "five"),
    ]


def test_dedup_merges_a_bullet_into_the_memory_that_says_it_already(make_memory):
    existing = make_memory("Use pnpm, not npm, for the dashboard in `web/`.", kind="preference")
    preview = run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main", "--dedup", "--dry-run")
    assert [(r["action"], r.get("into")) for r in preview["preview"]] == [
        ("new", None),
        ("new", None),
        ("merged", str(existing.pk)),
    ]
    report = run("import_memories", FIXTURES / "CLAUDE.md", "--scope", "agent:main", "--dedup")
    assert (report["imported"], report["merged"]) == (2, 1)
    existing.refresh_from_db()
    assert existing.access_count == 1 and existing.events.filter(action="merged", actor="import").exists()
