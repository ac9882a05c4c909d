"""seed_demo: the clean example store and the polluted legacy store (docs/architecture.md
"Raw transcript stored as memory")."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.db.models import Count

from memoryui import rules
from memoryui.models import Memory, MemoryEvent
from recall import toolfilter
from web import demo

pytestmark = pytest.mark.django_db

CJK = re.compile(r"[\u4e00-\u9fff]")


def seed(*args) -> dict:
    out = io.StringIO()
    call_command("seed_demo", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_polluted_store_has_exactly_the_counts_of_the_design():
    assert seed("--polluted") == {"created": 85}
    stats = Memory.objects.stats()
    assert stats["total"] == 85
    assert stats["by_kind"] == {kind: 85 if kind == "note" else 0 for kind in rules.KINDS}
    assert stats["by_tier"] == {"core": 0, "working": 85, "peripheral": 0}
    assert stats["by_scope"] == {"agent:main": 81, "agent:test-w": 4}
    assert stats["pinned"] == 0
    assert set(Memory.objects.values_list("source", flat=True)) == {"user"}


def test_polluted_store_holds_the_duplicates_faithfully():
    seed("--polluted")
    groups = Memory.objects.values("content_hash").annotate(n=Count("id")).filter(n__gt=1)
    by_text = {Memory.objects.filter(content_hash=g["content_hash"]).first().text: g["n"] for g in groups}
    assert by_text == {
        demo.ASK_USER_PROMPT: 5,
        demo.ASK_USER_3: 2,
        "我的幸运数字是啥?": 2,
        "怎么回事": 2,
        "在吗?": 2,
    }
    assert demo.ASK_USER_3.startswith("用ask_user问我3个问题")
    assert MemoryEvent.objects.filter(action="created").count() == 85


def test_polluted_store_buries_durable_knowledge_among_chit_chat_and_leaked_prompts():
    seed("--polluted")
    texts = list(Memory.objects.values_list("text", flat=True))

    def has(fragment: str) -> bool:
        return any(fragment in text for text in texts)

    for fragment in ("我叫东升", "88 66 99", "1000 张 RTX 4070", "never add Co-Authored-By to commits"):
        assert has(fragment), fragment
    for fragment in (
        "搞完了吗",
        "怎么啦?",
        "你用美团skill搜索一下看看",
        "Multi-hop task: delegate",
        "Depth-3 chain test",
    ):
        assert has(fragment), fragment


def test_polluted_store_is_spread_over_past_days():
    seed("--polluted")
    days = {d.date() for d in Memory.objects.values_list("created_at", flat=True)}
    assert len(days) >= 10
    first = Memory.objects.order_by("created_at").first()
    assert first.updated_at == first.created_at


def test_clean_demo_spans_scopes_and_languages_and_has_no_notes():
    created = seed()["created"]
    assert 40 <= created <= 60
    stats = Memory.objects.stats()
    assert {"agent:assistant", "agent:ops-bot", "user:42", "global"} <= set(stats["by_scope"])
    assert stats["by_kind"]["note"] == 0
    assert all(stats["by_kind"][kind] > 0 for kind in rules.KINDS if kind != "note")
    assert stats["pinned"] > 0 and stats["tombstoned"] >= 3
    texts = list(Memory.objects.values_list("text", flat=True))
    assert any(CJK.search(t) for t in texts) and any(not CJK.search(t) for t in texts)
    assert Memory.objects.filter(entity_key__startswith="phone:", status="active").exists()
    assert Memory.objects.filter(entity_key__startswith="birthday:").exists()
    assert Memory.objects.filter(text__contains="returns HTTP 500 when page > 10").exists()
    assert all(m.tombstone_reason for m in Memory.objects.filter(status="tombstoned"))


def test_clean_demo_goes_through_the_write_path():
    seed()
    assert MemoryEvent.objects.filter(action="created", actor="seed_demo").count() == Memory.objects.count()
    assert MemoryEvent.objects.filter(action="tombstoned").count() == Memory.objects.filter(status="tombstoned").count()
    name = Memory.objects.get(pk=demo.demo_id("assistant:name"))
    assert (name.tier, name.pinned) == ("core", True)


def test_seeding_twice_creates_nothing_the_second_time():
    seed()
    seed("--polluted")
    before = Memory.objects.count(), MemoryEvent.objects.count()
    assert seed() == {"created": 0}
    assert seed("--polluted") == {"created": 0}
    assert (Memory.objects.count(), MemoryEvent.objects.count()) == before


def test_reseeding_does_not_undo_a_clean_up():
    seed("--polluted")
    chatter = Memory.objects.filter(text="在吗?").first()
    chatter.tombstone("chit-chat", actor="cleanup")
    assert seed("--polluted") == {"created": 0}
    chatter.refresh_from_db()
    assert chatter.status == "tombstoned"


def test_without_json_it_says_what_it_did():
    out = io.StringIO()
    call_command("seed_demo", "--polluted", stdout=out)
    assert out.getvalue().startswith("Created 85 polluted legacy notes")


def test_clean_demo_holds_a_call_format_the_active_tool_filter_drops_and_a_gotcha_it_keeps():
    seed()
    tool = demo.FILTER_EXAMPLE["tools"]
    call_format = Memory.objects.get(pk=demo.demo_id(demo.FILTER_EXAMPLE_KEY))
    gotcha = Memory.objects.get(pk=demo.demo_id("ops:article-list-gotcha"))
    assert call_format.scope == gotcha.scope == demo.FILTER_EXAMPLE["scope"] == "agent:ops-bot"
    assert call_format.status == "active" and call_format.metadata["tools"] == [tool]

    def decision(memory: Memory, tools: list[str]) -> toolfilter.ToolFilterDecision:
        return toolfilter.active_tool_decision(memory.text, tools, tool_names=memory.metadata.get("tools", []))

    dropped = decision(call_format, [tool])
    assert dropped.suppressed and dropped.schema_marker == "call format" and dropped.durable_marker is None
    assert not decision(call_format, []).suppressed  # only while the agent is using the tool
    kept = decision(gotcha, [tool])
    assert not kept.suppressed and kept.durable_marker == "gotcha"
