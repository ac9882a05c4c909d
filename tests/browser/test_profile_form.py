"""The profile form: padded inside its card, each knob labelled in words with its name still there."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from recall.models import RecallProfile

pytestmark = pytest.mark.e2e


def test_knobs_are_labelled_in_words_with_their_names_inside_a_padded_card(signed_in, live_server, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/recall/profiles/new/")
    form = page.locator("form.profile-form")
    card = form.bounding_box()
    for field in ("#id_name", "#id_cc_vector_weight", "#id_durable_markers"):
        box = form.locator(field).bounding_box()
        assert box["x"] - card["x"] >= 12 and (card["x"] + card["width"]) - (box["x"] + box["width"]) >= 12, field
    label = form.locator('label[for="id_cc_vector_weight"]')
    expect(label).to_contain_text("Vector weight (cc)")
    expect(label.locator(".knob-name")).to_have_text("cc_vector_weight")  # tuned by name: still shown
    expect(form.locator('[data-field="cc_vector_weight"] .help')).to_contain_text("BM25 gets 1 minus it")
    expect(form.get_by_role("group", name="Relevance floor")).to_contain_text("strong_margin")
    screenshot("form")

    form.locator("#id_name").fill("strict")
    form.locator("#id_strong_margin").fill("0.1")
    form.locator("#id_rrf_k").fill("-3")
    form.get_by_role("button", name="Save profile").click()
    expect(form.locator('[data-field="rrf_k"] .error')).to_contain_text("RRF k: must be between")
    form.locator("#id_rrf_k").fill("")
    form.get_by_role("button", name="Save profile").click()
    expect(page.locator('[data-profile="strict"]')).to_contain_text("strong_margin")
    assert RecallProfile.objects.get(name="strict").knobs == {"strong_margin": 0.1}
