"""The Duplicates page as a person uses it: what links a cluster is said honestly (identical
texts are the same text, a cluster of copies and a similar text says both and proposes a copy),
rows tell copies apart, a pair kept apart is listed once, and a merge asks first, names what it
kept and undoes exactly."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ingest import jsonl
from memoryui.models import Memory
from web import demo

pytestmark = pytest.mark.e2e

ASK_PROMPT = "用 ask_user 工具问我几个问题，收集一下我的偏好，然后帮我记下来"  # five copies in the demo
HELLO = "你好，先介绍一下你自己，你能做什么"


def _restore(text: str, **fields) -> Memory:
    memory = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "note", "text": text, **fields}))
    jsonl.insert_memories([memory], actor="test")
    return Memory.objects.get(pk=memory.pk)


def _store() -> list[dict]:
    return sorted(jsonl.export_lines(scope="agent:main", include_tombstoned=True))


def test_the_polluted_demo_at_a_loose_threshold_says_what_links_each_cluster_and_proposes_a_copy(
    signed_in, live_server, indexes, settings, screenshot
):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.985
    demo.seed_polluted()
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})

    page.goto(f"{live_server.url}/duplicates/?scope=agent:main&threshold=0.928")

    hello = page.locator("[data-cluster]", has=page.locator("[data-member] a", has_text=HELLO))
    expect(hello.locator("[data-cluster-label]")).to_have_text("same text + similar meaning")
    expect(hello).to_have_attribute("data-layers", "exact semantic")
    proposed = hello.locator("tr[data-member]").first
    expect(proposed.locator('input[type="radio"]')).to_be_checked()
    expect(proposed.locator(".cell-text a")).to_have_text(ASK_PROMPT)  # a copy, not the text hung on them
    expect(hello.locator("[data-linked-by]", has_text="same text")).to_have_count(4)
    hello_row = hello.locator("tr[data-member]", has=page.locator("a", has_text=HELLO))
    expect(hello_row.locator("[data-linked-by]")).to_contain_text("similar meaning 0.9")
    # Identical texts are never linked by "similar meaning 1.000".
    expect(page.locator("[data-linked-by]", has_text="similar meaning 1.000")).to_have_count(0)
    hello.scroll_into_view_if_needed()
    screenshot("loose-threshold")

    # The prompt's five copies and its "3 questions" variant are one pair kept apart, listed once.
    kept = page.locator("[data-kept-apart] tr[data-pair]")
    expect(kept.filter(has_text="用ask_user问我3个问题")).to_have_count(1)
    pair = kept.filter(has_text="用ask_user问我3个问题")
    expect(pair.locator("[data-copies]")).to_have_text(["×2 copies", "×5 copies"])
    expect(pair).to_contain_text("the numbers differ (3)")
    page.locator("[data-kept-apart]").scroll_into_view_if_needed()
    screenshot("kept-apart")


def test_identical_copies_show_as_the_same_text_with_their_own_ids_and_dates(
    signed_in, live_server, settings, screenshot
):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.985
    copies = [
        _restore("在吗?", created_at=f"2026-03-0{day}T09:1{day}:00Z", importance=0.2 + day / 10) for day in (1, 2, 3)
    ]
    page = signed_in
    page.set_viewport_size({"width": 1024, "height": 900})

    page.goto(f"{live_server.url}/duplicates/?scope=agent:main")

    cluster = page.locator("[data-cluster]")
    expect(cluster).to_have_count(1)
    expect(cluster.locator("[data-cluster-label]")).to_have_text("same text")
    expect(cluster.locator("[data-linked-by]")).to_have_text(["proposed canonical", "same text", "same text"])
    # Each copy by its own id, the most important first.
    expect(cluster.locator("[data-member-id]")).to_have_text([str(m.pk)[:8] for m in reversed(copies)])
    for memory in copies:
        link = cluster.locator(f'[data-member="{memory.pk}"] [data-member-id]')
        expect(link).to_have_attribute("href", f"/memories/{memory.pk}/")
    created = cluster.locator("[data-member-created] time")
    expect(created).to_have_text(["3 Mar 2026, 09:13", "2 Mar 2026, 09:12", "1 Mar 2026, 09:11"])
    expect(created.first).to_have_attribute("title", "2026-03-03 09:13:00 UTC")  # the exact time on hover
    screenshot("copies")


def test_a_merge_asks_first_then_names_the_kept_memory_and_undo_restores_exactly(
    signed_in, live_server, settings, screenshot
):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.985
    kept = _restore("Prefers tabs over spaces.", kind="preference", access_count=2)
    others = [_restore("prefers tabs over  SPACES."), _restore("Prefers tabs over spaces")]
    before = _store()
    page = signed_in
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/duplicates/?scope=agent:main")
    cluster = page.locator(f'[data-cluster]:has([data-member="{kept.pk}"])')
    dialog = page.locator("#confirm-dialog")

    # Asked first, with the counts; Cancel changes nothing.
    cluster.locator('[data-action="merge"]').click()
    expect(dialog).to_be_visible()
    expect(dialog.locator("[data-consequences]")).to_contain_text(
        f"Tombstones 2 memories and keeps “Prefers tabs over spaces.” ({str(kept.pk)[:8]})."
    )
    screenshot("asked")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert _store() == before
    expect(cluster).to_be_visible()

    # Confirmed: merged, and the message names the kept memory, links to it and offers Undo.
    cluster.locator('[data-action="merge"]').click()
    dialog.get_by_role("button", name="Merge 2 duplicates").click()
    message = page.locator("#alerts [data-message]")
    expect(message).to_contain_text("Merged 2 duplicates into “Prefers tabs over spaces.”.")
    expect(message.get_by_role("link", name="“Prefers tabs over spaces.”")).to_have_attribute(
        "href", f"/memories/{kept.pk}/"
    )
    expect(page.locator("[data-cluster]")).to_have_count(0)
    assert [Memory.objects.get(pk=m.pk).status for m in others] == ["tombstoned", "tombstoned"]
    screenshot("merged")

    # Undo right there: it asks too, then puts every memory back exactly.
    message.get_by_role("link", name="Undo").click()
    expect(dialog.locator("[data-consequences]")).to_contain_text("Restores 2 memories it tombstoned.")
    expect(dialog.locator("[data-consequences]")).to_contain_text("Puts back the values 1 memory had before it")
    screenshot("undo-asked")
    dialog.locator('[data-action="confirm"]').click()
    expect(page.locator("#alerts [data-message]")).to_contain_text("Undone: restored 2 memories, put back 1 as before.")
    expect(page.locator("[data-cluster]")).to_have_count(1)
    after = _store()
    originals = {str(m.pk) for m in (kept, *others)}
    assert [line for line in after if line.split('"id": "', 1)[1][:36] in originals] == before
