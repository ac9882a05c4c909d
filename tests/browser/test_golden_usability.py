"""Golden queries as a person uses them: forms laid out and labelled in words, `none` and the short ids
the pages show accepted, a comparison in words at each profile's limit, and messages shown once."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from recall.models import GoldenSet, RecallProfile

pytestmark = pytest.mark.e2e

GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
CALL_FORMAT = "Call format for article-list-query (guessed): pass query string, page int, page_size int ≤ 50."


@pytest.fixture
def ata(indexes, make_memory) -> dict:
    return {
        "gotcha": make_memory(GOTCHA, kind="fact"),
        "escalation": make_memory(ESCALATION, kind="relationship"),
        "call_format": make_memory(CALL_FORMAT, kind="procedure"),
        "tea": make_memory("The user prefers green tea in the afternoon.", kind="preference"),
    }


def inside(inner: dict, outer: dict) -> bool:
    return (
        outer["x"] <= inner["x"]
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        and outer["y"] <= inner["y"]
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    )


def test_a_query_with_short_ids_and_one_with_none_are_added_then_two_profiles_compared(
    signed_in, live_server, ata, screenshot
):
    RecallProfile.objects.create(name="three", description="recall three memories", knobs={"limit": 3})
    golden = GoldenSet.objects.create(name="ata tool", scope="agent:main")
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}{golden.get_absolute_url()}")

    form = page.locator("[data-golden-add]")
    expect(form.locator('label[for="id_tools_text"]')).to_have_text("Recent tools")
    expect(form.locator('label[for="id_expected_text"]')).to_have_text("Expected memories")
    button = form.get_by_role("button", name="Add query")
    assert inside(button.bounding_box(), form.bounding_box())  # the button stays on the card
    assert button.bounding_box()["width"] < form.bounding_box()["width"] / 2  # and is not stretched
    screenshot("form")

    shorts = [str(ata[key].pk)[:8] for key in ("gotcha", "escalation")]
    form.locator("#id_query").fill("article-list-query locale")
    form.locator("#id_tools_text").fill("mcp__ata__article-list-query")
    form.locator("#id_expected_text").fill(", ".join(shorts))
    form.get_by_role("button", name="Add query").click()
    expect(page.locator("#alerts [data-message]")).to_contain_text("Golden query added.")
    expect(page.locator("tr[data-golden-query]")).to_have_count(1)
    form.locator("#id_query").fill("quantum entanglement of photons")
    form.locator("#id_expected_text").fill("none")
    form.get_by_role("button", name="Add query").click()
    expect(page.locator("tr[data-golden-query]")).to_have_count(2)
    expect(page.locator("#alerts [data-message]")).to_contain_text("Golden query added.")
    stored = list(golden.queries.order_by("pk").values_list("expected_ids", flat=True))
    assert stored == [[str(ata["gotcha"].pk), str(ata["escalation"].pk)], []]
    first, silent = page.locator("tr[data-golden-query]").all()
    expect(first).to_contain_text(shorts[0])
    expect(silent.locator("[data-silent]")).to_have_text("should stay silent")

    page.locator("#id_a").select_option("default")
    page.locator("#id_b").select_option("three")
    page.get_by_role("button", name="Run").click()
    results = page.locator("#golden-results")
    recall_row = results.locator('[data-metric="recall@k"]')
    expect(recall_row.locator("[data-metric-name]")).to_have_text("found in the top k (each profile's limit)")
    # The locale gotcha alone answers the query: the block hands over that one, half of the two expected.
    expect(recall_row.locator("[data-profile-a]")).to_have_text(re.compile(r"^\d+% in the top 5$"))
    expect(recall_row.locator("[data-profile-b]")).to_have_text(re.compile(r"^\d+% in the top 3$"))  # never "n/a"
    names = [name.strip() for name in results.locator("[data-metric-name]").all_inner_texts()]
    assert names[1:] == [
        "Handed over nothing unexpected",
        "Right memory first",
        "Stays silent when it should",
        "Silent only when it should be",
    ]
    assert "top1" not in results.inner_text() and "no_result" not in results.inner_text()
    expect(page.locator("#alerts [data-message]")).to_have_count(0)  # "Golden query added." is gone

    for side in ("a", "b"):  # each profile's header sits right over its numbers
        head = results.locator(f"[data-profile-head-{side}]").bounding_box()
        cell = recall_row.locator(f"[data-profile-{side}]").bounding_box()
        assert abs((head["x"] + head["width"]) - (cell["x"] + cell["width"])) < 1
    screenshot("compared")


@pytest.mark.parametrize("width", [1400, 1024])
def test_the_new_golden_set_form_lines_labels_up_with_their_fields(signed_in, live_server, width, screenshot):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/recall/golden/")
    form = page.locator("[data-golden-new]")
    boxes = []
    for name, label in (("name", "Name"), ("scope", "Scope"), ("description", "Description")):
        label_box = form.locator(f'label[for="id_{name}"]').bounding_box()
        field_box = form.locator(f"#id_{name}").bounding_box()
        expect(form.locator(f'label[for="id_{name}"]')).to_contain_text(label)
        assert abs(label_box["x"] - field_box["x"]) < 1 and label_box["y"] + label_box["height"] <= field_box["y"]
        assert inside(field_box, form.bounding_box())
        boxes.append(field_box)
    assert len({round(box["x"]) for box in boxes}) == 1 and len({round(box["width"]) for box in boxes}) == 1
    assert boxes[0]["y"] < boxes[1]["y"] < boxes[2]["y"]  # one under the other, in order
    assert inside(form.get_by_role("button", name="Create").bounding_box(), form.bounding_box())
    screenshot(f"form-{width}")

    form.locator("#id_name").fill("ops checks")
    form.locator("#id_scope").fill("ops-bot")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="ops checks")).to_contain_text("agent:ops-bot")
