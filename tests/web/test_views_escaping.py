"""Memory content is untrusted: whatever an agent wrote is shown as text, never as markup."""

from __future__ import annotations

import pytest

from memoryui.models import ApiToken, Memory

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
PAYLOADS = (SCRIPT, IMG)
ESCAPED = ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")


def assert_escaped(html: str, *, at_least: int = 1) -> None:
    for raw in PAYLOADS:
        assert raw not in html, f"raw {raw!r} in the page"
    assert sum(html.count(escaped) for escaped in ESCAPED) >= at_least


@pytest.fixture
def hostile(make_memory) -> Memory:
    """A memory with markup in every user-controlled field, and a history full of it."""
    memory = make_memory(
        f"{SCRIPT} {IMG}",
        kind="entity",
        entity_key=f"x:{SCRIPT}",
        metadata={"note": IMG, SCRIPT: [IMG]},
    )
    # The write path refuses such a scope; a legacy row or a raw import may still hold one.
    Memory.objects.filter(pk=memory.pk).update(scope=f"agent:{IMG}")
    memory.refresh_from_db()
    memory.edit(actor=f"user:{SCRIPT}", text=f"{IMG} edited", reason=SCRIPT)
    memory.tombstone(IMG, actor="test")
    memory.restore(actor="test")
    return memory


def test_the_list_escapes_text_scope_and_entity_key(alice_client, hostile):
    html = alice_client.get("/memories/").content.decode()

    assert_escaped(html, at_least=3)
    assert "<img src=x" not in html


def test_the_list_fragment_and_a_row_fragment_escape_too(alice_client, hostile):
    fragment = alice_client.get("/memories/", headers={"HX-Request": "true"}).content.decode()
    row = alice_client.post(f"/memories/{hostile.pk}/pin/", headers={"HX-Request": "true"}).content.decode()

    assert_escaped(fragment, at_least=3)
    assert_escaped(row, at_least=3)


def test_the_detail_escapes_every_field_metadata_and_history(alice_client, hostile):
    html = alice_client.get(f"/memories/{hostile.pk}/").content.decode()

    assert_escaped(html, at_least=8)
    assert 'data-action="edited"' in html and "Reason: &lt;script&gt;" in html
    assert "user:&lt;script&gt;" in html


def test_dashboard_scope_labels_and_activity_are_escaped(alice_client, hostile):
    html = alice_client.get("/").content.decode()

    assert_escaped(html, at_least=2)
    assert 'href="/memories/?scope=agent%3A%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E"' in html


def test_the_edit_form_escapes_the_current_values(alice_client, hostile):
    html = alice_client.get(f"/memories/{hostile.pk}/edit/").content.decode()

    assert_escaped(html, at_least=2)


def test_filter_values_echoed_in_error_messages_are_escaped(alice_client):
    html = alice_client.get("/memories/", {"kind": SCRIPT, "q": IMG}).content.decode()

    assert_escaped(html)


def test_token_names_are_escaped(alice_client, alice):
    ApiToken.issue(user=alice, name=SCRIPT)

    assert_escaped(alice_client.get("/tokens/").content.decode())
