"""The memory detail page: every field, the full history with before → after, the actions."""

from __future__ import annotations

import uuid

import pytest

from memoryui.models import Memory

pytestmark = pytest.mark.django_db


def test_detail_shows_every_field(alice_client, make_memory):
    memory = make_memory(
        "Phone is 18600000000.", kind="entity", entity_key="phone:18600000000", metadata={"tags": ["contact"]}
    )

    html = alice_client.get(f"/memories/{memory.pk}/").content.decode()

    for value in (
        str(memory.pk),
        "agent:main",
        "entity",
        "core",
        "phone:18600000000",
        "manual",
        memory.content_hash[:8],
    ):
        assert value in html
    assert "&quot;tags&quot;: [" in html
    assert f'href="/memories/{memory.pk}/edit/"' in html


def test_history_lists_events_newest_first_with_actor_reason_and_diff(alice_client, make_memory):
    memory = make_memory("在吗?", kind="note")
    memory.pin(actor="user:alice")
    memory.tombstone("chit-chat, not knowledge", actor="user:bob")

    html = alice_client.get(f"/memories/{memory.pk}/").content.decode()

    assert (
        html.index('data-action="tombstoned"')
        < html.index('data-action="pinned"')
        < html.index('data-action="created"')
    )
    assert "user:bob" in html and "user:alice" in html
    assert "Reason: chit-chat, not knowledge" in html
    # the pin's diff: pinned no → yes
    pinned = html[html.index('data-action="pinned"') : html.index('data-action="created"')]
    assert '<td class="diff-before">no</td><td class="diff-arrow">→</td><td class="diff-after">yes</td>' in pinned


def test_history_panel_refreshes_over_htmx_as_a_fragment(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    response = alice_client.get(f"/memories/{memory.pk}/", headers={"HX-Request": "true", "HX-Target": "history"})

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'data-action="created"' in html
    assert "Fields" not in html


def test_a_memory_written_outside_memoryui_shows_an_empty_history_with_an_explanation(alice_client):
    memory = Memory.objects.create(scope="agent:main", kind="note", tier="peripheral", text="raw row", importance=0.1)

    html = alice_client.get(f"/memories/{memory.pk}/").content.decode()

    assert 'data-state="empty"' in html
    assert "No history recorded" in html


def test_detail_actions_post_normally_and_come_back_to_the_detail(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")
    detail = f"/memories/{memory.pk}/"

    html = alice_client.get(detail).content.decode()
    response = alice_client.post(f"/memories/{memory.pk}/tombstone/", {"reason": "outdated", "next": detail})

    assert f'action="/memories/{memory.pk}/tombstone/"' in html
    assert response.status_code == 302 and response["Location"] == detail
    page = alice_client.get(detail).content.decode()
    assert "Tombstoned: Prefers terse answers." in page
    assert ">Restore<" in page


def test_an_unknown_memory_is_a_friendly_404(alice_client):
    response = alice_client.get(f"/memories/{uuid.uuid4()}/")

    assert response.status_code == 404
    assert "Not found" in response.content.decode()
    assert "Traceback" not in response.content.decode()
