"""import_memories --format mem0: a get_all export, scoped by user, then agent, then run."""

from __future__ import annotations

import json

import pytest

from ingest.memoryfiles import stable_id
from memoryui.models import Memory

from .formats import FIXTURES, counts, run, run_failing, store_state

pytestmark = pytest.mark.django_db

EXPORT = FIXTURES / "mem0-export.json"


def test_a_mem0_export_imports_each_memory_into_its_owners_scope():
    report = run("import_memories", EXPORT, "--format", "mem0")
    assert (report["imported"], report["errors"], report["format"]) == (5, [], "mem0")
    # user_id wins over agent_id (the third memory has both); agent_id alone gives agent:<id>
    assert counts("scope") == {"user:alice": 4, "agent:scheduler": 1}
    assert counts("kind") == {"preference": 2, "entity": 1, "fact": 2}
    assert counts("tier") == {"core": 1, "working": 4}


def test_mem0_ids_hashes_and_times_are_kept():
    run("import_memories", EXPORT)
    memory = Memory.objects.get(pk=stable_id("mem0", "user:alice", "8b2e6d14-7a0c-4f3b-b5e9-2c1a9d8f6e30"))
    assert memory.metadata["origin"] == {
        "format": "mem0",
        "id": "8b2e6d14-7a0c-4f3b-b5e9-2c1a9d8f6e30",
        "hash": "9e1b7d3f5a2c8e4b6d0f1a3c5e7b9d2f",
        "user_id": "alice",
        "categories": ["personal_details"],
    }
    assert memory.created_at.isoformat() == "2026-10-02T16:15:01.448210+00:00"
    assert memory.updated_at.isoformat() == "2026-10-06T01:40:12.003311+00:00"
    naive = Memory.objects.get(scope="agent:scheduler")  # mem0 writes naive UTC times
    assert naive.created_at.isoformat() == "2026-10-04T16:20:41.009876+00:00"
    assert naive.metadata["origin"]["metadata"] == {"topic": "reports"}


def test_scope_option_overrides_the_owner():
    report = run("import_memories", EXPORT, "--scope", "agent:main")
    assert report["imported"] == 5
    assert counts("scope") == {"agent:main": 5}


def test_importing_again_changes_nothing_and_dry_run_writes_nothing():
    preview = run("import_memories", EXPORT, "--dry-run")
    assert (preview["imported"], Memory.objects.count()) == (5, 0)
    assert [row["line"] for row in preview["preview"]] == [1, 2, 3, 4, 5]
    run("import_memories", EXPORT)
    before = store_state()
    again = run("import_memories", EXPORT)
    assert (again["imported"], again["updated"], again["skipped"]) == (0, 0, 5)
    assert store_state() == before


def test_an_edited_memory_in_mem0_updates_ours(tmp_path):
    run("import_memories", EXPORT)
    data = json.loads(EXPORT.read_text())
    data["results"][0]["memory"] = "Is a vegan and allergic to peanuts"
    changed = tmp_path / "export.json"
    changed.write_text(json.dumps(data))
    report = run("import_memories", changed)
    assert (report["imported"], report["updated"]) == (0, 1)
    assert Memory.objects.filter(text="Is a vegan and allergic to peanuts").count() == 1


def test_a_bad_item_is_named_while_the_rest_import(tmp_path):
    data = json.loads(EXPORT.read_text())
    data["results"][1].pop("user_id")
    data["results"][3]["memory"] = ""
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(data["results"]))  # a bare list is read as well
    report = run_failing("import_memories", path, "--format", "mem0")
    assert report["imported"] == 3
    assert [(e["file"], e["line"]) for e in report["errors"]] == [("mem0.json", 2), ("mem0.json", 4)]
    assert "no user_id, agent_id or run_id" in report["errors"][0]["error"]
    assert report["errors"][1]["error"].startswith("text:")


def test_a_file_that_is_not_a_mem0_export_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"messages": []}')
    report = run_failing("import_memories", path, "--format", "mem0")
    assert report["errors"][0]["error"].startswith("not a mem0 export")
    assert "not a mem0 export" in run_failing("import_memories", path)["error"]  # nor detected as one


def test_an_item_without_text_or_not_an_object_is_named_while_the_rest_import(tmp_path):
    data = json.loads(EXPORT.read_text())
    data["results"][0].pop("memory")
    data["results"].append("not a memory")
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(data))
    report = run_failing("import_memories", path)
    assert report["imported"] == 4
    assert [(e["line"], e["error"].split(":")[0]) for e in report["errors"]] == [(1, "text"), (6, "results[5]")]
