"""Fields of another tool's memory that memoryui has no field for are kept in `metadata.origin`
and written back by an export: a markdown memory file's other front matter keys, a mem0 item's
other fields. A mem0 document's graph relations, which are no memories, are named as passed over."""

from __future__ import annotations

import json

import pytest
import yaml

from ingest.memoryfiles import markdown
from memoryui.models import Memory

from .formats import run

pytestmark = pytest.mark.django_db

MEMORY_FILE = """---
name: Deploy on Fridays
description: The team deploys on Fridays only
type: project
originSessionId: 5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60
related: [release_checklist.md, freeze.md]
---

The team deploys on Fridays only.
"""
MEM0_ITEM = {
    "id": "8b2e6d14-7a0c-4f3b-b5e9-2c1a9d8f6e30",
    "memory": "Lives in Shanghai",
    "user_id": "alice",
    "immutable": True,
    "structured_attributes": {"day": 2, "month": 10, "year": 2026},
    "relations": [{"source": "alice", "relationship": "lives_in", "target": "shanghai"}],
}


def front_matter(text: str) -> dict:
    return yaml.safe_load(markdown.split_front_matter(text)[0])


def test_markdown_front_matter_keys_we_do_not_read_are_kept_and_written_back(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "deploy_fridays.md").write_text(MEMORY_FILE)
    run("import_memories", tmp_path / "memory", "--scope", "agent:main")
    memory = Memory.objects.get()

    run("export_memories", tmp_path / "out", "--format", "markdown-dir", "--scope", "agent:main")
    exported = front_matter(next(p for p in (tmp_path / "out").iterdir() if p.name != "MEMORY.md").read_text())

    assert memory.metadata["origin"]["front_matter"] == {
        "originSessionId": "5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60",
        "related": ["release_checklist.md", "freeze.md"],
    }
    assert exported["originSessionId"] == "5f0c2d1e-8a41-4c6b-9f3e-2b7d9a1c4e60"
    assert exported["related"] == ["release_checklist.md", "freeze.md"]


def test_mem0_fields_we_do_not_read_are_kept_and_written_back(tmp_path):
    (tmp_path / "mem0.json").write_text(json.dumps({"results": [MEM0_ITEM]}))
    run("import_memories", tmp_path / "mem0.json", "--format", "mem0")

    run("export_memories", tmp_path / "out.json", "--format", "mem0", "--scope", "user:alice")
    item = json.loads((tmp_path / "out.json").read_text())["results"][0]

    assert Memory.objects.get().metadata["origin"]["fields"] == {
        key: MEM0_ITEM[key] for key in ("immutable", "structured_attributes", "relations")
    }
    assert {key: item[key] for key in ("id", "immutable", "structured_attributes", "relations")} == {
        key: MEM0_ITEM[key] for key in ("id", "immutable", "structured_attributes", "relations")
    }


def test_a_mem0_documents_graph_relations_are_named_as_passed_over(tmp_path):
    relations = [{"source": "alice", "relationship": "lives_in", "target": "shanghai"}]
    (tmp_path / "mem0.json").write_text(json.dumps({"results": [MEM0_ITEM], "relations": relations}))

    report = run("import_memories", tmp_path / "mem0.json", "--format", "mem0")

    assert report["imported"] == 1
    reason = "relations: 1 graph relation(s) of mem0's graph store are not memories"
    assert report["skipped_files"] == [{"file": "mem0.json", "line": 1, "reason": reason}]
