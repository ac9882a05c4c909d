"""Store hygiene in a real browser: the Duplicates page (replay a threshold, approve a merge,
undo it) and the Clean-up wizard (preview, apply every step, undo the whole clean-up)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ingest import jsonl
from memoryui.models import Memory, MemoryEvent
from web import demo

pytestmark = pytest.mark.e2e


def _restore(text: str, **fields) -> Memory:
    memory = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "note", "text": text, **fields}))
    jsonl.insert_memories([memory], actor="test")
    return memory


def test_replaying_a_threshold_then_approving_a_merge_and_undoing_it(
    signed_in, live_server, indexes, settings, screenshot
):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.995
    page = signed_in
    keep = _restore("Prefers tabs.", kind="preference")
    twin = _restore("prefers  TABS.")
    fridays = _restore("Deploys go out on Fridays after the smoke tests.", kind="procedure")
    reworded = _restore("Deploys happen on Fridays, after the smoke tests pass.", kind="procedure")

    page.goto(f"{live_server.url}/duplicates/?scope=agent:main")
    clusters = page.locator("[data-cluster]")
    expect(clusters).to_have_count(1)
    expect(clusters.first).to_have_attribute("data-layer", "exact")

    events = MemoryEvent.objects.count()
    page.locator("#dup-threshold").evaluate(
        """(slider) => { slider.value = "0.98";
                         slider.dispatchEvent(new Event("input", {bubbles: true}));
                         slider.dispatchEvent(new Event("change", {bubbles: true})); }"""
    )
    expect(page.locator("[data-replay]")).to_contain_text("Replay at 0.98 (configured 0.995), nothing changed")
    expect(page).to_have_url(f"{live_server.url}/duplicates/?scope=agent%3Amain&threshold=0.98")
    formed = page.locator('[data-cluster][data-change="forms"]')
    expect(formed).to_have_attribute("data-layer", "semantic")
    expect(formed.locator(f'[data-member="{fridays.pk}"]')).to_be_visible()
    expect(formed.locator(f'[data-member="{reworded.pk}"]')).to_be_visible()
    expect(page.locator("#dup-threshold-value")).to_have_text("0.980")
    assert MemoryEvent.objects.count() == events
    screenshot("replay")

    exact = page.locator('[data-cluster][data-layer="exact"]')
    exact.locator(f'[data-member="{twin.pk}"] input[type="radio"]').check()
    exact.locator('[data-action="merge"]').click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text("Tombstones 1 memory and keeps “prefers TABS.”")
    dialog.locator('[data-action="confirm"]').click()
    expect(page.locator("#alerts")).to_contain_text("Merged 1 duplicate into “prefers TABS.”.")
    expect(page.locator('[data-cluster][data-layer="exact"]')).to_have_count(0)
    assert Memory.objects.get(pk=keep.pk).status == "tombstoned"
    screenshot("merged")

    page.locator('[data-action="undo-merge"]').click()
    expect(dialog).to_contain_text("Restores 1 memory it tombstoned.")
    dialog.locator('[data-action="confirm"]').click()
    expect(page.locator("#alerts")).to_contain_text("Undone: restored 1 memory, put back 1 as before.")
    expect(page.locator('[data-cluster][data-layer="exact"]')).to_have_count(1)
    assert Memory.objects.get(pk=keep.pk).status == "active"


def test_the_clean_up_wizard_previews_applies_every_step_and_undoes_it(signed_in, live_server, settings, tmp_path,
                                                                       screenshot):  # fmt: skip
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = None
    demo.seed_polluted()
    before = list(jsonl.export_lines(scope="agent:main", include_tombstoned=True))
    page = signed_in
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Clean-up").click()
    page.locator("#cleanup-scope").fill("agent:main")
    page.get_by_role("button", name="Open").click()
    expect(page.locator("[data-scope-stats]")).to_contain_text("81 of them notes")

    for number, step in enumerate(("snapshot", "internal", "extract", "demote"), 1):
        page.locator('[data-action="preview"]').click()
        preview = page.locator(f'[data-preview="{step}"]')
        expect(preview).to_contain_text("Preview, nothing written yet")
        if step == "internal":
            expect(preview.locator("[data-reasons]")).to_contain_text("internal prompt")
            screenshot("preview-internal")
        if step == "extract":
            expect(preview.locator("[data-examples]")).to_contain_text("用户的幸运数字是 88、66 和 99。")
        page.get_by_role("button", name=f"Apply step {number}").click()
        page.locator('#confirm-dialog [data-action="confirm"]').click()
        # Tasks run inline here: a step's request also unindexes every note it changes.
        expect(page.locator(f'[data-step="{step}"]')).to_have_attribute("data-state", "done", timeout=30_000)

    expect(page.locator("[data-cleanup-done]")).to_be_visible()
    expect(page.locator("[data-scope-stats]")).to_contain_text("3 of them notes")
    screenshot("done")
    lucky = Memory.objects.get(scope="agent:main", status="active", entity_key="lucky_number:88-66-99")
    assert lucky.kind == "entity"

    page.locator('[data-action="undo-all"]').click()
    page.locator('#confirm-dialog [data-action="confirm"]').click()
    expect(page.locator("#alerts")).to_contain_text("Undid the clean-up", timeout=30_000)
    expect(page.locator("[data-scope-stats]")).to_contain_text("81 of them notes")
    after = list(jsonl.export_lines(scope="agent:main", include_tombstoned=True))
    original = {line.split('"id": "', 1)[1][:36] for line in before}
    assert [line for line in after if line.split('"id": "', 1)[1][:36] in original] == before
