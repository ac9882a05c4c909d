"""The profiles list says one thing about what each profile was tuned for: the header, the default
profile's row and its column agree."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from recall.models import DEFAULT_PROFILE, RecallProfile
from searchindex.defaults import CALIBRATED
from searchindex.embeddings import get_embedder

from .looks import at_both_widths

pytestmark = pytest.mark.e2e


def test_each_profile_says_what_it_was_tuned_for_without_contradicting_the_page(signed_in, live_server):
    RecallProfile.objects.resolve(DEFAULT_PROFILE)
    RecallProfile.objects.create(name="strict", description="Fewer, surer memories.", knobs={"weak_margin": 0.02})
    RecallProfile.objects.create(name="mine", knobs={"weak_margin": 0.01}, embedder=get_embedder().name)
    RecallProfile.objects.create(name="old", knobs={"weak_margin": 0.01}, embedder="openai:text-embedding-3-small")
    page = signed_in
    page.goto(f"{live_server.url}/recall/profiles/")
    measured = ", ".join(sorted(CALIBRATED))

    default = page.locator(f'tr[data-profile="{DEFAULT_PROFILE}"]')
    expect(default.locator("[data-tuned-for]")).to_have_attribute("data-tuned-for", "built-in")
    expect(default.locator("[data-tuned-for]")).to_contain_text(f"{measured}: the built-in defaults")
    expect(default).not_to_contain_text("not calibrated")
    expect(page.locator("main > p").first).to_contain_text(f"were measured for {measured}")

    strict = page.locator('tr[data-profile="strict"] [data-tuned-for]')
    expect(strict).to_have_attribute("data-tuned-for", "by hand")
    expect(strict).to_contain_text("not calibrated: knobs set by hand")

    expect(page.locator('tr[data-profile="mine"] [data-tuned-for]')).to_contain_text("calibrated on golden queries")
    expect(page.locator('tr[data-profile="mine"] [data-embedder-mismatch]')).to_have_count(0)
    expect(page.locator('tr[data-profile="old"] [data-embedder-mismatch]')).to_contain_text("Calibrate it again")
    at_both_widths(page, "profiles-list")
