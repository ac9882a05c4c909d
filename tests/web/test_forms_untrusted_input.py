"""Untrusted input through the memory forms: the API's checks, as errors on the field, never a 500.

The metadata textarea takes JSON, so "\\udfff" (a lone surrogate) and "\\u0000" (a NUL) arrive as
valid escapes there; nesting arrives as brackets.
"""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui.models import Memory, MemoryEvent
from memoryui.untrusted import MAX_JSON_DEPTH
from web.forms import MemoryForm

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(alice) -> Client:
    """alice signed in, answering 500s as a server would instead of raising them into the test."""
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def create(client, **fields):
    data = {"scope": "agent:main", "kind": "preference", "text": "Prefers terse answers.", "source": "manual"}
    return client.post("/memories/new/", {**data, **fields})


def edit(client, memory: Memory, **changes):
    return client.post(f"/memories/{memory.pk}/edit/", {**MemoryForm.initial_from(memory), **changes})


def field_error(response, field: str) -> str:
    assert response.status_code == 400, response.status_code
    html = response.content.decode()
    block = html[html.index(f'data-field="{field}"') :]
    block = block[: block.index("</div>")]
    assert 'class="error"' in block, f"no error shown on {field}"
    return block


def nested_json(depth: int) -> str:
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        ('{"k": "\\udfff"}', "metadata.k holds a lone UTF-16 surrogate (U+DFFF)"),
        ('{"tags": ["ok", "\\u0000"]}', "metadata.tags[1] holds a NUL character"),
        ('{"\\ud800": 1}', "metadata has a key that holds a lone UTF-16 surrogate"),
        (nested_json(MAX_JSON_DEPTH + 1), f"is nested more than {MAX_JSON_DEPTH} levels deep"),
        (nested_json(5000), f"is nested more than {MAX_JSON_DEPTH} levels deep"),
        ('{"n": ' + "9" * 5000 + "}", "Invalid JSON"),
    ],
)
def test_metadata_that_cannot_be_stored_is_an_error_on_the_metadata_field(signed_in, metadata, says):
    response = create(signed_in, metadata=metadata)

    assert says in field_error(response, "metadata")
    assert not Memory.objects.exists() and not MemoryEvent.objects.exists()


def test_metadata_nested_to_the_limit_is_accepted(signed_in):
    response = create(signed_in, metadata=nested_json(MAX_JSON_DEPTH))
    assert response.status_code == 302
    assert Memory.objects.get().metadata["a"]["a"]


@pytest.mark.parametrize("text", ["\u200b\u200c\u200d", "\u202e\ufeff", "\x01\x02"])
def test_text_of_only_invisible_characters_is_an_error_on_the_text_field(signed_in, make_memory, text):
    assert "must hold visible text" in field_error(create(signed_in, text=text), "text")
    assert not Memory.objects.exists()

    memory = make_memory("Prefers tea.")
    assert "must hold visible text" in field_error(edit(signed_in, memory, text=text), "text")
    memory.refresh_from_db()
    assert memory.text == "Prefers tea." and memory.events.count() == 1


def test_a_nul_in_text_is_an_error_on_the_text_field(signed_in):
    field_error(create(signed_in, text="Prefers\x00 tea."), "text")
    assert not Memory.objects.exists()


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_an_expiry_with_no_utc_year_is_an_error_on_the_field(signed_in, make_memory, value):
    assert "out of range" in field_error(create(signed_in, expires_at=value), "expires_at")
    assert not Memory.objects.exists()

    memory = make_memory("Prefers tea.")
    assert "out of range" in field_error(edit(signed_in, memory, expires_at=value), "expires_at")
    memory.refresh_from_db()
    assert memory.expires_at is None


def test_an_edit_with_unstorable_metadata_changes_nothing(signed_in, make_memory):
    memory = make_memory("Prefers tea.", metadata={"k": "v"})

    field_error(edit(signed_in, memory, metadata='{"k": "\\udfff"}'), "metadata")

    memory.refresh_from_db()
    assert memory.metadata == {"k": "v"} and memory.events.count() == 1


def test_a_form_larger_than_the_upload_limit_is_a_413_page(signed_in, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = create(signed_in, text="x" * 2000)

    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "Too large" in html and "1,000 bytes" in html
    assert not Memory.objects.exists()


def test_an_htmx_post_larger_than_the_upload_limit_gets_a_413_state(signed_in, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = signed_in.post(
        "/memories/new/", {"text": "x" * 2000, "scope": "main", "kind": "fact"}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 413
    assert "<html" not in response.content.decode()
    assert "1,000 bytes" in response.content.decode()
