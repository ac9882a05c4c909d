"""The memory store's domain methods: write path with dedup, history events, stats."""

from __future__ import annotations

import pytest

from memoryui import rules
from memoryui.models import ConflictError, Memory, MemoryEvent

pytestmark = pytest.mark.django_db


def test_write_normalizes_a_bare_scope_so_one_agent_is_never_split(make_memory):
    a = make_memory("The user's name is Dongsheng", scope="main", kind="entity")
    b = make_memory("Deploys go out on Fridays", scope="agent:main", kind="fact")
    assert a.scope == b.scope == "agent:main"


def test_write_derives_tier_importance_and_pinning_from_kind(make_memory):
    entity = make_memory("Phone: 18600000000", kind="entity", entity_key="phone:18600000000", confidence=0.9)
    note = make_memory("something vague", kind="note", confidence=0.9)
    assert (entity.tier, entity.pinned) == ("core", True)
    assert entity.importance >= 0.85
    assert (note.tier, note.pinned) == ("peripheral", False)
    assert note.importance <= 0.3
    assert note.expires_at is not None


def test_exact_duplicate_is_merged_not_inserted(make_memory):
    first = make_memory("I prefer terse answers.")
    second = make_memory("  i PREFER terse answers。")
    assert second.pk == first.pk
    assert Memory.objects.count() == 1
    first.refresh_from_db()
    assert first.access_count == 1
    assert first.accessed_at is not None
    assert list(first.events.values_list("action", flat=True)) == ["merged", "created"]


def test_duplicate_in_another_scope_is_a_separate_memory(make_memory):
    make_memory("I prefer terse answers.", scope="agent:main")
    make_memory("I prefer terse answers.", scope="agent:other")
    assert Memory.objects.count() == 2


def test_same_entity_key_merges_and_keeps_richer_text(make_memory):
    first = make_memory("Lucky number is 88", kind="entity", entity_key="lucky_number:88")
    merged = make_memory("Lucky number is 88, it brings luck", kind="entity", entity_key="Lucky_Number:88")
    assert merged.pk == first.pk
    merged.refresh_from_db()
    assert merged.text == "Lucky number is 88, it brings luck"
    event = merged.events.get(action="merged")
    assert event.reason == "duplicate by entity key"
    assert event.before["text"] == "Lucky number is 88"


def test_tombstoned_memory_does_not_absorb_new_writes(make_memory):
    old = make_memory("Deploys go out on Fridays", kind="fact")
    old.tombstone("outdated", actor="test")
    new = make_memory("Deploys go out on Fridays", kind="fact")
    assert new.pk != old.pk


def test_pin_unpin_tombstone_restore_each_write_an_event_with_before_and_after(make_memory):
    memory = make_memory("Deploys go out on Fridays", kind="fact")
    assert memory.pin(actor="user:alice")
    assert not memory.pin(actor="user:alice")  # already pinned: no event
    assert memory.unpin(actor="user:alice")
    assert memory.tombstone("wrong", actor="user:alice")
    assert memory.restore(actor="user:alice")
    events = list(memory.events.order_by("created_at", "id"))
    assert [e.action for e in events] == ["created", "pinned", "unpinned", "tombstoned", "restored"]
    tombstoned = events[3]
    assert tombstoned.before["status"] == "active"
    assert tombstoned.after["status"] == "tombstoned"
    assert tombstoned.reason == "wrong"
    assert all(e.actor for e in events)


def test_tombstone_requires_a_reason(make_memory):
    memory = make_memory("Deploys go out on Fridays", kind="fact")
    with pytest.raises(rules.MemoryValidationError) as excinfo:
        memory.tombstone("  ", actor="test")
    assert "reason" in excinfo.value.errors
    memory.refresh_from_db()
    assert memory.status == "active"


def test_restore_refuses_when_entity_key_is_taken_by_an_active_memory(make_memory):
    old = make_memory("Phone 18600000000", kind="entity", entity_key="phone:18600000000")
    old.tombstone("replaced", actor="test")
    make_memory("Phone is 18600000000 (work)", kind="entity", entity_key="phone:18600000000")
    with pytest.raises(ConflictError, match="entity_key phone:18600000000"):
        old.restore(actor="test")
    old.refresh_from_db()
    assert old.status == "tombstoned"


def test_edit_validates_records_only_changed_fields_and_rehashes(make_memory):
    memory = make_memory("Deploys go out on Fridays", kind="fact")
    assert memory.edit(actor="user:alice", text="Deploys go out on Thursdays", importance=memory.importance)
    memory.refresh_from_db()
    assert memory.content_hash == rules.content_hash("Deploys go out on Thursdays")
    event = memory.events.get(action="edited")
    assert set(event.before) == {"text"}
    with pytest.raises(rules.MemoryValidationError):
        memory.edit(actor="user:alice", kind="bogus")
    with pytest.raises(rules.MemoryValidationError):
        memory.edit(actor="user:alice", status="tombstoned")  # status changes go through tombstone()


def test_moving_to_a_lower_tier_is_recorded_as_demoted(make_memory):
    memory = make_memory("Deploys go out on Fridays", kind="fact")
    memory.set_tier("peripheral", actor="cleanup")
    memory.set_tier("core", actor="user:alice")
    assert list(memory.events.order_by("id").values_list("action", flat=True)) == ["created", "demoted", "edited"]


def test_events_are_append_only(make_memory):
    event = make_memory().events.get()
    event.reason = "rewritten"
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    assert MemoryEvent.objects.get(pk=event.pk).reason == ""


def test_stats_always_hold_every_kind_and_tier(make_memory):
    make_memory("Name is Dongsheng", kind="entity", entity_key="name:dongsheng")
    make_memory("Fridays", kind="fact", scope="agent:other").tombstone("no", actor="test")
    stats = Memory.objects.stats()
    assert stats["total"] == 1
    assert set(stats["by_kind"]) == set(rules.KINDS)
    assert set(stats["by_tier"]) == set(rules.TIERS)
    assert stats["by_kind"]["entity"] == 1
    assert stats["by_kind"]["note"] == 0
    assert stats["by_scope"] == {"agent:main": 1}
    assert (stats["pinned"], stats["tombstoned"]) == (1, 1)
    assert Memory.objects.filter(scope="agent:other").stats()["total"] == 0


def test_apply_action_runs_each_bulk_action_by_name(make_memory):
    memory = make_memory("Deploys go out on Fridays", kind="fact")
    assert memory.apply_action("pin", actor="test")
    assert memory.apply_action("set_tier", actor="test", tier="peripheral")
    assert memory.apply_action("tombstone", actor="test", reason="stale")
    assert memory.apply_action("restore", actor="test")
    assert memory.apply_action("unpin", actor="test")
    with pytest.raises(ValueError, match="unknown action"):
        memory.apply_action("delete", actor="test")
    actions = list(memory.events.order_by("id").values_list("action", flat=True))
    assert actions == ["created", "pinned", "demoted", "tombstoned", "restored", "unpinned"]


def test_scope_names_lists_every_scope_once_in_order(make_memory):
    for scope in ("user:42", "agent:main", "global", "agent:main", "agent:ops-bot"):
        make_memory(f"a fact in {scope} {len(scope)}", scope=scope, kind="fact")
    make_memory("gone", scope="agent:zz", kind="fact").tombstone("x", actor="test")
    assert Memory.objects.scope_names() == ["agent:main", "agent:ops-bot", "agent:zz", "global", "user:42"]
    assert Memory.objects.scope_names(limit=2) == ["agent:main", "agent:ops-bot"]
    Memory.objects.all().update(scope="agent:main")
    assert Memory.objects.scope_names() == ["agent:main"]
