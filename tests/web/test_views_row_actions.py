"""A row action on the memory list (pin, unpin, tombstone, restore over htmx) says what it did in the
page's messages, and the list follows: a row that no longer passes the list's filters leaves it,
and the list's count is swapped out of band."""

from __future__ import annotations

import re

import pytest

from web import shortcuts

pytestmark = pytest.mark.django_db

# A click on the row's button: app.js marks the requests a person started.
CLICK = {"HX-Request": "true", "HX-Target": "", shortcuts.REPLACE_ALERTS_HEADER: "1"}


def _count(html: str) -> int | None:
    found = re.search(r'<div id="results-count"[^>]*data-count="(\d+)"[^>]*hx-swap-oob="true"', html)
    return int(found.group(1)) if found else None


def test_pinning_a_row_says_so_and_keeps_the_count(alice_client, make_memory):
    memory = make_memory("Prefers <b>terse</b> answers.")
    make_memory("Deploys run on Tuesdays.", kind="fact")

    html = alice_client.post(f"/memories/{memory.pk}/pin/", {"next": "/memories/"}, headers=CLICK).content.decode()

    assert f'<tr id="row-{memory.pk}"' in html and 'data-pinned="yes"' in html
    assert _count(html) == 2
    assert "data-left-list" not in html
    alerts = html[html.index('<div id="alerts"') :]
    assert 'hx-swap-oob="true"' in alerts
    assert "Pinned: Prefers &lt;b&gt;terse&lt;/b&gt; answers." in alerts  # memory text is escaped


def test_tombstoning_a_row_of_the_active_list_takes_it_out_and_counts_one_less(alice_client, make_memory):
    memory = make_memory("在吗?", kind="note")
    make_memory("Deploys run on Tuesdays.", kind="fact")
    make_memory("The VPN needs a hardware key.", kind="fact")

    response = alice_client.post(
        f"/memories/{memory.pk}/tombstone/", {"reason": "chit-chat", "next": "/memories/?kind="}, headers=CLICK
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="row-{memory.pk}"' not in html
    assert _count(html) == 2
    assert f'Tombstoned: 在吗? <a class="alert-action" href="{memory.get_absolute_url()}" data-left-list>' in html


def test_a_row_still_listed_after_its_action_stays_with_the_count_unchanged(alice_client, make_memory):
    memory = make_memory("在吗?", kind="note")
    make_memory("Deploys run on Tuesdays.", kind="fact")

    html = alice_client.post(
        f"/memories/{memory.pk}/tombstone/", {"reason": "chit-chat", "next": "/memories/?status=all"}, headers=CLICK
    ).content.decode()

    assert f'<tr id="row-{memory.pk}" class="is-tombstoned"' in html and ">Restore<" in html
    assert _count(html) == 2


def test_a_row_outside_the_list_gets_its_row_and_no_count(alice_client, make_memory):
    memory = make_memory("Prefers terse answers.")

    html = alice_client.post(f"/memories/{memory.pk}/pin/", {"next": memory.get_absolute_url()}, headers=CLICK)

    assert f'<tr id="row-{memory.pk}"' in html.content.decode()
    assert _count(html.content.decode()) is None
