"""A golden query recall should stay silent on is asked for with its own box: a blank "Expected
memories" with the box unticked is refused next to the field, and ticking it saves the query as one
that should stay silent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from recall.models import GoldenQuery, GoldenSet

from .looks import at_both_widths

pytestmark = pytest.mark.e2e


def test_a_blank_expected_list_needs_the_box_and_the_box_saves_a_silent_query(signed_in, live_server):
    golden = GoldenSet.objects.create(name="silence", scope="agent:main")
    page = signed_in
    page.goto(f"{live_server.url}{golden.get_absolute_url()}")
    form = page.locator("[data-golden-add]")
    box = form.get_by_label("Should stay silent")
    expect(box).not_to_be_checked()

    form.locator("#id_query").fill("quantum entanglement of photons")
    form.get_by_role("button", name="Add query").click()
    expected = page.locator("[data-golden-add] [data-field=expected_text]")
    expect(expected).to_have_class("field has-error")
    expect(expected.locator(".error")).to_have_text(
        "Expected memories: list the memories recall should return, or tick “Should stay silent” if it should "
        "return nothing"
    )
    expect(page.locator("#id_query")).to_have_value("quantum entanglement of photons")  # what was typed stays
    assert not GoldenQuery.objects.exists()
    at_both_widths(page, "golden-silent-refused")

    page.locator("[data-golden-add]").get_by_label("Should stay silent").check()
    page.locator("[data-golden-add]").get_by_role("button", name="Add query").click()
    expect(page.locator("#alerts [data-message]")).to_contain_text("Golden query added.")
    row = page.locator("tr[data-golden-query]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("quantum entanglement of photons")
    expect(row.locator("[data-silent]")).to_have_text("should stay silent")
    assert list(GoldenQuery.objects.values_list("query", "expected_ids")) == [("quantum entanglement of photons", [])]
    expect(page.locator("[data-golden-add]").get_by_label("Should stay silent")).not_to_be_checked()
    at_both_widths(page, "golden-silent-saved")
