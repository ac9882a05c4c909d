"""The memory list's search results in words: each result a label and one sentence, the scoring
arithmetic behind a "numbers" disclosure that behaves as the playground's does."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from searchindex.defaults import active_defaults
from searchindex.fusion import RetrievalSettings

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

ARITHMETIC = ("fused", "BM25 0.0", "over the anchor", "convex combination", "RRF", "→")


@pytest.fixture
def searched(signed_in, live_server, indexes, make_memory):
    """The list page after searching "lucky number": two results over the floor, the rest under it."""
    memories = {
        "lucky": make_memory("Remember: my lucky number is 88, use it for demo seeds.", kind="remember"),
        "numbers": make_memory("The user's lucky numbers are 88, 66 and 99.", kind="entity"),
        "phone": make_memory("The user's phone number is 18600000000.", kind="entity"),
        "staging": make_memory("Staging runs on k3s with three nodes in Frankfurt.", kind="fact"),
        "releases": make_memory("Releases go out on Thursdays after 14:00.", kind="procedure"),
    }
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    # The first search of a process loads the embedder: more than the default 5 s on a busy machine.
    page.goto(f"{live_server.url}/memories/?q=lucky+number&scope=agent:main", timeout=60_000)
    expect(page.locator('#results [data-state="search"]')).to_be_visible()
    return page, memories


def visible_text(locator) -> str:
    return locator.evaluate("node => node.innerText")


def test_each_result_says_its_match_in_words_and_no_arithmetic_by_default(searched):
    page, memories = searched
    results = page.locator("#results")
    why = results.locator(f"#why-{memories['lucky'].pk}")
    expect(why.locator('[data-why="label"]')).to_have_text("Strong match")
    expect(why.locator('[data-why="sentence"]')).to_contain_text("Found by ")
    expect(why.locator('[data-why="sentence"]')).to_contain_text("it holds all of the query's words.")
    rows = results.locator(".search-results tr.why-row")
    assert rows.count() >= 2
    for row in rows.all():
        expect(row.locator('[data-why="label"]')).to_be_visible()
        sentence = row.locator('[data-why="sentence"]')
        expect(sentence).to_be_visible()
        assert sentence.inner_text().endswith("."), sentence.inner_text()
        expect(row.locator(".numbers-body")).to_be_hidden()
    shown = visible_text(results)
    for jargon in ARITHMETIC:
        assert jargon not in shown, f"{jargon!r} is shown before anyone asks: {shown}"
    assert "ranked by relevance" in shown
    at_both_widths(page, "search-words")


def test_the_numbers_and_the_fusion_formula_appear_on_demand(searched):
    page, memories = searched
    why = page.locator(f"#why-{memories['lucky'].pk}")
    why.locator("[data-numbers] > summary").click()
    numbers = why.locator(".numbers-body")
    expect(numbers).to_be_visible()
    expect(numbers.locator('[data-why="fused"]')).to_contain_text("= vector ")
    expect(numbers.locator('[data-why="fused"]')).to_contain_text(
        RetrievalSettings.from_dict(active_defaults()).describe_fusion()
    )
    expect(numbers.locator('[data-why="bm25"]')).to_contain_text("of the query")
    expect(numbers.locator('[data-why="rerank"]')).to_contain_text("→")
    assert "fused" not in visible_text(page.locator(".search-head")).lower()
    next_row = page.locator(f"#why-{memories['lucky'].pk} + tr")
    panel, below = numbers.bounding_box(), next_row.bounding_box()
    assert panel["y"] + panel["height"] <= below["y"], "the numbers open in flow, above the next result"
    at_both_widths(page, "search-words-numbers")


def test_the_numbers_behave_as_the_playground_s(searched):
    page, memories = searched
    first = page.locator(f"#why-{memories['lucky'].pk} [data-numbers]")
    second = page.locator(f"#why-{memories['numbers'].pk} [data-numbers]")
    first.locator("summary").click()
    second.locator("summary").click()  # one open at a time
    expect(second.locator(".numbers-body")).to_be_visible()
    expect(first.locator(".numbers-body")).to_be_hidden()

    page.keyboard.press("Escape")
    expect(second.locator(".numbers-body")).to_be_hidden()
    assert second.locator("summary").evaluate("node => node === document.activeElement")
    page.keyboard.press("Enter")  # the focused summary opens it again from the keyboard
    expect(second.locator(".numbers-body")).to_be_visible()

    page.locator("h1").first.click()  # a click outside closes it
    expect(second.locator(".numbers-body")).to_be_hidden()
    first.locator("summary").click()
    first.locator("summary").click()  # and so does a second click
    expect(first.locator(".numbers-body")).to_be_hidden()


def test_results_under_the_floor_say_why_in_the_same_words(searched):
    page, memories = searched
    below = page.locator("#results [data-below-floor]")
    below.locator("summary.floor-line").click()
    staging = below.locator(f'[data-below="{memories["staging"].pk}"]')
    expect(staging.locator('[data-why="label"]')).to_have_text("Below the floor")
    expect(staging.locator('[data-why="sentence"]')).to_contain_text("Too weak a match: neither retriever found it")
    assert "over the anchor" not in visible_text(staging)
    at_both_widths(page, "search-words-below-floor")
