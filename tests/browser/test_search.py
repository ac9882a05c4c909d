"""The list page's search box in a real browser: hybrid results with why, the floor line, the plain-text toggle."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def test_searching_shows_ranked_results_with_why_and_the_plain_text_toggle(
    signed_in, live_server, indexes, make_memory, screenshot
):
    page = signed_in
    lucky = make_memory("Remember: my lucky number is 88, use it for demo seeds.", kind="remember")
    make_memory("The user's phone number is 18600000000.", kind="entity", entity_key="phone:18600000000")
    make_memory("Releases go out on Thursdays after 14:00.", kind="procedure")
    page.goto(f"{live_server.url}/memories/")

    page.locator("#id_q").fill("幸运数字")
    page.locator("#id_q").press("Enter")

    expect(page).to_have_url(f"{live_server.url}/memories/?q=%E5%B9%B8%E8%BF%90%E6%95%B0%E5%AD%97")
    results = page.locator("#results")
    expect(results.locator('[data-state="search"]')).to_contain_text("relevant memor")
    expect(results.locator(".search-results tbody tr").first).to_have_id(f"row-{lucky.pk}")
    why = results.locator(f"#why-{lucky.pk}")
    expect(why.locator('[data-why="label"]')).to_have_text("Strong match")
    expect(why.locator('[data-why="sentence"]')).to_contain_text("it holds all of the query's words")
    expect(why.locator('[data-why="bm25"]')).to_be_hidden()  # the numbers on demand
    why.locator("[data-numbers] > summary").click()
    expect(why.locator('[data-why="bm25"]')).to_contain_text("covers 100% of the query")
    expect(why.locator('[data-why="vector"]')).to_contain_text("similarity")
    screenshot("hybrid")

    page.locator("#id_q").fill("quantum entanglement")
    page.locator("#id_q").press("Enter")
    expect(results.locator('[data-state="empty"]')).to_contain_text("Nothing relevant to")
    expect(results.locator("[data-below-floor] > summary")).to_contain_text("below the line")
    screenshot("nothing-relevant")

    page.locator("#id_q").fill("thursdays")
    page.locator("#id_match").select_option("text")
    expect(page).to_have_url(f"{live_server.url}/memories/?q=thursdays&match=text")
    expect(results.locator("tbody tr")).to_have_count(1)
    expect(results).to_contain_text("Releases go out on Thursdays")
    expect(results.locator('[data-state="search"]')).to_have_count(0)


def test_a_result_below_the_floor_is_collapsed_under_the_line_and_opens_on_click(
    signed_in, live_server, indexes, make_memory, screenshot
):
    page = signed_in
    lucky = make_memory("Remember: my lucky number is 88, use it for demo seeds.", kind="remember")
    unrelated = make_memory("Staging runs on k3s with three nodes in Frankfurt.", kind="fact")
    page.goto(f"{live_server.url}/memories/?q=lucky+number")

    results = page.locator("#results")
    expect(results.locator(f".search-results #row-{lucky.pk}")).to_be_visible()
    below = results.locator("[data-below-floor]")
    expect(below.locator("summary.floor-line")).to_contain_text("relevance floor")
    row = below.locator(f"#row-{unrelated.pk}")
    expect(row).to_be_hidden()
    screenshot("floor-line-collapsed")

    below.locator("summary.floor-line").click()
    expect(row).to_be_visible()
    expect(below.locator(f'[data-below="{unrelated.pk}"] [data-why="label"]')).to_have_text("Below the floor")
    screenshot("floor-line-open")
