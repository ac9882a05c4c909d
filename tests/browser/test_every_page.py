"""A visual pass over every page on the demo store, at the two widths people use: 1400 px (a laptop)
and 1024 px (a small window or a tablet). Each page is saved as a screenshot to look at, and none
may scroll sideways: what is wider than the window (a long table) scrolls inside its own box.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ingest import ingestion
from ingest.tasks import enqueue_extraction
from memoryui.models import ApiToken, Memory, TaskRun
from recall.models import GoldenQuery, GoldenSet, RecallLogEntry, RecallTrace
from recall.pipeline import recall
from web import demo

from .conftest import SCREENSHOTS
from .looks import WIDTHS, sideways

pytestmark = pytest.mark.e2e
TOOL = "mcp__ata__article-list-query"


TRANSCRIPT = {
    "id": "session 2026-11-25/ops",
    "scope": "agent:ops-bot",
    "messages": [
        {"role": "user", "content": "My phone number is 186 0000 1234, and I prefer short answers."},
        {"role": "assistant", "content": "Noted."},
    ],
}


@pytest.fixture
def demo_store(indexes, alice, django_capture_on_commit_callbacks) -> dict[str, str]:
    """The store `make run` opens on, with one of everything a detail page shows."""
    with django_capture_on_commit_callbacks(execute=True):
        demo.seed_clean()
        demo.seed_polluted()
        transcript = ingestion.ingest(TRANSCRIPT).transcript
        run = enqueue_extraction(transcript, actor="user:alice", foreground=True)
    golden = GoldenSet.objects.create(name="ops basics", scope="agent:ops-bot")
    gotcha = Memory.objects.get(pk=demo.demo_id("ops:article-list-gotcha"))
    # Two recalls an agent made, traced and logged as the API records them: the traces to filter
    # and compare, the gotcha's recall log.
    traces = []
    for query, tools in (("how do I call article-list-query", [TOOL]), ("article-list-query page limit", [])):
        result = recall(query, scope="agent:ops-bot", tools=tools, selector_config=None)
        traces.append(RecallTrace.record(result, source="api", actor="token:ops agent"))
        RecallLogEntry.objects.record_result(result, source="api", trace=traces[-1])
    assert RecallLogEntry.objects.filter(memory_id=gotcha.pk).exists(), "the gotcha is in a block"
    GoldenQuery.objects.create(golden_set=golden, query="article-list-query page limit", expected_ids=[str(gotcha.pk)])
    GoldenQuery.objects.create(golden_set=golden, query="quantum entanglement", expected_ids=[])
    ApiToken.issue(user=alice, name="ops agent", scopes=["agent:ops-bot"])
    assert TaskRun.objects.filter(pk=run.pk).exists()
    return {
        "dashboard": "/",
        "memories": "/memories/?scope=agent:main&kind=note",
        "memory": gotcha.get_absolute_url(),  # with its recall log
        "memory-edit": f"{gotcha.get_absolute_url()}edit/",
        "memory-new": "/memories/new/",
        "import": "/memories/import/",
        "search": "/memories/?q=article-list-query&scope=agent:ops-bot",
        "playground": (
            "/recall/?q=how+do+I+call+article-list-query&scope=agent:ops-bot&tools=mcp__ata__article-list-query"
        ),
        "traces": "/recall/traces/?scope=",
        "traces-filtered": "/recall/traces/?q=article-list-query&source=api&outcome=answered&within=day",
        "traces-compared": f"/recall/traces/compare/?a={traces[0].pk}&b={traces[1].pk}",
        "trace": traces[0].get_absolute_url(),
        "scopes": "/scopes/?next=/memories/",
        "profiles": "/recall/profiles/",
        "profile-new": "/recall/profiles/new/",
        "golden-sets": "/recall/golden/",
        "golden-set": f"/recall/golden/{golden.pk}/",
        "duplicates": "/duplicates/?scope=agent:main",
        "cleanup": "/cleanup/?scope=agent:main&preview=1",
        "transcripts": "/transcripts/",
        "transcript": f"/transcripts/{transcript.pk}/",
        "tasks": "/tasks/",
        "task": f"/tasks/{run.pk}/",
        "tokens": "/tokens/",
        "admin": "/admin/",
        "admin-memories": "/admin/memoryui/memory/",
        "api-docs": "/api/docs/",
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_window_and_is_saved_for_a_look(signed_in, live_server, demo_store, width):
    page = signed_in
    page.set_default_timeout(15000)
    page.set_viewport_size({"width": width, "height": 900})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    overflowing = {}
    for name, url in demo_store.items():
        response = page.goto(f"{live_server.url}{url}")
        assert response.status == 200, f"{name}: {url} answered {response.status}"
        page.wait_for_load_state("networkidle")
        expect(page.locator("body")).not_to_contain_text("Traceback")
        page.screenshot(path=str(SCREENSHOTS / f"every-page-{width}-{name}.png"), full_page=True)
        if sticking_out := sideways(page):
            overflowing[name] = sticking_out
    # States a page is in after a click: the scope picker open (on the dashboard, with its chart),
    # a trace's numbers open.
    page.goto(f"{live_server.url}/")
    expect(page.locator("[data-activity-chart] canvas").first).to_be_visible()
    page.locator("[data-scope-picker] summary").click()
    expect(page.locator("[data-scope-option]").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / f"every-page-{width}-scope-picker-open.png"), full_page=True)
    if sticking_out := sideways(page):
        overflowing["scope-picker-open"] = sticking_out
    page.goto(f"{live_server.url}{demo_store['trace']}")
    page.locator("details[data-numbers] summary").first.click()
    page.screenshot(path=str(SCREENSHOTS / f"every-page-{width}-trace-numbers-open.png"), full_page=True)
    if sticking_out := sideways(page):
        overflowing["trace-numbers-open"] = sticking_out
    assert overflowing == {}, f"pages that scroll sideways at {width} px: {overflowing}"
