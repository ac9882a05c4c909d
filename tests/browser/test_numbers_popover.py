"""A candidate's "numbers" in the recall playground and on a saved trace: one open at a time, closed by
Escape, a click outside or a second click, reachable by keyboard, and never covering the row below."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from recall.models import RecallTrace

from .looks import at_both_widths

pytestmark = pytest.mark.e2e

MEMORIES = (
    ("Gotcha for article-list-query: always pass locale=zh or it silently returns empty.", "fact"),
    ("Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall.", "relationship"),
    ("Call format for article-list-query (guessed): pass query string, page int, page_size int ≤ 50.", "procedure"),
    ("The user prefers green tea in the afternoon.", "preference"),
    ("The staging database is reset every Sunday night.", "fact"),
    ("Weekly demos are on Thursdays with the product team.", "fact"),
)
PLAYGROUND = "/recall/?q=how+do+I+call+article-list-query&scope=agent:main&tools=mcp__ata__article-list-query"


@pytest.fixture
def playground(signed_in, live_server, indexes, make_memory):
    """The playground with a run on screen and every stage's candidates shown."""
    for text, kind in MEMORIES:
        make_memory(text, kind=kind)
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(live_server.url + PLAYGROUND)
    expect(page.locator("#run tr[data-candidate]").first).to_be_visible()
    for summary in page.locator("#run [data-stage-summary]").all():
        summary.click()
    return page


def rows(page):
    return page.locator("#run tr[data-candidate]")


def numbers_of(row):
    return row.locator("details[data-numbers]")


def is_open(details) -> bool:
    return details.evaluate("node => node.open")


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, "not on screen"
    return found


def assert_panel_clears_the_next_row(row, next_row) -> None:
    panel = box(row.locator(".numbers-body"))
    below = box(next_row)
    assert panel["y"] + panel["height"] <= below["y"], f"the panel {panel} covers the row below {below}"
    own = box(row)
    assert own["y"] <= panel["y"] and panel["y"] + panel["height"] <= own["y"] + own["height"], (
        f"the panel {panel} sticks out of its row {own}"
    )


def test_opening_a_second_popover_closes_the_first(playground):
    page = playground
    first, second = numbers_of(rows(page).nth(0)), numbers_of(rows(page).nth(1))
    first.locator("summary").click()
    expect(first.locator(".numbers-body")).to_be_visible()
    at_both_widths(page, "numbers-popover-one-open")

    second.locator("summary").click()
    expect(second.locator(".numbers-body")).to_be_visible()
    expect(first.locator(".numbers-body")).to_be_hidden()
    assert not is_open(first) and is_open(second)
    assert page.locator("details[data-numbers][open]").count() == 1
    at_both_widths(page, "numbers-popover-second-open")


def test_escape_closes_the_popover_and_gives_focus_back_to_its_summary(playground):
    page = playground
    numbers = numbers_of(rows(page).nth(1))
    numbers.locator("summary").click()
    expect(numbers.locator(".numbers-body")).to_be_visible()

    page.keyboard.press("Escape")
    expect(numbers.locator(".numbers-body")).to_be_hidden()
    assert not is_open(numbers)
    assert numbers.locator("summary").evaluate("node => node === document.activeElement")
    at_both_widths(page, "numbers-popover-escaped")


def test_a_click_outside_closes_the_popover_and_a_click_inside_does_not(playground):
    page = playground
    numbers = numbers_of(rows(page).nth(0))
    numbers.locator("summary").click()
    numbers.locator(".numbers-body dt").first.click()  # reading the numbers: stays open
    assert is_open(numbers)

    page.locator("h1").first.click()
    expect(numbers.locator(".numbers-body")).to_be_hidden()
    assert not is_open(numbers)
    at_both_widths(page, "numbers-popover-clicked-outside")


def test_a_second_click_on_the_summary_closes_it(playground):
    page = playground
    numbers = numbers_of(rows(page).nth(0))
    numbers.locator("summary").click()
    expect(numbers.locator(".numbers-body")).to_be_visible()
    numbers.locator("summary").click()
    expect(numbers.locator(".numbers-body")).to_be_hidden()
    assert not is_open(numbers)


def test_the_keyboard_reaches_opens_and_closes_the_popover(playground):
    page = playground
    row = rows(page).nth(0)
    summary = numbers_of(row).locator("summary")
    row.locator(".cell-memory a").first.focus()
    for _ in range(8):  # Tab through the row's links to its numbers
        if summary.evaluate("node => node === document.activeElement"):
            break
        page.keyboard.press("Tab")
    assert summary.evaluate("node => node === document.activeElement"), "Tab never reaches the numbers"

    page.keyboard.press("Enter")
    expect(row.locator(".numbers-body")).to_be_visible()
    assert is_open(numbers_of(row))  # a native <details>: its open state is what assistive technology reads
    at_both_widths(page, "numbers-popover-keyboard")
    page.keyboard.press("Escape")
    expect(row.locator(".numbers-body")).to_be_hidden()
    page.keyboard.press("Space")  # focus is back on the summary: Space opens it again
    expect(row.locator(".numbers-body")).to_be_visible()


PLACED = re.compile(r"\bnumbers-open\b")  # app.js: the row made room for its open numbers


def followed_by_a_row(page) -> list[int]:
    """The indexes (among rows()) of the candidate rows that have another row right under them."""
    return page.evaluate(
        """() => [...document.querySelectorAll("#run tr[data-candidate]")]
          .map((row, index) => {
            const next = row.nextElementSibling;
            return next && next.matches("tr[data-candidate]") ? index : -1;
          })
          .filter((index) => index >= 0)"""
    )


@pytest.mark.parametrize("which", ["first", "last"])
def test_the_open_popover_never_covers_the_next_row(playground, which):
    page = playground
    candidates = followed_by_a_row(page)
    assert len(candidates) >= 2
    index = candidates[0] if which == "first" else candidates[-1]
    row, next_row = rows(page).nth(index), rows(page).nth(index + 1)
    height = box(row)["height"]
    numbers_of(row).locator("summary").click()
    expect(row.locator(".numbers-body")).to_be_visible()
    expect(row).to_have_class(PLACED)  # by the details' toggle event, which comes a task after the click
    assert box(row)["height"] > height, "the row grows to hold its numbers"
    assert_panel_clears_the_next_row(row, next_row)
    at_both_widths(page, f"numbers-popover-{which}-row")  # leaves the page at 1400 px

    page.set_viewport_size({"width": 1024, "height": 900})  # a narrower row: a taller panel
    page.wait_for_function("() => document.documentElement.clientWidth === 1024")
    expect(row.locator(".numbers-body")).to_be_visible()
    assert_panel_clears_the_next_row(row, next_row)

    page.set_viewport_size({"width": 1400, "height": 900})
    page.wait_for_function("() => document.documentElement.clientWidth === 1400")
    numbers_of(row).locator("summary").click()
    expect(row.locator(".numbers-body")).to_be_hidden()
    expect(row).not_to_have_class(PLACED)  # the toggle event comes a task after the panel hides
    assert abs(box(row)["height"] - height) < 40, "closed, the row is its own size again"


def test_a_saved_trace_shows_the_same_popovers(playground, live_server):
    page = playground
    page.locator("#trace-note").fill("numbers check")
    page.get_by_role("button", name="Save as trace").click()
    expect(page.get_by_text("Trace saved").or_(page.locator("[data-trace-note]"))).to_be_visible()
    trace = RecallTrace.objects.get()
    page.goto(f"{live_server.url}/recall/traces/{trace.pk}/")
    expect(page.locator("[data-trace-note]")).to_have_text("numbers check")
    for summary in page.locator("[data-stage-summary]").all():
        summary.click()
    trace_rows = page.locator("tr[data-candidate]")
    first, second = numbers_of(trace_rows.nth(0)), numbers_of(trace_rows.nth(1))
    first.locator("summary").click()
    expect(first.locator(".numbers-body")).to_be_visible()
    assert_panel_clears_the_next_row(trace_rows.nth(0), trace_rows.nth(1))
    second.locator("summary").click()
    assert not is_open(first) and is_open(second)
    at_both_widths(page, "numbers-popover-trace")
    page.keyboard.press("Escape")
    expect(second.locator(".numbers-body")).to_be_hidden()
