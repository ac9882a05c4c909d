"""The back office: every model registered, memory text escaped, changes recorded."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.urls import reverse

from ingest.ingestion import ingest
from memoryui.models import ApiToken, Memory, MemoryEvent, TaskRun, Transcript

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('x')</script>"


def test_every_model_has_a_back_office_page(alice_client, make_memory, agent_token):
    memory = make_memory()
    models = [*apps.get_app_config("memoryui").get_models(), *apps.get_app_config("recall").get_models()]
    assert {Memory, MemoryEvent, ApiToken, Transcript, TaskRun} <= set(models)
    for model in models:
        if model._meta.model_name in ("message", "goldenquery"):
            continue  # shown inline on their transcript's or golden set's page
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        assert alice_client.get(url).status_code == 200
    assert alice_client.get(reverse("admin:memoryui_memory_change", args=[memory.pk])).status_code == 200


def test_memory_text_is_escaped_in_the_back_office(alice_client, make_memory):
    memory = make_memory(f"{SCRIPT} likes tea", scope="agent:main")
    for url in (
        reverse("admin:memoryui_memory_changelist"),
        reverse("admin:memoryui_memory_change", args=[memory.pk]),
        reverse("admin:memoryui_memoryevent_changelist"),
    ):
        body = alice_client.get(url).content.decode()
        assert SCRIPT not in body
        assert "&lt;script&gt;" in body


def test_back_office_cannot_hard_delete_memories_or_rewrite_history(alice_client, make_memory):
    memory = make_memory()
    response = alice_client.post(reverse("admin:memoryui_memory_delete", args=[memory.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert Memory.objects.filter(pk=memory.pk).exists()
    event = memory.events.get()
    assert alice_client.get(reverse("admin:memoryui_memoryevent_change", args=[event.pk])).status_code == 200
    response = alice_client.post(reverse("admin:memoryui_memoryevent_delete", args=[event.pk]), {"post": "yes"})
    assert response.status_code == 403


def test_back_office_pin_action_writes_history(alice_client, make_memory):
    memory = make_memory(kind="fact")
    response = alice_client.post(
        reverse("admin:memoryui_memory_changelist"),
        {"action": "pin_selected", "_selected_action": [str(memory.pk)]},
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.pinned
    assert memory.events.filter(action="pinned", actor="user:alice").exists()


def test_back_office_is_closed_to_anonymous_users(client):
    response = client.get(reverse("admin:memoryui_memory_changelist"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_a_transcript_shows_its_messages_escaped_and_tasks_are_read_only(alice_client):
    transcript = ingest({"scope": "main", "messages": [{"role": "user", "content": f"{SCRIPT} 我叫东升"}]}).transcript
    page = alice_client.get(reverse("admin:memoryui_transcript_change", args=[transcript.pk])).content.decode()
    assert "&lt;script&gt;" in page and SCRIPT not in page
    run = TaskRun.objects.create(kind="extract", actor="test")
    assert alice_client.get(reverse("admin:memoryui_taskrun_change", args=[run.pk])).status_code == 200
    assert alice_client.get(reverse("admin:memoryui_taskrun_add")).status_code == 403


def test_every_models_plural_reads_right():
    # A plural Django made by adding "s" is wrong after -y, -x, -s, -ch and -sh ("Memorys", "Index outboxs").
    for model in apps.get_models():
        singular, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
        if plural == f"{singular}s":
            assert not re.search(r"([^aeiou]y|x|s|ch|sh)$", singular), f"{model.__name__}: {plural!r}"


def test_the_back_office_index_names_the_store_in_plain_words(alice_client):
    html = alice_client.get(reverse("admin:index")).content.decode()

    assert ">Memories<" in html and ">Index outbox entries<" in html and ">API tokens<" in html
    assert "Memorys" not in html and "outboxs" not in html


def test_the_memory_list_shows_narrow_columns_and_strikes_through_a_tombstoned_memory(alice_client, make_memory):
    make_memory("x" * 300, scope="agent:" + "s" * 100)
    make_memory("Spam.").tombstone("noise", actor="test")

    html = alice_client.get(reverse("admin:memoryui_memory_changelist")).content.decode()

    assert ">" + "x" * 69 + "…</a>" in html  # cut short
    assert "agent:" + "s" * 13 + "…" in html
    assert '<del title="tombstoned">Spam.</del>' in html
    assert "memoryui/admin.css" in html
    for column in ("importance", "source", "status"):
        assert f"column-{column}" not in html
