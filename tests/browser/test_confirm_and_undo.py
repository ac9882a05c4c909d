"""Every destructive or bulk action asks first, with counts, and is undone from where it was done:
the memory list's bulk tombstone, an extraction task, and the clean-up wizard's steps."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ingest import jsonl
from ingest.ingestion import ingest
from ingest.tasks import enqueue_extraction
from memoryui.models import Memory, TaskRun
from web import demo

pytestmark = pytest.mark.e2e


def _store(scope: str = "agent:main") -> list[str]:
    return sorted(jsonl.export_lines(scope=scope, include_tombstoned=True))


def test_a_bulk_tombstone_asks_first_then_offers_an_undo_that_restores_them(
    signed_in, live_server, make_memory, screenshot
):
    chatter = [make_memory(text, kind="note") for text in ("在吗?", "怎么回事", "搞完了吗")]
    keep = make_memory("The user prefers green tea.")
    before = _store()
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/memories/?kind=note")
    for memory in chatter:
        page.locator(f'#row-{memory.pk} input[name="ids"]').check()
    page.locator("#bulk-form").get_by_label("Reason to tombstone the selected memories").fill("chit-chat")
    dialog = page.locator("#confirm-dialog")

    page.locator("#bulk-form").get_by_role("button", name="Tombstone", exact=True).click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Tombstone 3 memories (reason: “chit-chat”).")
    screenshot("asked")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert _store() == before

    page.locator("#bulk-form").get_by_role("button", name="Tombstone", exact=True).click()
    dialog.get_by_role("button", name="Tombstone 3 memories").click()
    notice = page.locator("#results [data-notice]")
    expect(notice).to_contain_text("Tombstoned 3 memories.")
    assert Memory.objects.filter(status="tombstoned").count() == 3
    screenshot("tombstoned")

    notice.get_by_role("link", name="Undo").click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Restores 3 memories it tombstoned.")
    dialog.locator('[data-action="confirm"]').click()
    expect(page.locator("#alerts [data-message]")).to_contain_text("Undone: restored 3 memories.")
    expect(page).to_have_url(f"{live_server.url}/memories/?kind=note")
    expect(page.locator("tr[id^=row-]")).to_have_count(3)
    assert _store() == before
    assert Memory.objects.get(pk=keep.pk).status == "active"


def test_the_extract_task_offers_an_undo_that_tombstones_what_it_added(
    signed_in, live_server, django_capture_on_commit_callbacks, screenshot
):
    messages = []
    for text in ("我的幸运数字是88", "/remember the build server lives in rack R12", "I prefer terse answers", "在吗?"):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    transcript = ingest({"scope": "agent:main", "messages": messages}).transcript
    with django_capture_on_commit_callbacks(execute=True):
        run = enqueue_extraction(transcript, actor="user:alice", foreground=True)
    added = [item["id"] for item in run.result["added"]]
    assert len(added) == 3
    page = signed_in
    page.set_viewport_size({"width": 1024, "height": 900})
    dialog = page.locator("#confirm-dialog")

    page.goto(f"{live_server.url}/tasks/")
    row = page.locator(f'tr[data-task="{run.pk}"]')
    expect(row.get_by_role("link", name="Undo…")).to_be_visible()
    row.locator(f'a[href="{run.get_absolute_url()}"]').click()

    undo = page.locator('[data-action="undo"]')
    expect(undo).to_have_text("Undo this task…")
    undo.click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Tombstones 3 memories it added.")
    screenshot("asked")
    dialog.locator('[data-action="confirm"]').click()

    expect(page.locator("#alerts [data-message]")).to_contain_text("Undone: tombstoned 3 memories it had added.")
    expect(page.locator("[data-undo-state]")).to_have_attribute("data-undo-state", "undone")
    assert set(Memory.objects.filter(pk__in=added).values_list("status", flat=True)) == {"tombstoned"}
    screenshot("undone")
    page.goto(f"{live_server.url}/tasks/")
    expect(page.locator(f'tr[data-task="{run.pk}"] [data-undone]')).to_have_text("undone")


def test_clean_up_steps_and_their_undo_ask_first(signed_in, live_server, settings, tmp_path, screenshot):
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = None
    demo.seed_polluted()
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    dialog = page.locator("#confirm-dialog")
    page.goto(f"{live_server.url}/cleanup/?scope=agent:main")

    # Step 1: the preview speaks of what it would do; applying asks, and then the step says what it did.
    page.locator('[data-action="preview"]').click()
    summary = page.locator("[data-preview-summary]")
    expect(summary).to_contain_text("Preview, nothing written yet: Would back up 81 memories (tombstoned ones")
    screenshot("preview-backup")
    page.get_by_role("button", name="Apply step 1").click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Backs up 81 memories")
    dialog.locator('[data-action="confirm"]').click()
    snapshot = page.locator('[data-step="snapshot"]')
    expect(snapshot).to_have_attribute("data-state", "done")
    expect(snapshot.locator("[data-step-result]")).to_contain_text("Backed up 81 memories")
    expect(snapshot.locator("[data-step-task]")).to_contain_text("task: applied just now")

    # Step 2 asks with its count; Cancel leaves the store as it was.
    before = _store()
    page.locator('[data-action="preview"]').click()
    page.get_by_role("button", name="Apply step 2").click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Tombstones 74 notes")
    screenshot("apply-asked")
    dialog.get_by_role("button", name="Cancel").click()
    assert _store() == before and not TaskRun.objects.filter(params__step="internal").exists()

    page.get_by_role("button", name="Apply step 2").click()
    dialog.locator('[data-action="confirm"]').click()
    # A step tombstones and unindexes every note in the request here (tasks run inline): give it time.
    expect(page.locator('[data-step="internal"]')).to_have_attribute("data-state", "done", timeout=30_000)
    expect(page.locator("[data-scope-stats]")).to_contain_text("7 of them notes")

    # Undoing asks too, with what it will put back, and then restores exactly.
    page.locator('[data-action="undo-last"]').click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Restores 74 memories it tombstoned.")
    screenshot("undo-asked")
    dialog.locator('[data-action="confirm"]').click()
    expect(page.locator("#alerts [data-message]")).to_contain_text(
        "Undid step 2: restored 74 memories.", timeout=30_000
    )
    expect(page.locator('[data-step="internal"]')).to_have_attribute("data-state", "todo")
    expect(page.locator("[data-scope-stats]")).to_contain_text("81 of them notes")
    originals = {line.split('"id": "', 1)[1][:36] for line in before}
    assert [line for line in _store() if line.split('"id": "', 1)[1][:36] in originals] == before
