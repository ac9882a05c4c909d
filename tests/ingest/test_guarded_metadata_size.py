"""A memory's metadata is at most 64 KiB (rules.MAX_METADATA_BYTES, as compact UTF-8 JSON): it goes
out with the memory in every list, recall and export. Every way in refuses more naming
`metadata` — the API's create and update, the dashboard's forms, every import format (the line or
file named, nothing half-written) — and the schema says so.

Who is who: alice (a superuser) uses the API and the dashboard's forms.
"""

from __future__ import annotations

import io
import json

import pytest
from django.test import Client

from ingest import jsonl
from ingest.memoryfiles import SourceFile
from ingest.memoryfiles.importing import import_files
from memoryui import rules
from memoryui.models import Memory, MemoryEvent
from web.forms import MemoryForm

pytestmark = pytest.mark.django_db

LIMIT = rules.MAX_METADATA_BYTES
MEMORY = {"scope": "agent:main", "kind": "fact", "text": "The staging database is db-stg-3."}


def metadata_of(size: int) -> dict:
    """Metadata of exactly `size` bytes as compact JSON (`{"notes":"xxx…"}`)."""
    return {"notes": "x" * (size - len('{"notes":""}'))}


@pytest.fixture
def api(alice) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def refused_on_metadata(response) -> str:
    assert response.status_code == 400, response.content
    details = response.json()["error"]["details"]
    assert list(details) == ["metadata"]
    return details["metadata"][0]


def test_the_limit_is_64_kib_of_compact_json():
    assert LIMIT == 64 * 1024
    assert rules.metadata_size(metadata_of(LIMIT)) == LIMIT
    assert rules.metadata_size({"k": "é"}) == len('{"k":"é"}'.encode())


def test_metadata_of_the_limit_is_accepted_and_a_byte_more_refused_on_create(api):
    too_big = refused_on_metadata(
        api.post("/api/memories/", {**MEMORY, "metadata": metadata_of(LIMIT + 1)}, "application/json")
    )
    assert too_big.startswith(f"is {LIMIT + 1:,} bytes as JSON; at most {LIMIT:,} (64 KiB)")
    assert not Memory.objects.exists() and not MemoryEvent.objects.exists()

    response = api.post("/api/memories/", {**MEMORY, "metadata": metadata_of(LIMIT)}, "application/json")
    assert response.status_code == 201 and rules.metadata_size(response.json()["metadata"]) == LIMIT


def test_three_megabytes_of_metadata_are_refused_on_update(api, make_memory):
    memory = make_memory(metadata={"k": "v"})

    for method in (api.patch, api.put):
        body = {**MEMORY, "metadata": metadata_of(3 * 1024 * 1024)}
        refused_on_metadata(method(f"/api/memories/{memory.pk}/", body, "application/json"))

    memory.refresh_from_db()
    assert memory.metadata == {"k": "v"} and memory.events.count() == 1


def test_the_dashboards_forms_refuse_it_on_the_metadata_field(api, make_memory):
    big = json.dumps(metadata_of(LIMIT + 1))
    create = api.post("/memories/new/", {**MEMORY, "source": "manual", "metadata": big})
    assert create.status_code == 400 and "bytes as JSON; at most 65,536 (64 KiB)" in create.content.decode()
    assert not Memory.objects.exists()

    memory = make_memory(metadata={"k": "v"})
    edit = api.post(f"/memories/{memory.pk}/edit/", {**MemoryForm.initial_from(memory), "metadata": big})
    assert edit.status_code == 400 and "at most 65,536" in edit.content.decode()
    memory.refresh_from_db()
    assert memory.metadata == {"k": "v"}


def test_a_jsonl_import_names_the_line_and_imports_the_rest_or_with_atomic_nothing():
    lines = [
        json.dumps({**MEMORY, "text": "First fact.", "metadata": {"k": "v"}}),
        json.dumps({**MEMORY, "text": "Second fact.", "metadata": metadata_of(3 * 1024 * 1024)}),
        json.dumps({**MEMORY, "text": "Third fact."}),
    ]
    data = ("\n".join(lines) + "\n").encode()

    atomic = jsonl.import_lines(io.BytesIO(data), atomic=True)
    assert [error["line"] for error in atomic.errors] == [2] and not Memory.objects.exists()

    report = jsonl.import_lines(io.BytesIO(data))
    (error,) = report.errors
    assert error["line"] == 2 and error["error"].startswith("metadata: is 3,145,728 bytes as JSON; at most 65,536")
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["First fact.", "Third fact."]


def test_a_mem0_import_names_the_item_and_a_markdown_import_the_file():
    mem0 = {
        "results": [
            {"id": "m-1", "memory": "Name is Alice Chen.", "user_id": "alice"},
            {"id": "m-2", "memory": "Lives in Shanghai.", "user_id": "alice", "metadata": metadata_of(LIMIT)},
        ]
    }
    report = import_files([SourceFile("mem0.json", json.dumps(mem0).encode())], format="mem0")
    (error,) = report.errors
    assert (error["file"], error["line"]) == ("mem0.json", 2) and "metadata: is " in error["error"]
    assert list(Memory.objects.values_list("text", flat=True)) == ["Name is Alice Chen."]

    front = "name: deploys\ntype: project\nnotes: " + "y" * LIMIT
    markdown = SourceFile("deploys.md", f"---\n{front}\n---\n\nThe user deploys on Fridays.\n".encode())
    report = import_files([markdown], format="markdown-dir", scope="agent:main")
    (error,) = report.errors
    assert error["file"] == "deploys.md" and "metadata: is " in error["error"]
    assert Memory.objects.count() == 1


def test_the_schema_states_the_limit_on_memory_metadata(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for component in ("MemoryInputRequest", "PatchedMemoryInputRequest"):
        described = schema["components"]["schemas"][component]["properties"]["metadata"]["description"]
        assert "65,536 bytes" in described and "64 KiB" in described
