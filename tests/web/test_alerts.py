"""Messages are shown once, and a destructive action asks first (web.shortcuts).

A message waits until the next page, or until the next htmx request the user started, whose
answer replaces the page's messages out of band; polls leave them where they are.
"""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django_htmx.middleware import HtmxMiddleware

from web import shortcuts

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
USER_STARTED = {**HTMX, shortcuts.REPLACE_ALERTS_HEADER: "1"}


def _flash_pinned(client, memory) -> None:
    """A plain POST: its outcome waits in the messages for the next page."""
    response = client.post(f"/memories/{memory.pk}/pin/")
    assert response.status_code == 302


def test_an_htmx_request_the_user_started_replaces_the_messages_and_uses_them_up(alice_client, make_memory):
    memory = make_memory("The user prefers tea.")
    _flash_pinned(alice_client, memory)

    fragment = alice_client.get("/memories/", headers=USER_STARTED).content.decode()

    assert 'id="alerts"' in fragment and 'hx-swap-oob="true"' in fragment
    assert "Pinned: The user prefers tea." in fragment
    assert "<html" not in fragment  # still only the fragment, with its out-of-band part
    assert "Pinned:" not in alice_client.get("/memories/").content.decode()  # shown once


def test_with_nothing_waiting_the_answer_clears_the_old_messages(alice_client):
    fragment = alice_client.get("/memories/", headers=USER_STARTED).content.decode()

    assert '<div id="alerts" class="alerts" aria-live="polite" hx-swap-oob="true">' in fragment
    assert "data-message" not in fragment


def test_a_poll_leaves_the_messages_for_later(alice_client, make_memory):
    memory = make_memory("The user prefers tea.")
    _flash_pinned(alice_client, memory)

    polled = alice_client.get("/memories/", headers=HTMX).content.decode()

    assert "hx-swap-oob" not in polled
    assert "Pinned: The user prefers tea." in alice_client.get("/memories/").content.decode()


def test_an_error_answered_into_the_alerts_is_not_swapped_twice(alice_client, make_memory):
    memory = make_memory("The user prefers tea.")

    response = alice_client.post(f"/memories/{memory.pk}/edit/", {}, headers=USER_STARTED)

    if response.get("HX-Retarget") == shortcuts.ALERTS:
        assert "hx-swap-oob" not in response.content.decode()
    else:  # the form answers in place, and the page's messages are replaced beside it
        assert response.content.decode().count('id="alerts"') == 1


def test_signing_out_says_so_on_the_sign_in_page(alice_client):
    response = alice_client.post("/accounts/logout/", follow=True)

    assert response.redirect_chain[-1][0].startswith("/accounts/login/")
    assert "You are signed out (alice)" in response.content.decode()


def _confirm_request(user, *, htmx: bool, target: str = ""):
    headers = {"HX-Request": "true", **({"HX-Target": target} if target else {})} if htmx else {}
    request = RequestFactory().post(
        "/memories/bulk/?scope=agent:main",
        {"action": "tombstone", "ids": ["a", "b"], "reason": "spam"},
        headers=headers,
    )
    HtmxMiddleware(lambda r: None)(request)
    request.user = user
    return request


def _ask(request):
    return shortcuts.confirmation(
        request,
        title="Tombstone 2 memories?",
        consequences=["2 memories of agent:main are tombstoned with the reason 'spam'.", "Undo restores them."],
        button="Tombstone 2",
        back="/memories/",
    )


def test_a_plain_post_is_asked_on_a_page_that_posts_the_same_fields_confirmed(alice):
    request = _confirm_request(alice, htmx=False)
    assert shortcuts.needs_confirmation(request)

    html = _ask(request).content.decode()

    assert "<html" in html and "Tombstone 2 memories?" in html
    assert 'action="/memories/bulk/?scope=agent:main"' in html
    for field in ('name="action" value="tombstone"', 'name="ids" value="a"', 'name="ids" value="b"',
                  'name="reason" value="spam"', 'name="confirmed" value="1"'):  # fmt: skip
        assert field in html
    assert 'href="/memories/"' in html  # Cancel goes back
    assert "hx-post" not in html


def test_an_htmx_post_is_asked_in_the_dialog_and_answers_into_the_original_target(alice):
    request = _confirm_request(alice, htmx=True, target="results")

    response = _ask(request)
    html = response.content.decode()

    assert response["HX-Retarget"] == shortcuts.CONFIRM_DIALOG and response["HX-Reswap"] == "innerHTML"
    assert "<html" not in html
    assert 'hx-post="/memories/bulk/?scope=agent:main" hx-target="#results" hx-swap="innerHTML"' in html
    assert "data-close-dialog" in html


def test_a_confirmed_post_is_not_asked_again():
    request = RequestFactory().post("/memories/bulk/", {"action": "tombstone", "confirmed": "1"})
    assert not shortcuts.needs_confirmation(request)
    assert not shortcuts.needs_confirmation(RequestFactory().get("/memories/"))
