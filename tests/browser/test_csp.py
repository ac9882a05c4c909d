"""Every page under the Content-Security-Policy, in a real browser: nothing refused, htmx still at work.

`csp_violations` (tests/browser/conftest.py) collects what Chromium refused; every browser test
also fails at teardown if it is not empty.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ingest.ingestion import ingest
from memoryui.models import TaskRun
from recall.models import GoldenSet

pytestmark = pytest.mark.e2e


@pytest.fixture
def store(make_memory):
    """One of each thing a page shows: a memory, a transcript, a finished task, a golden set."""
    memory = make_memory("Releases go out on Thursdays after 14:00.", kind="procedure")
    make_memory("Runs 1000 RTX 4070s in an IDC.", kind="fact")
    transcript = ingest(
        {
            "scope": "agent:main",
            "title": "onboarding chat",
            "messages": [{"role": "user", "content": "我叫东升"}, {"role": "assistant", "content": "记住了。"}],
        }
    ).transcript
    run = TaskRun.objects.create(
        kind="extract", actor="user:alice", status="succeeded", progress_done=1, progress_total=4, counts={"added": 1}
    )
    golden = GoldenSet.objects.create(name="smoke", scope="agent:main")
    return {"memory": memory, "transcript": transcript, "run": run, "golden": golden}


def test_every_page_renders_under_the_policy_with_nothing_refused(signed_in, live_server, store, csp_violations):
    page = signed_in
    memory = store["memory"]
    paths = [
        "/",
        "/memories/",
        "/memories/new/",
        "/memories/import/",
        f"/memories/{memory.pk}/",
        f"/memories/{memory.pk}/edit/",
        "/recall/",
        "/recall/traces/",
        "/recall/profiles/",
        "/recall/profiles/new/",
        "/recall/golden/",
        f"/recall/golden/{store['golden'].pk}/",
        "/transcripts/",
        f"/transcripts/{store['transcript'].pk}/",
        "/tasks/",
        f"/tasks/{store['run'].pk}/",
        "/duplicates/",
        "/cleanup/",
        "/tokens/",
        "/admin/",
        "/admin/memoryui/memory/",
        f"/admin/memoryui/memory/{memory.pk}/change/",
        "/accounts/login/",
    ]
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        assert csp_violations == [], path


def test_swagger_ui_renders_with_its_nonce_and_nothing_refused(signed_in, live_server, csp_violations):
    page = signed_in
    response = page.goto(f"{live_server.url}/api/docs/")

    assert re.search(r"script-src 'self' 'nonce-[^']+'", response.headers["content-security-policy"])
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("memoryui API")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()  # the schema was fetched and drawn
    page.wait_for_load_state("networkidle")
    assert csp_violations == []


def test_htmx_filters_and_typing_still_update_the_list_under_the_policy(signed_in, live_server, store, csp_violations):
    page = signed_in
    page.goto(f"{live_server.url}/memories/")
    searches = []
    page.on("request", lambda request: searches.append(request.url) if "q=thursdays" in request.url else None)

    page.locator("#id_kind").select_option("fact")
    expect(page).to_have_url(f"{live_server.url}/memories/?kind=fact")
    expect(page.locator("#results tbody tr")).to_have_count(1)
    expect(page.locator("#results")).to_contain_text("RTX 4070s")

    page.locator("#id_kind").select_option("")
    page.locator("#id_match").select_option("text")
    page.locator("#id_q").press_sequentially("rtx")  # typing asks after a pause (hx-trigger keyup … delay)
    expect(page).to_have_url(f"{live_server.url}/memories/?q=rtx&match=text")
    expect(page.locator("#results tbody tr")).to_have_count(1)

    page.locator("#id_q").fill("thursdays")
    page.locator("#id_q").press("Enter")
    expect(page).to_have_url(f"{live_server.url}/memories/?q=thursdays&match=text")
    expect(page.locator("#results tbody tr")).to_have_count(1)
    expect(page.locator("#results")).to_contain_text("Releases go out on Thursdays")
    asked = len(searches)
    page.wait_for_timeout(800)  # past the typing delay: Enter's keyup must not ask again
    assert len(searches) == asked, searches
    assert csp_violations == []


def test_values_set_by_the_static_script_instead_of_inline_code(signed_in, live_server, store, csp_violations):
    page = signed_in
    page.goto(f"{live_server.url}/tasks/{store['run'].pk}/")
    bar = page.locator("#task-progress .progress-bar")
    assert bar.bounding_box()["width"] == pytest.approx(
        page.locator("#task-progress .progress").bounding_box()["width"] / 4, abs=1
    )

    page.goto(f"{live_server.url}/duplicates/?scope=agent:main")
    page.locator("#dup-threshold").fill("0.95")
    expect(page.locator("#dup-threshold-value")).to_have_text("0.950")
    assert csp_violations == []
