"""The dashboard: totals and breakdowns by kind, tier and scope, each linking to the list."""

from __future__ import annotations

import re

import pytest

from memoryui import rules

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "stats-panel"}


def count_cell(html: str, label: str) -> int:
    match = re.search(rf'data-count="{re.escape(label)}">(\d+)<', html)
    assert match, f"no bar for {label}"
    return int(match.group(1))


def test_dashboard_requires_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


def test_dashboard_shows_totals_and_breakdowns_from_the_store(alice_client, make_memory):
    make_memory("Name is Lin.", kind="entity", scope="agent:main")  # entity: core, pinned
    make_memory("Prefers terse answers.", kind="preference", scope="agent:main")
    make_memory("Runs 1000 RTX 4070s in an IDC.", kind="fact", scope="agent:test-w")
    make_memory("chit-chat", kind="note", scope="agent:main").tombstone("noise", actor="test")

    html = alice_client.get("/").content.decode()

    assert 'data-stat="total">3<' in html
    assert 'data-stat="pinned">1<' in html
    assert 'data-stat="tombstoned">1<' in html
    assert count_cell(html, "entity") == 1
    assert count_cell(html, "fact") == 1
    assert count_cell(html, "agent:main") == 2
    assert count_cell(html, "agent:test-w") == 1


def test_every_kind_and_tier_is_shown_even_at_zero(alice_client, make_memory):
    make_memory("Prefers terse answers.", kind="preference")

    html = alice_client.get("/").content.decode()

    for name in (*rules.KINDS, *rules.TIERS):
        assert count_cell(html, name) >= 0
    assert count_cell(html, "relationship") == 0
    assert count_cell(html, "core") == 0


def test_bar_labels_link_to_the_filtered_memory_list(alice_client, make_memory):
    make_memory("Prefers terse answers.", kind="preference", scope="agent:main")

    html = alice_client.get("/").content.decode()

    assert 'href="/memories/?kind=note"' in html
    assert 'href="/memories/?tier=working"' in html
    assert 'href="/memories/?scope=agent%3Amain"' in html


def test_bar_widths_are_relative_to_the_largest_count(alice_client, make_memory):
    for i in range(4):
        make_memory(f"fact number {i}", kind="fact")
    make_memory("one preference", kind="preference")

    html = alice_client.get("/").content.decode()

    bar = (
        r'<a href="/memories/\?kind=(\w+)"[^>]*>\1</a></th>\s*'
        r'<td class="bar-cell"><span class="bar[^"]*" data-width="([\d.]+)"'
    )
    widths = {kind: float(width) for kind, width in re.findall(bar, html)}
    assert widths["fact"] == 100.0
    assert widths["preference"] == 25.0
    assert widths["note"] == 0.0


def test_an_empty_store_says_how_to_fill_it(alice_client):
    html = alice_client.get("/").content.decode()

    assert 'data-state="empty"' in html
    assert "import_memories" in html
    assert 'href="/memories/new/"' in html


def test_htmx_refresh_returns_only_the_stats_fragment(alice_client, make_memory):
    make_memory("Prefers terse answers.")

    response = alice_client.get("/", headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'data-stat="total">1<' in html
    assert "Recent activity" not in html
    assert "HX-Request" in response["Vary"]


def test_htmx_refresh_of_the_activity_panel_returns_the_latest_events(alice_client, make_memory):
    make_memory("Prefers terse answers.").pin(actor="user:alice")

    response = alice_client.get("/", headers={"HX-Request": "true", "HX-Target": "activity"})

    html = response.content.decode()
    assert "<html" not in html
    assert "pinned" in html and "user:alice" in html
    assert "data-stat" not in html
