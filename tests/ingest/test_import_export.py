"""import_memories / export_memories: faithful restores, dedup, per-line errors, round trips."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError
from django.utils import timezone

from ingest import jsonl
from memoryui import rules
from memoryui.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db


def run(command: str, *args, stdin=None) -> dict:
    """Run a command with --json; the whole of stdout must be one JSON document."""
    out = io.StringIO()
    options = {"stdin": stdin} if stdin is not None else {}
    call_command(command, *args, "--json", stdout=out, stderr=io.StringIO(), **options)
    return json.loads(out.getvalue())


def run_failing(command: str, *args) -> tuple[dict, CommandError]:
    out = io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command(command, *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue()), excinfo.value


def write_lines(path: Path, *objects) -> Path:
    path.write_text(
        "".join((o if isinstance(o, str) else json.dumps(o, ensure_ascii=False)) + "\n" for o in objects),
        encoding="utf-8",
    )
    return path


def line(text: str = "The user prefers short answers.", **fields) -> dict:
    return {"scope": "agent:main", "kind": "preference", "text": text, **fields}


def wipe() -> None:
    MemoryEvent.objects.all().delete()
    Memory.objects.all().delete()


# --- round trip ----------------------------------------------------------------------------


def test_export_then_import_into_an_empty_database_exports_byte_identical_files(tmp_path, make_memory):
    make_memory("用户的手机号是 186 0000 1234", kind="entity", entity_key="phone:18600001234")
    make_memory("東京の天気を毎朝教えて", scope="user:42", kind="remember", confidence=0.9)
    make_memory('<b>Bold</b> & <script>alert("x")</script>', kind="fact", metadata={"tags": ["html"], "z": {"b": 1}})
    make_memory("A leftover from the old store.", kind="note", confidence=0.2)  # peripheral: expires_at set
    pinned = make_memory("Always answer in English.", scope="global")
    pinned.pin(actor="test")
    gone = make_memory("Old phone 139 0000 0000", kind="entity", entity_key="phone:13900000000")
    gone.tombstone("superseded by the new number", actor="test")
    make_memory("The user prefers short answers.")  # merged into the first preference: access_count 1
    make_memory("The user prefers short answers.")

    first = tmp_path / "first.jsonl"
    assert run("export_memories", str(first), "--include-tombstoned") == {"exported": 7}
    wipe()
    report = run("import_memories", str(first))
    assert (report["imported"], report["errors"]) == (7, [])
    second = tmp_path / "second.jsonl"
    run("export_memories", str(second), "--include-tombstoned")

    assert second.read_bytes() == first.read_bytes()
    records = [json.loads(raw) for raw in first.read_text(encoding="utf-8").splitlines()]
    assert all(set(record) == set(jsonl.FIELDS) for record in records)
    assert "用户的手机号是 186 0000 1234" in first.read_text(encoding="utf-8")  # UTF-8, not \u escapes
    assert {r["status"] for r in records} == {"active", "tombstoned"}
    assert any(r["access_count"] == 1 and r["accessed_at"] for r in records)
    assert any(r["expires_at"] for r in records) and any(r["expires_at"] is None for r in records)


def test_export_is_ordered_by_creation_time_with_utc_microsecond_timestamps(tmp_path, make_memory):
    later = make_memory("second")
    earlier = make_memory("first")
    Memory.objects.filter(pk=earlier.pk).update(created_at=later.created_at - timedelta(hours=1))
    path = tmp_path / "out.jsonl"
    run("export_memories", str(path))
    records = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in records] == ["first", "second"]
    assert records[0]["created_at"].endswith("+00:00") and len(records[0]["created_at"]) == 32


def test_export_leaves_out_tombstoned_memories_and_other_scopes_unless_asked(tmp_path, make_memory):
    make_memory("kept")
    make_memory("elsewhere", scope="agent:other")
    make_memory("gone").tombstone("wrong", actor="test")
    path = tmp_path / "out.jsonl"
    assert run("export_memories", str(path), "--scope", "main") == {"exported": 1}
    assert json.loads(path.read_text(encoding="utf-8"))["text"] == "kept"
    assert run("export_memories", str(path), "--include-tombstoned") == {"exported": 3}


def test_export_to_stdout_writes_the_lines_and_refuses_json(make_memory):
    make_memory("one line")
    out = io.StringIO()
    call_command("export_memories", "-", stdout=out)
    assert json.loads(out.getvalue())["text"] == "one line"
    report, error = run_failing("export_memories", "-")
    assert "--json needs a file PATH" in report["error"]
    assert str(error) == report["error"]


def test_a_failed_export_leaves_the_previous_file_untouched(tmp_path, make_memory, monkeypatch):
    make_memory("one")
    path = tmp_path / "out.jsonl"
    path.write_text("previous export\n")

    def broken(**kwargs):
        yield "{}\n"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl, "export_lines", broken)
    report, _ = run_failing("export_memories", str(path))
    assert "No space left on device" in report["error"]
    assert path.read_text() == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


# --- faithful restore, dedup, idempotence --------------------------------------------------


def test_a_restore_keeps_duplicates_as_separate_memories(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", line("在吗?", kind="note"), line("在吗？", kind="note"))
    report = run("import_memories", str(path))
    assert (report["imported"], report["merged"]) == (2, 0)
    assert Memory.objects.filter(content_hash=rules.content_hash("在吗?")).count() == 2


def test_dedup_merges_duplicates_into_the_existing_memory(tmp_path, make_memory):
    existing = make_memory("The user prefers short answers.")
    path = write_lines(
        tmp_path / "in.jsonl",
        line("the user prefers   SHORT answers."),
        line("A new fact.", kind="fact"),
        line("A new fact.", kind="fact"),
        line("Phone 186", kind="entity", entity_key="phone:186"),
        line("Phone 186, mobile", kind="entity", entity_key="phone:186"),
    )
    report = run("import_memories", str(path), "--dedup")
    assert (report["imported"], report["merged"], report["errors"]) == (2, 3, [])
    existing.refresh_from_db()
    assert existing.access_count == 1
    assert Memory.objects.count() == 3
    assert MemoryEvent.objects.filter(action="merged", actor="import").count() == 3


def test_reimporting_the_same_file_skips_every_line(tmp_path):
    ids = [str(uuid.uuid4()) for _ in range(3)]
    path = write_lines(tmp_path / "in.jsonl", *(line(f"memory {n}", id=ids[n]) for n in range(3)))
    assert run("import_memories", str(path))["imported"] == 3
    again = run("import_memories", str(path))
    assert (again["imported"], again["updated"], again["skipped"], again["batch"]) == (0, 0, 3, None)
    assert MemoryEvent.objects.count() == 3


def test_a_known_id_with_new_content_is_updated_in_place_with_an_edited_event(tmp_path):
    memory_id = str(uuid.uuid4())
    run("import_memories", str(write_lines(tmp_path / "a.jsonl", line("old text", id=memory_id))))
    report = run("import_memories", str(write_lines(tmp_path / "b.jsonl", line("new text", id=memory_id))))
    assert (report["imported"], report["updated"], report["skipped"]) == (0, 1, 0)
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.text, memory.content_hash) == ("new text", rules.content_hash("new text"))
    event = memory.events.get(action="edited")
    assert (event.actor, event.before["text"], event.after["text"]) == ("import", "old text", "new text")
    assert str(event.batch) == report["batch"]


def test_scope_option_sets_every_scope_and_normalizes_a_bare_agent_id(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", line("one", scope="user:7"), {"kind": "fact", "text": "two"})
    assert run("import_memories", str(path), "--scope", "main")["imported"] == 2
    assert set(Memory.objects.values_list("scope", flat=True)) == {"agent:main"}


def test_scope_option_copies_an_existing_memory_into_another_scope_and_does_not_move_it(tmp_path, make_memory):
    memory = make_memory("mine", scope="agent:main")
    path = write_lines(tmp_path / "in.jsonl", line("mine", id=str(memory.pk)))
    report = run("import_memories", str(path), "--scope", "agent:copy")
    assert (report["imported"], report["copied"], report["errors"]) == (1, 1, [])
    assert Memory.objects.get(pk=memory.pk).scope == "agent:main"
    assert Memory.objects.get(scope="agent:copy").metadata["copied_from"]["id"] == str(memory.pk)


def test_every_imported_memory_has_a_created_event_from_the_import_batch(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", line("one"), line("two", kind="fact"))
    report = run("import_memories", str(path))
    events = MemoryEvent.objects.filter(action="created")
    assert events.count() == 2
    assert {(e.actor, str(e.batch)) for e in events} == {("import", report["batch"])}
    assert {e.after["text"] for e in events} == {"one", "two"}


def test_missing_tier_importance_pinned_and_source_are_derived_like_the_write_path(tmp_path):
    path = write_lines(
        tmp_path / "in.jsonl",
        line("Phone 186", kind="entity", entity_key="phone:186", confidence=0.9),
        line("leftover", kind="note"),
        line("explicit", kind="note", tier="working", importance=0.5, pinned=True, source="user"),
    )
    run("import_memories", str(path))
    entity, note, explicit = (Memory.objects.get(text=t) for t in ("Phone 186", "leftover", "explicit"))
    assert (entity.tier, entity.pinned, entity.source) == ("core", True, "import")
    assert entity.importance == rules.place_memory("entity", 0.9).importance
    assert note.tier == "peripheral" and note.expires_at > timezone.now()
    assert (explicit.tier, explicit.importance, explicit.pinned, explicit.source) == ("working", 0.5, True, "user")


def test_import_reads_standard_input_when_the_path_is_a_dash():
    stdin = io.BytesIO((json.dumps(line("from stdin")) + "\n\n").encode())
    assert run("import_memories", "-", stdin=stdin)["imported"] == 1
    assert Memory.objects.get().text == "from stdin"


def test_two_thousand_lines_import_in_bulk(tmp_path, django_assert_max_num_queries):
    path = write_lines(tmp_path / "in.jsonl", *(line(f"memory number {n}", kind="fact") for n in range(2000)))
    # A handful of statements per chunk of 1000 (the outbox upsert is split at SQLite's parameter limit).
    with django_assert_max_num_queries(24):
        report = jsonl.import_lines(path.read_bytes().splitlines(keepends=True))
    assert report.imported == 2000
    assert MemoryEvent.objects.filter(batch=report.batch).count() == 2000


# --- errors --------------------------------------------------------------------------------

BAD_LINES = [
    ("{not json", "malformed JSON"),
    ("[1, 2]", "not a JSON object (got an array)"),
    (line(colour="blue"), "colour: is not a memory field"),
    (line(kind="bogus"), "kind: 'bogus' is not one of: entity, preference"),
    (line(tier="hot"), "tier: 'hot' is not one of"),
    (line(status="deleted"), "status: 'deleted' is not one of"),
    (line(source="robot"), "source: 'robot' is not one of"),
    (line(importance=1.5), "importance: must be between 0 and 1"),
    (line(confidence=-0.1), "confidence: must be between 0 and 1"),
    (line("   "), "text: must not be empty"),
    (
        line("x" * (settings.MEMORYUI_TEXT_MAX_LENGTH + 1)),
        f"text: is {settings.MEMORYUI_TEXT_MAX_LENGTH + 1} characters",
    ),
    (line(id="not-a-uuid"), "id: 'not-a-uuid' is not a UUID"),
    (line(created_at="yesterday"), "created_at: 'yesterday' is not an ISO 8601 date-time"),
    (line(status="tombstoned"), "tombstone_reason: a tombstoned memory needs a reason"),
    (line(access_count=-1), "access_count: must be a whole number"),
    (line(access_count=2**40), "access_count: must be a whole number from 0 to 2147483647"),
    (line(importance=10**400), "importance: must be a number between 0 and 1"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES, ids=[message.split(":")[0] for _, message in BAD_LINES])
def test_a_bad_line_is_reported_with_its_number_and_the_good_lines_are_imported(tmp_path, bad, message):
    path = write_lines(tmp_path / "in.jsonl", line("good one"), bad, line("good two"))
    report, error = run_failing("import_memories", str(path))
    assert len(report["errors"]) == 1
    assert report["errors"][0]["line"] == 2
    assert message in report["errors"][0]["error"]
    assert report["imported"] == 2
    assert "1 line(s) had errors" in str(error)
    assert not Memory.objects.filter(text__startswith="x").exists()


def test_an_id_used_twice_in_the_file_is_an_error_on_the_second_line(tmp_path):
    same = str(uuid.uuid4())
    path = write_lines(tmp_path / "in.jsonl", line("one", id=same), "", line("two", id=same))
    report, _ = run_failing("import_memories", str(path))
    assert report["errors"] == [{"line": 3, "error": f"id: {same} is already used on line 1"}]
    assert Memory.objects.get().text == "one"


def test_an_active_entity_key_already_held_in_the_scope_is_an_error(tmp_path, make_memory):
    holder = make_memory("Phone 186", kind="entity", entity_key="phone:186")
    path = write_lines(
        tmp_path / "in.jsonl",
        line("Phone 186 again", kind="entity", entity_key="phone:186"),
        line("Phone 139", kind="entity", entity_key="phone:139"),
        line("Phone 139 again", kind="entity", entity_key="PHONE:139"),
        line("Phone 139 elsewhere", kind="entity", entity_key="phone:139", scope="agent:other"),
        line("Phone 139 old", kind="entity", entity_key="phone:139", status="tombstoned", tombstone_reason="old"),
    )
    report, _ = run_failing("import_memories", str(path))
    assert report["errors"] == [
        {"line": 1, "error": f"entity_key: phone:186 is already used by active memory {holder.pk} in agent:main"},
        {"line": 3, "error": "entity_key: phone:139 is already used on line 2 in agent:main"},
    ]
    assert report["imported"] == 3


def test_an_atomic_import_with_an_error_writes_nothing(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", line("good"), line(kind="bogus"), line("also good"))
    report, error = run_failing("import_memories", str(path), "--atomic")
    assert (report["imported"], report["batch"], [e["line"] for e in report["errors"]]) == (0, None, [2])
    assert "nothing was written" in str(error)
    assert not Memory.objects.exists() and not MemoryEvent.objects.exists()


def test_an_atomic_import_rolls_back_when_the_database_rejects_a_line(tmp_path, monkeypatch):
    path = write_lines(tmp_path / "in.jsonl", *(line(f"memory {n}") for n in range(3)))
    real_insert = jsonl.insert_memories

    def refuse_memory_2(memories, **kwargs):
        if any(memory.text == "memory 2" for memory in memories):
            raise IntegrityError("simulated conflict")
        return real_insert(memories, **kwargs)

    monkeypatch.setattr(jsonl, "insert_memories", refuse_memory_2)
    report = jsonl.import_lines(path.read_bytes().splitlines(), atomic=True)
    assert report.imported == 0 and report.errors[0]["line"] == 3
    assert not Memory.objects.exists()
    non_atomic = jsonl.import_lines(path.read_bytes().splitlines())
    assert non_atomic.imported == 2 and [e["line"] for e in non_atomic.errors] == [3]
    assert Memory.objects.count() == 2


def test_an_unreadable_path_is_a_command_error_with_a_json_report(tmp_path):
    report, error = run_failing("import_memories", str(tmp_path / "missing.jsonl"))
    assert "cannot read" in report["error"] and "No such file" in str(error)


def test_the_command_exits_1_and_still_prints_one_json_document(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", "{broken")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"MEMORYUI_DATA_DIR": str(tmp_path / "data")}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=Path(settings.BASE_DIR), env=env, check=True)
    result = subprocess.run(
        [sys.executable, "manage.py", "import_memories", str(path), "--atomic", "--json"],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"][0]["line"] == 1
    assert "CommandError" in result.stderr
