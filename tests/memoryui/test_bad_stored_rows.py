"""Rows written before the input checks existed: a JSON value holding a lone surrogate never breaks a
page, the API or an export; it is shown and exported escaped (the text "\\udfff").

PostgreSQL's jsonb refuses lone surrogates (and no text column of either backend holds one), so such
rows exist only in SQLite JSON columns: on PostgreSQL the tests check that the database refuses them.
"""

from __future__ import annotations

import io
import json

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.models import JSONField
from rest_framework.test import APIClient

from api.renderers import JSONRenderer
from ingest import jsonl
from ingest.ingestion import ingest
from memoryui.models import Memory, MemoryEvent, Message, TaskRun, Transcript
from memoryui.models.fields import StoredJSONDecoder
from recall.models import RecallTrace

pytestmark = pytest.mark.django_db

LONE = "bad \udfff end"  # what json.loads gives back for the stored "bad \\udfff end"
ESCAPED = "bad \\udfff end"  # how it is shown and exported: the text of the escape


def store(queryset, **values) -> None:
    """Write values no check lets in any more, as an old row holds them (bypassing validation)."""
    if connection.vendor == "postgresql":
        with pytest.raises(DatabaseError), transaction.atomic():
            queryset.update(**values)
        pytest.skip("PostgreSQL's jsonb refuses a lone surrogate: such a row cannot exist there")
    queryset.update(**values)


@pytest.fixture
def bad_memory(make_memory) -> Memory:
    memory = make_memory("The user runs 1000 RTX 4070s in an IDC.", kind="fact")
    store(Memory.objects.filter(pk=memory.pk), metadata={"tags": [LONE], "note": LONE})
    store(MemoryEvent.objects.filter(memory=memory), before={"text": LONE}, after={"metadata": {"x": [LONE]}})
    return memory


@pytest.fixture
def bad_transcript() -> Transcript:
    transcript = ingest({"scope": "agent:main", "messages": [{"role": "user", "content": "hello there"}]}).transcript
    store(Transcript.objects.filter(pk=transcript.pk), metadata={"origin": LONE})
    store(Message.objects.filter(transcript=transcript), tool_calls=[{"id": "c1", "name": LONE, "arguments": "{}"}])
    return transcript


def api(agent_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    return client


def test_the_decoder_turns_lone_surrogates_into_their_escaped_text_and_keeps_real_pairs():
    raw = json.dumps({"a": ["\udfff", {"\ud800key": "x\ud83d"}], "emoji": "😀", "n": 1})
    decoded = json.loads(raw, cls=StoredJSONDecoder)
    assert decoded == {"a": ["\\udfff", {"\\ud800key": "x\\ud83d"}], "emoji": "😀", "n": 1}
    assert json.loads('"\\udfff"', cls=StoredJSONDecoder) == "\\udfff"


def test_every_json_field_of_the_store_and_recall_decodes_with_it():
    fields = [
        f"{model.__name__}.{field.name}"
        for app in ("memoryui", "recall")
        for model in apps.get_app_config(app).get_models()
        for field in model._meta.get_fields()
        if isinstance(field, JSONField) and field.decoder is not StoredJSONDecoder
    ]
    assert fields == []


def test_the_renderer_falls_back_to_ascii_escaped_json_on_a_lone_surrogate():
    body = JSONRenderer().render({"text": LONE, "name": "東京"})
    assert body.decode("ascii")  # valid ASCII, so valid UTF-8
    assert json.loads(body) == {"text": LONE, "name": "東京"}
    assert JSONRenderer().render({"name": "東京"}).decode("utf-8") == '{"name":"東京"}'  # UTF-8 otherwise


def test_the_memory_list_and_detail_api_show_the_surrogate_escaped(bad_memory, agent_token):
    client = api(agent_token)
    listing = client.get("/api/memories/")
    assert listing.status_code == 200
    assert listing.json()["results"][0]["metadata"] == {"tags": [ESCAPED], "note": ESCAPED}
    detail = client.get(f"/api/memories/{bad_memory.pk}/")
    assert detail.status_code == 200 and detail.json()["metadata"]["note"] == ESCAPED


def test_the_events_api_shows_the_surrogate_escaped(bad_memory, agent_token):
    response = api(agent_token).get("/api/events/")
    assert response.status_code == 200
    event = response.json()["results"][0]
    assert (event["before"], event["after"]) == ({"text": ESCAPED}, {"metadata": {"x": [ESCAPED]}})


def test_the_memory_list_page_the_memory_page_and_its_admin_pages_render(bad_memory, alice_client):
    assert alice_client.get("/memories/").status_code == 200
    page = alice_client.get(f"/memories/{bad_memory.pk}/")
    assert page.status_code == 200
    assert "\\udfff" in page.content.decode("utf-8")
    admin = alice_client.get(f"/admin/memoryui/memory/{bad_memory.pk}/change/")
    assert admin.status_code == 200 and "\\udfff" in admin.content.decode("utf-8")
    assert alice_client.get(f"/admin/memoryui/memoryevent/{bad_memory.events.get().pk}/change/").status_code == 200


def test_the_transcript_page_and_api_render(bad_transcript, alice_client, agent_token):
    page = alice_client.get(f"/transcripts/{bad_transcript.pk}/")
    assert page.status_code == 200
    response = api(agent_token).get(f"/api/transcripts/{bad_transcript.pk}/")
    assert response.status_code == 200
    assert response.json()["messages"][0]["tool_calls"][0]["name"] == ESCAPED
    assert alice_client.get(f"/admin/memoryui/transcript/{bad_transcript.pk}/change/").status_code == 200


def test_task_run_pages_and_api_render(alice_client, agent_token):
    run = TaskRun.objects.create(kind="extract", actor="test")
    store(TaskRun.objects.filter(pk=run.pk), params={"path": LONE}, result={"error": LONE}, counts={LONE: 1})
    assert alice_client.get(f"/tasks/{run.pk}/").status_code == 200
    assert alice_client.get("/tasks/").status_code == 200
    assert alice_client.get(f"/admin/memoryui/taskrun/{run.pk}/change/").status_code == 200
    response = api(agent_token).get(f"/api/tasks/{run.pk}/")
    assert response.status_code == 200 and response.json()["params"] == {"path": ESCAPED}


def test_a_recall_trace_page_and_api_render(alice_client, agent_token):
    trace = RecallTrace.objects.create(
        scope="agent:main", source="api", actor="test", query="phone", limit=5, profile_name="default",
        knobs={}, mode="heuristic", result={"block": "", "candidates": []},
    )  # fmt: skip
    store(RecallTrace.objects.filter(pk=trace.pk), result={"block": LONE, "candidates": []})
    assert alice_client.get(f"/recall/traces/{trace.pk}/").status_code == 200
    response = api(agent_token).get(f"/api/recall/traces/{trace.pk}/")
    assert response.status_code == 200 and response.json()["result"]["block"] == ESCAPED


def test_an_export_writes_the_row_escaped_and_it_imports_back(bad_memory, tmp_path):
    path = tmp_path / "out.jsonl"
    out = io.StringIO()
    call_command("export_memories", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"exported": 1}
    record = json.loads(path.read_bytes().decode("utf-8"))
    assert record["metadata"] == {"tags": [ESCAPED], "note": ESCAPED}
    Memory.objects.filter(pk=bad_memory.pk).update(text="changed")
    out = io.StringIO()
    call_command("import_memories", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue())["updated"] == 1


def test_an_export_line_that_cannot_be_encoded_is_written_ascii_escaped(make_memory, tmp_path, monkeypatch):
    make_memory("東京の天気", kind="fact")
    real_record = jsonl.memory_record
    monkeypatch.setattr(jsonl, "memory_record", lambda memory: {**real_record(memory), "text": LONE})
    path = tmp_path / "out.jsonl"
    assert jsonl.write_export(path, jsonl.export_lines()) == 1
    raw = path.read_bytes()
    assert raw.decode("ascii").endswith("\n")
    assert json.loads(raw)["text"] == LONE
