"""Importing an agent's memory store from the browser: upload, see the dry run, import, undo offered;
with htmx and without JavaScript alike."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memoryui.models import Memory
from tests.ingest.formats import FIXTURES

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("javascript", [True, False], ids=["htmx", "no-js"])
def test_an_uploaded_context_file_is_previewed_then_imported(signed_in, live_server, screenshot, javascript):
    page = signed_in
    if not javascript:
        page.context.route("**/*.js", lambda route: route.abort())
    page.goto(f"{live_server.url}/memories/")
    page.locator(".page-actions [data-action=import]").click()
    page.wait_for_url("**/memories/import/")
    page.get_by_label("File").set_input_files(str(FIXTURES / "GEMINI.md"))
    page.get_by_label("Scope").fill("user:42")
    with page.expect_response("**/memories/import/") as answer:
        page.get_by_role("button", name="Preview").click()
    # with JavaScript htmx posts the file and swaps the panel; without, the form posts the page
    assert (answer.value.request.headers.get("hx-request") == "true") is javascript

    preview = page.locator("[data-import-preview]")
    expect(preview).to_contain_text("Would import 4 memories")
    expect(preview.locator("tr[data-action='new']")).to_have_count(4)
    expect(preview).to_contain_text("My phone number is 186 0000 1234.")
    assert Memory.objects.count() == 0
    screenshot("preview")

    preview.get_by_role("button", name="Import 4 memories").click()
    page.wait_for_url("**/memories/?source=import*")
    expect(page.locator("#alerts")).to_contain_text("Imported 4 memories")
    expect(page.locator("#alerts [data-action='undo']")).to_be_visible()
    assert set(Memory.objects.values_list("scope", "kind").distinct()) == {("user:42", "remember")}
    assert Memory.objects.count() == 4
