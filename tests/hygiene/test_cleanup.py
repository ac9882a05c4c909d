"""The one-shot clean-up of the polluted legacy store (`seed_demo --polluted`): each step's dry
run, the applied result docs/architecture.md "Raw transcript stored as memory" describes, and an
undo that gives back the original 85 exactly."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from hygiene import cleanup, undo
from ingest import extraction, jsonl
from ingest.extraction.guards import internal_fingerprint
from memoryui.models import Memory, MemoryEvent
from web import demo

pytestmark = pytest.mark.django_db

MAIN = "agent:main"


@pytest.fixture
def polluted(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    assert demo.seed_polluted() == 85
    return Memory.objects.filter(scope=MAIN)


def _full_export() -> list[dict]:
    return [json.loads(line) for line in jsonl.export_lines(include_tombstoned=True)]


def test_the_dry_run_says_what_each_step_would_do_and_writes_nothing(polluted):
    events = MemoryEvent.objects.count()
    before = _full_export()

    reports = {r.step: r for r in cleanup.run_all(MAIN, dry_run=True, actor="alice")}

    assert list(reports) == list(cleanup.STEPS)
    assert reports["snapshot"].counts == {"backed_up": 81}
    assert not Path(reports["snapshot"].backup).exists()
    internal = reports["internal"]
    assert internal.counts["tombstone"] > 60
    reasons = dict(internal.reasons())
    assert reasons["internal prompt"] >= 9  # ask_user x5, multi-hop x2, depth-3 x2, banners, repair
    assert {"not knowledge: question", "not knowledge: nudge", "not knowledge: complaint"} <= set(reasons)
    extracted = {fact["text"] for action in reports["extract"].actions for fact in action.facts}
    assert "用户的幸运数字是 88、66 和 99。" in extracted
    # The later steps are computed as if the earlier ones had been applied: no note twice.
    ids = [a.memory_id for step in ("internal", "extract", "demote") for a in reports[step].actions]
    assert len(ids) == len(set(ids)) == 81
    assert MemoryEvent.objects.count() == events
    assert _full_export() == before


def test_applying_every_step_leaves_only_typed_knowledge_and_uncertain_leftovers(polluted):
    stats_before = Memory.objects.filter(scope=MAIN).stats()

    reports = {r.step: r for r in cleanup.run_all(MAIN, dry_run=False, actor="alice")}

    active = list(Memory.objects.active().filter(scope=MAIN))
    for memory in active:
        assert internal_fingerprint(memory.text) is None, memory.text
        assert extraction.not_knowledge(memory.text, None) is None, memory.text  # no chit-chat, no question
    texts = [m.text for m in active]
    for repeated in demo.POLLUTED_DUPLICATES:
        assert repeated not in texts
    by_text = {m.text: m for m in active}
    lucky = by_text["用户的幸运数字是 88、66 和 99。"]
    assert (lucky.kind, lucky.tier, lucky.entity_key, lucky.source) == (
        "entity", "core", "lucky_number:88-66-99", "cleanup",
    )  # fmt: skip
    assert by_text["用户的名字是东升。"].kind == "entity"
    assert by_text["Never add Co-Authored-By to commits."].kind == "preference"
    assert by_text["用户的团队在 IDC 跑了 1000 张 RTX 4070。"].kind == "fact"
    for note in (m for m in active if m.kind == "note"):
        assert (note.tier, note.importance) == ("peripheral", cleanup.DEMOTED_IMPORTANCE)
        assert note.expires_at is not None
    stats_after = Memory.objects.filter(scope=MAIN).stats()
    assert stats_after["by_kind"]["note"] < stats_before["by_kind"]["note"] == 81
    assert stats_after["tombstoned"] == 78
    assert Memory.objects.active().filter(scope="agent:test-w").count() == 4  # another scope: untouched
    backup = Path(reports["snapshot"].backup)
    assert len(backup.read_text(encoding="utf-8").splitlines()) == 81


def test_undoing_the_steps_gives_back_the_original_85_exactly(polluted):
    before = _full_export()
    reports = cleanup.run_all(MAIN, dry_run=False, actor="alice")
    batches = [r.batch for r in reports if r.batch]
    assert len(batches) == 3  # the snapshot changes no memory

    for batch in reversed(batches):
        undo.undo_batch(batch, actor="alice")

    after = _full_export()
    original_ids = {record["id"] for record in before}
    assert [r for r in after if r["id"] in original_ids] == before
    extracted = [r for r in after if r["id"] not in original_ids]
    assert len(extracted) == 4
    assert all(r["status"] == "tombstoned" for r in extracted)
    assert Memory.objects.active().count() == 85


def test_a_step_run_again_finds_nothing_left_to_do(polluted):
    cleanup.run_all(MAIN, dry_run=False, actor="alice")

    for step in ("internal", "extract", "demote"):
        report = cleanup.run_step(MAIN, step, dry_run=False, actor="alice")
        assert report.actions == [] and report.batch is None, step


def test_typed_memories_and_pinned_notes_are_left_alone(polluted, make_memory):
    typed = make_memory("The user prefers concise answers.", kind="preference", scope=MAIN)
    pinned = Memory.objects.get(text="怎么回事", scope=MAIN, pk=Memory.objects.filter(text="怎么回事").first().pk)
    pinned.pin(actor="alice")

    cleanup.run_all(MAIN, dry_run=False, actor="alice")

    typed.refresh_from_db()
    pinned.refresh_from_db()
    assert typed.status == pinned.status == "active"
    assert pinned.kind == "note" and pinned.tier == "working"


def test_a_bad_step_or_l1_mode_names_the_field():
    with pytest.raises(cleanup.rules.MemoryValidationError) as error:
        cleanup.run_step(MAIN, "vacuum", dry_run=True, actor="alice")
    assert "step" in error.value.errors
    with pytest.raises(cleanup.rules.MemoryValidationError) as error:
        cleanup.run_step(MAIN, "extract", dry_run=True, actor="alice", l1="sometimes")
    assert "l1" in error.value.errors


def test_the_extract_step_on_its_own_leaves_internal_prompts_alone(polluted):
    """The repair prompt holds a sentence L0 would take ("不要重复之前的回答"): it is an internal
    prompt all the same, and only the internal step decides about it."""
    report = cleanup.run_step(MAIN, "extract", dry_run=False, actor="alice")

    assert not any(note.text.startswith("[repair]") for note in Memory.objects.filter(pk__in=[
        action.memory_id for action in report.actions
    ]))  # fmt: skip
    assert not Memory.objects.filter(text__contains="不要重复之前的回答", kind="preference").exists()
    assert report.counts["extract"] == 4


def test_on_several_hosts_the_backup_names_the_host_that_wrote_it(polluted, settings, tmp_path):
    settings.MEMORYUI_MULTI_HOST = True

    written = cleanup.run_all(MAIN, dry_run=False, actor="alice")[0]
    previewed = cleanup.run_all(MAIN, dry_run=True, actor="alice")[0]

    host, _, path = written.backup.partition(":")
    assert host == socket.gethostname()
    assert Path(path).parent == tmp_path / "backups"
    assert len(Path(path).read_text(encoding="utf-8").splitlines()) == 81
    assert Path(previewed.backup).parent == tmp_path / "backups"  # a preview names the folder only
