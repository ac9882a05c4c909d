"""The short ids the pages show work where a memory id is typed: "Why not recalled?" in the playground
takes one and explains the memory; a short id two memories share is refused, listing both."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

# Two memories whose ids share their first 8 hex digits, as the pages show them.
TWIN_A = uuid.UUID("37ddb874-0bf0-438b-adb7-9fbd1fd55725")
TWIN_B = uuid.UUID("37ddb874-77aa-4c1e-8a2b-000000000001")
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
TEA = "The user prefers green tea in the afternoon."


@pytest.fixture
def memories(indexes, write) -> dict:
    return {
        "gotcha": write(GOTCHA, kind="fact", id=TWIN_A),
        "tea": write(TEA, kind="preference", id=TWIN_B),
        "deploy": write("Deploys go out on Thursdays after the release checklist.", kind="procedure"),
    }


def ask_why(page, live_server, typed: str) -> None:
    page.goto(f"{live_server.url}/recall/?q=article-list-query+locale&scope=agent:main")
    page.locator("#id_why").fill(typed)
    page.get_by_role("button", name="Recall").click()


def test_a_short_id_typed_into_why_not_recalled_shows_the_explanation(signed_in, live_server, memories):
    page = signed_in
    short = str(memories["deploy"].pk)[:8]
    ask_why(page, live_server, short)

    why = page.locator("[data-why-not]")
    expect(why).to_be_visible()
    expect(why.locator("h2")).to_contain_text(str(memories["deploy"].pk))
    expect(why.locator("ol.stages li").first).to_contain_text("retrieval")
    assert f"why={memories['deploy'].pk}" not in page.url  # the address keeps what was typed
    assert f"why={short}" in page.url
    at_both_widths(page, "short-id-why")


def test_a_short_id_two_memories_share_is_refused_listing_both(signed_in, live_server, memories):
    page = signed_in
    ask_why(page, live_server, "37ddb874")

    refused = page.locator("#run [data-state=invalid]")
    expect(refused).to_be_visible()
    expect(refused).to_contain_text("why: '37ddb874' is ambiguous: 2 memories start with it")
    expect(refused).to_contain_text("37ddb874-0 (agent:main) “Gotcha for article-list-query: always p…”")
    expect(refused).to_contain_text("37ddb874-7 (agent:main) “The user prefers green tea in the after…”")
    expect(page.locator("[data-why-not]")).to_have_count(0)
    at_both_widths(page, "short-id-ambiguous")

    page.locator("#id_why").fill("37ddb874-7")  # the longer prefix the list gave
    page.get_by_role("button", name="Recall").click()
    expect(page.locator("[data-why-not] h2")).to_contain_text(str(TWIN_B))
