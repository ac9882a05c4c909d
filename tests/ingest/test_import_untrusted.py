"""import_memories never crashes on a line and never moves a memory between scopes silently.

Lines that parse but cannot be stored (a lone surrogate, a NUL, nesting thousands of levels deep,
a date outside the calendar in UTC) are reported like any bad line; the rest are imported.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from ingest import jsonl
from ingest.management.commands.import_memories import Command as ImportCommand
from memoryui.models import Memory, MemoryEvent
from memoryui.untrusted import MAX_JSON_DEPTH

pytestmark = pytest.mark.django_db


def good(text: str = "The user prefers short answers.", **fields) -> str:
    return json.dumps({"scope": "agent:main", "kind": "preference", "text": text, **fields})


def with_metadata(raw: str) -> str:
    """A line whose metadata is `raw` JSON text, as json.dumps would never write it."""
    return good("odd metadata", metadata="@").replace('"@"', raw)


def deeply_nested(levels: int) -> str:
    return with_metadata('{"a": ' * levels + "1" + "}" * levels)


def import_file(path: Path, *options: str) -> tuple[dict, CommandError | None]:
    """Run import_memories --json; stdout must be exactly one JSON document."""
    out = io.StringIO()
    try:
        call_command("import_memories", str(path), *options, "--json", stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return json.loads(out.getvalue()), exc
    return json.loads(out.getvalue()), None


BAD_LINES = [
    (deeply_nested(5000), "$.metadata" + ".a" * (MAX_JSON_DEPTH - 1) + ": is nested more than 32 levels deep"),
    (deeply_nested(40), "$.metadata" + ".a" * (MAX_JSON_DEPTH - 1) + ": is nested more than 32 levels deep"),
    (good("bad \udfff end"), "$.text: holds a lone UTF-16 surrogate (U+DFFF) at character 4"),
    (good(metadata={"tags": ["ok", "\udfff"]}), "$.metadata.tags[1]: holds a lone UTF-16 surrogate (U+DFFF)"),
    (good(metadata={"\ud800": 1}), "$.metadata: has a key that holds a lone UTF-16 surrogate (U+D800)"),
    (good("nul \u0000 here"), "$.text: holds a NUL character at character 4"),
    (good(metadata={"origin": "a\u0000b"}), "$.metadata.origin: holds a NUL character"),
    (good(entity_key="phone:\u0000"), "$.entity_key: holds a NUL character"),
    (with_metadata('{"x": 1e400}'), "malformed JSON: the number 1e400 is too large"),
    (good(created_at="0001-01-01T00:00:00+14:00"), "created_at: '0001-01-01T00:00:00+14:00' is out of range"),
    (good(expires_at="9999-12-31T23:59:59-14:00"), "expires_at: '9999-12-31T23:59:59-14:00' is out of range"),
    (good(tombstoned_at="9999-12-31T23:59:59-14:00"), "tombstoned_at: '9999-12-31T23:59:59-14:00' is out of range"),
]


@pytest.mark.parametrize(
    ("bad", "message"), BAD_LINES, ids=["nested-5000", "nested-40", "surrogate-text", "surrogate-metadata",
    "surrogate-key", "nul-text", "nul-metadata", "nul-entity-key", "huge-float", "created-at-edge",
    "expires-at-edge", "tombstoned-at-edge"],
)  # fmt: skip
def test_a_line_that_cannot_be_stored_is_reported_and_the_good_lines_are_imported(tmp_path, bad, message):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([good("good one"), bad, good("good two")]) + "\n", encoding="utf-8")
    report, error = import_file(path)
    assert [e["line"] for e in report["errors"]] == [2]
    assert report["errors"][0]["error"].startswith(message)
    assert report["imported"] == 2 and error is not None
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["good one", "good two"]


def test_with_atomic_such_a_line_writes_nothing(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([good("good one"), deeply_nested(5000), good("nul \u0000")]) + "\n", encoding="utf-8")
    report, error = import_file(path, "--atomic")
    assert ([e["line"] for e in report["errors"]], report["imported"]) == ([2, 3], 0)
    assert "nothing was written" in str(error)
    assert not Memory.objects.exists()


def test_a_line_with_many_problems_names_the_first_three():
    line = good(metadata={"a": "\u0000", "b": "\u0000", "c": "\u0000", "d": "\u0000"})
    report = jsonl.import_lines([line])
    assert report.errors == [
        {
            "line": 1,
            "error": "$.metadata.a: holds a NUL character at character 0; $.metadata.b: holds a NUL character "
            "at character 0; $.metadata.c: holds a NUL character at character 0; (and more)",
        }
    ]


def test_the_command_exits_1_with_one_json_document_on_a_file_of_bad_lines(tmp_path):
    # --atomic: the bad lines are found before the database is written to
    path = tmp_path / "in.jsonl"
    lines = [good("good"), deeply_nested(5000), good("\udfff"), good(created_at="0001-01-01T00:00:00+14:00")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
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
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert ([e["line"] for e in report["errors"]], report["imported"]) == ([2, 3, 4], 0)
    assert "Traceback" not in result.stderr and "3 line(s) had errors; nothing was written" in result.stderr


# --- scope moves ---------------------------------------------------------------------------


def test_a_line_with_an_existing_id_in_another_scope_is_imported_there_as_a_copy(tmp_path, make_memory):
    memory = make_memory("The user runs 1000 RTX 4070s in an IDC.", kind="fact", scope="agent:main")
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(jsonl.memory_record(memory) | {"scope": "agent:test-w"}) + "\n", encoding="utf-8")
    report, error = import_file(path)
    assert (report["imported"], report["copied"], report["errors"], error) == (1, 1, [], None)
    copy = Memory.objects.get(scope="agent:test-w")
    assert copy.pk != memory.pk and copy.text == memory.text and copy.kind == "fact"
    assert copy.metadata["copied_from"] == {"id": str(memory.pk), "scope": "agent:main"}
    assert copy.events.get().action == "created"
    assert Memory.objects.get(pk=memory.pk).scope == "agent:main"
    assert not MemoryEvent.objects.filter(memory=memory, action="edited").exists()

    again, _ = import_file(path)
    assert (again["imported"], again["skipped"], again["copied"]) == (0, 1, 1), "the copy is found, not made twice"
    assert Memory.objects.count() == 2


def test_allow_move_moves_it_and_records_the_move_in_its_history(tmp_path, make_memory):
    memory = make_memory("The user runs 1000 RTX 4070s in an IDC.", kind="fact", scope="agent:main")
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(jsonl.memory_record(memory) | {"scope": "agent:test-w"}) + "\n", encoding="utf-8")
    report, error = import_file(path, "--allow-move")
    assert (report["updated"], report["errors"], error) == (1, [], None)
    assert Memory.objects.get(pk=memory.pk).scope == "agent:test-w"
    event = MemoryEvent.objects.get(memory=memory, action="edited")
    assert (event.before["scope"], event.after["scope"], event.actor) == ("agent:main", "agent:test-w", "import")
    assert "moved from agent:main to agent:test-w" in event.reason
    assert str(event.batch) == report["batch"]


def test_allow_move_also_lets_the_scope_option_move_a_memory(tmp_path, make_memory):
    memory = make_memory("mine", scope="agent:main")
    path = tmp_path / "in.jsonl"
    path.write_text(good("mine", id=str(memory.pk)) + "\n", encoding="utf-8")
    report, _ = import_file(path, "--scope", "agent:copy")
    assert (report["imported"], report["copied"]) == (1, 1) and Memory.objects.get(pk=memory.pk).scope == "agent:main"
    report, _ = import_file(path, "--scope", "agent:copy", "--allow-move")
    assert (report["updated"], report.get("copied", 0)) == (1, 0)
    assert Memory.objects.get(pk=memory.pk).scope == "agent:copy"


def test_the_same_scope_is_not_a_move(tmp_path):
    memory_id = str(uuid.uuid4())
    path = tmp_path / "in.jsonl"
    path.write_text(good("one", id=memory_id) + "\n", encoding="utf-8")
    assert import_file(path)[0]["imported"] == 1
    path.write_text(good("one, edited", id=memory_id, scope="main") + "\n", encoding="utf-8")  # normalized: agent:main
    report, error = import_file(path)
    assert (report["updated"], error) == (1, None)


def test_allow_move_is_in_the_help():
    parser = ImportCommand().create_parser("manage.py", "import_memories")
    assert "never moved to another scope unless --allow-move" in parser.description
    assert "move a memory whose id exists in another scope" in " ".join(parser.format_help().split())
