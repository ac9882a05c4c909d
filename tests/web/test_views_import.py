"""The Import page: upload, dry-run preview, confirm; plain and htmx; editors only."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from ingest import jsonl
from memoryui.models import Memory, MemoryEvent
from tests.ingest.formats import FIXTURES, counts

pytestmark = pytest.mark.django_db

URL = reverse("memory_import")
HTMX = {"HX-Request": "true", "HX-Target": "import-panel", "HX-Current-URL": "http://testserver" + URL}


def upload(name: str, data: bytes | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data if data is not None else (FIXTURES / name).read_bytes())


def zipped_directory(name: str = "markdown-dir") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted((FIXTURES / name).iterdir()):
            archive.write(path, f"memory/{path.name}")
    return buffer.getvalue()


def test_the_page_shows_the_upload_form_and_the_list_links_to_it(erin_client):
    page = erin_client.get(URL)
    assert page.status_code == 200
    body = page.content.decode()
    assert 'enctype="multipart/form-data"' in body and 'name="file"' in body and "<h1>Import memories</h1>" in body
    assert f'href="{URL}"' in erin_client.get(reverse("memory_list")).content.decode()


def test_viewers_may_not_import(bob_client):
    assert bob_client.get(URL).status_code == 403
    response = bob_client.post(URL, {"file": upload("GEMINI.md"), "scope": "agent:main"})
    assert response.status_code == 403
    assert Memory.objects.count() == 0


def test_an_upload_shows_the_dry_run_and_writes_nothing(erin_client):
    response = erin_client.post(URL, {"file": upload("mem0-export.json")})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Would import 5 memories" in body and "(mem0)" in body
    assert body.count('<tr data-action="new">') == 5
    assert "Name is Alice Chen, lives in Shanghai" in body and "user:alice" in body
    assert 'name="confirmed" value="1"' in body and "Import 5 memories" in body
    assert (Memory.objects.count(), MemoryEvent.objects.count()) == (0, 0)


def test_confirming_imports_what_was_previewed_with_an_undo(erin_client):
    erin_client.post(URL, {"file": upload("GEMINI.md"), "scope": "user:42"})
    token = erin_client.session["pending_import"]["token"]
    response = erin_client.post(URL, {"token": token, "confirmed": "1"}, follow=True)
    assert response.redirect_chain[-1][0].startswith(reverse("memory_list"))
    body = response.content.decode()
    assert "Imported 4 memories" in body and "from GEMINI.md" in body and 'data-action="undo"' in body
    assert counts("scope") == {"user:42": 4}
    assert set(MemoryEvent.objects.values_list("actor", flat=True)) == {"user:erin"}
    assert "pending_import" not in erin_client.session


def test_a_stale_confirmation_imports_nothing(erin_client):
    erin_client.post(URL, {"file": upload("GEMINI.md"), "scope": "user:42"})
    response = erin_client.post(URL, {"token": "not-the-token", "confirmed": "1"}, follow=True)
    assert "Upload the file again" in response.content.decode()
    assert Memory.objects.count() == 0


def test_a_zip_of_a_memory_directory_previews_each_file_and_the_broken_one(erin_client):
    response = erin_client.post(
        URL, {"file": upload("memory.zip", zipped_directory("markdown-dir-broken")), "scope": "agent:main"}
    )
    body = response.content.decode()
    assert "(markdown-dir)" in body and "Would import 2 memories" in body
    assert "broken_front_matter.md line 4" in body and "not valid YAML" in body
    erin_client.post(URL, {"token": erin_client.session["pending_import"]["token"], "confirmed": "1"})
    assert Memory.objects.count() == 2


def test_the_preview_of_a_second_upload_says_unchanged_and_offers_nothing_to_write(erin_client):
    erin_client.post(URL, {"file": upload("memory.zip", zipped_directory()), "scope": "agent:main"})
    erin_client.post(URL, {"token": erin_client.session["pending_import"]["token"], "confirmed": "1"})
    body = erin_client.post(
        URL, {"file": upload("memory.zip", zipped_directory()), "scope": "agent:main"}
    ).content.decode()
    assert body.count('<tr data-action="unchanged">') == 8
    assert 'Skipped <span class="mono">MEMORY.md</span>' in body
    assert "data-import-nothing" in body and 'name="confirmed"' not in body


def test_problems_with_the_form_are_named_next_to_their_fields(erin_client):
    response = erin_client.post(URL, {"file": upload("notes.txt", b"hello"), "scope": "not a scope!"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "<b>Format</b>: cannot tell the format of notes.txt" in body
    assert "<b>Scope</b>: a scope id may hold" in body
    assert erin_client.post(URL, {}).status_code == 400


def test_htmx_gets_only_the_panel(erin_client):
    response = erin_client.post(URL, {"file": upload("QWEN.md"), "scope": "agent:qwen"}, headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "data-import-preview" in body and "Would import 3 memories" in body
    confirm = erin_client.post(
        URL, {"token": erin_client.session["pending_import"]["token"], "confirmed": "1"}, headers=HTMX
    )
    assert confirm["HX-Redirect"].startswith(reverse("memory_list"))
    assert counts("kind") == {"remember": 3}


def test_htmx_gets_the_form_with_its_errors_in_the_panel(erin_client):
    response = erin_client.post(URL, {"file": upload("GEMINI.md")}, headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "data-import-form" in body
    assert "<b>Scope</b>: a context file does not say whose memories they are" in body
    response = erin_client.post(URL, {"scope": "agent:main"}, headers=HTMX)
    assert "<html" not in response.content.decode() and "This field is required" in response.content.decode()


def test_a_memory_directory_without_a_scope_names_each_file_in_the_preview(erin_client):
    body = erin_client.post(URL, {"file": upload("memory.zip", zipped_directory())}).content.decode()
    assert body.count("no scope: choose the scope") == 8
    assert "data-import-nothing" in body and Memory.objects.count() == 0


def test_a_jsonl_upload_previews_by_line_and_imports_with_its_own_scopes(erin_client):
    body = erin_client.post(URL, {"file": upload("memories.jsonl")}).content.decode()
    assert "(jsonl)" in body and "Would import 4 memories" in body
    assert body.count("new id") == 2  # two lines carry no id: they get one when written
    assert '<td class="mono small">line 3</td>' in body
    erin_client.post(URL, {"token": erin_client.session["pending_import"]["token"], "confirmed": "1"})
    assert counts("tier") == {"core": 2, "working": 1, "peripheral": 1}


def test_an_upload_of_memories_of_another_scope_previews_and_imports_copies(erin_client, make_memory):
    original = make_memory("Deploys go out on Thursdays.", kind="fact", scope="agent:main")
    line = jsonl.memory_record(original)
    body = erin_client.post(
        URL, {"file": upload("mine.jsonl", (json.dumps(line) + "\n").encode()), "scope": "agent:copy"}
    ).content.decode()
    assert "Would import 1 memory" in body and "1 of them copies of memories of another scope" in body
    assert body.count("new id") == 1
    erin_client.post(URL, {"token": erin_client.session["pending_import"]["token"], "confirmed": "1"})
    copy = Memory.objects.get(scope="agent:copy")
    assert copy.pk != original.pk and copy.metadata["copied_from"] == {"id": str(original.pk), "scope": "agent:main"}
    assert Memory.objects.get(pk=original.pk).scope == "agent:main"
