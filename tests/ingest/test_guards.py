"""The write path's guards: the source filter and internal-prompt fingerprints (step 1), the tool
guard (step 5). Plain functions over plain values: no database. Every example is English and Chinese.
"""

from __future__ import annotations

import pytest

from ingest.extraction.guards import DEFAULT_INTERNAL_FINGERPRINTS, internal_fingerprint, source_filter, tool_guard

# --- source filter and fingerprints ------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "channel", "source", "reason"),
    [
        ("assistant", "chat", None, "assistant message"),
        ("tool", None, None, "tool message"),
        ("system", None, None, "system message"),
        ("user", "heartbeat", "user", "heartbeat channel"),
        ("user", "CRON", None, "cron channel"),
        ("user", "system", None, "system channel"),
        ("user", "chat", "internal", "internal source"),
        ("user", "chat", "banner", "banner source"),
        ("user", "chat", "repair", "repair source"),
        ("user", None, "compaction", "compaction source"),
    ],
)
def test_only_the_users_own_words_reach_extraction(role, channel, source, reason):
    assert source_filter(role, channel, source) == reason


@pytest.mark.parametrize(("channel", "source"), [("chat", "user"), (None, None), ("", "")])
def test_a_user_message_on_a_chat_channel_passes_the_source_filter(channel, source):
    assert source_filter("user", channel, source) is None


@pytest.mark.parametrize(
    ("text", "fingerprint"),
    [
        ("Multi-hop task: delegate to agent_a1, have it delegate to agent_a2.", "Multi-hop task: delegate"),
        ("Depth-3 chain test: ask agent_a1 to ask agent_a2 to ask agent_a3.", "Depth-3 chain test"),
        ("ＤＥＰＴＨ-3   chain TEST (retry)", "Depth-3 chain test"),  # width, case and spacing do not matter
        ("用 ask_user 工具问我几个问题，收集一下我的偏好", "ask_user 工具问我"),
        ("欢迎使用智能助手！输入 /help 查看可用技能。", "欢迎使用智能助手"),
        ("[repair] 上一轮的工具调用没有 tool_result，请重新发起这次调用", "[repair]"),
    ],
)
def test_leaked_internal_prompts_are_caught_by_their_fingerprint(text, fingerprint):
    assert internal_fingerprint(text) == fingerprint


def test_fingerprints_leave_ordinary_messages_alone_and_can_be_replaced():
    assert internal_fingerprint("我叫东升，幸运数字是 88") is None
    assert internal_fingerprint("Depth-3 chain test", fingerprints=["release checklist"]) is None
    assert internal_fingerprint("Run the RELEASE checklist", fingerprints=["release checklist"]) == "release checklist"
    assert internal_fingerprint("Depth-3 chain test", fingerprints=[]) is None
    assert "Multi-hop task: delegate" in DEFAULT_INTERNAL_FINGERPRINTS


# --- tool guard -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("mcp__ata__article-list-query parameter schema: {query: string, page: int}", "parameter schema"),
        ("调用 feishu::bitable_write 的参数格式：{table_id, records}", "parameter schema"),
        ("Field mapping for crm_sync: name -> customer_name, tel -> phone", "field mapping"),
        ("search_flights 的字段映射：出发地 -> from", "field mapping"),
        ("Guessed call format: search_flights(from='PEK', to='NRT')", "guessed call format"),
        ("调用格式注意事项：feishu::bitable_write 的 records 字段必须是数组", "call format"),
        ("search_flights 调用失败，参数错误", "failed-call transcript"),
        ('{"role": "tool", "tool_call_id": "c1", "content": "error"}', "raw tool-call transcript"),
        ("Traceback (most recent call last):\n  File 'x.py'", "raw failed-call transcript"),
    ],
)
def test_tool_schemas_call_formats_and_failed_calls_are_never_stored(text, reason):
    assert tool_guard(text).startswith(reason)


@pytest.mark.parametrize(
    "text",
    [
        "X returns 500 when page > 10 — use the cursor",
        "Gotcha: mcp__ata__article-list-query returns HTTP 500 when page > 10 — use the cursor instead.",
        "坑：飞书多维表格 API 一次写入超过 500 行会静默截断；已确认的解决办法是分批写入。",
        "search_flights 的负责人是陈静，出问题找她",
        "Never add Co-Authored-By to commits.",
        "用户的名字是东升。",
    ],
)
def test_gotchas_workarounds_and_ordinary_facts_pass_the_tool_guard(text):
    assert tool_guard(text) is None
