"""The salience gate (step 2): chit-chat, nudges, complaints, questions and one-off requests are not
knowledge; a message stating an L0 fact always is. Plain functions: no database.
"""

from __future__ import annotations

import pytest

from ingest.extraction.l0_statements import l0_extract
from ingest.extraction.salience import salience

CHIT_CHAT = [
    "在吗?",
    "在吗",
    "搞完了吗",
    "怎么回事",
    "怎么啦?",
    "hello?",
    "hi",
    "any update?",
    "ping",
    "你好",
    "好的",
    "ok",
    "thanks",
    "谢谢",
    "怎么还没好",
    "why is this so slow",
    "还在吗",
    "继续",
    "嗯嗯",
    "?",
    "在吗？",
    "ok thanks, that's all",
    "hello, are you there?",
    "速度太慢了",
    "为什么又失败了",
]


@pytest.mark.parametrize("text", CHIT_CHAT)
def test_chit_chat_nudges_and_complaints_produce_nothing(text):
    assert salience(text) in {"greeting", "nudge", "complaint"}
    assert l0_extract(text) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("hi", "greeting"),
        ("谢谢", "greeting"),
        ("在吗?", "nudge"),
        ("hello?", "nudge"),  # a greeting asked as a question checks whether anyone is there
        ("?", "nudge"),
        ("怎么还没好", "complaint"),
        ("why is this so slow", "complaint"),
        ("你用美团skill搜索一下看看", "one-off request"),
        ("search for flights to Tokyo", "one-off request"),
        ("帮我查一下明天北京的天气", "one-off request"),
        ("用飞书给他发个消息", "one-off request"),
        ("我的幸运数字是啥?", "question"),
        ("what is my name?", "question"),
        ("what's my lucky number?", "question"),
        ("你还记得我叫什么吗?", "question"),
        ("Tokyo", "too short"),
        ("杭州", "too short"),
    ],
)
def test_salience_says_why_a_message_is_not_knowledge(text, reason):
    assert salience(text) == reason
    assert l0_extract(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "我叫东升", "I prefer tabs", "不要用 emoji", "my lucky number is 7", "记住：每周五开周会", "我在杭州工作",
        "用户的团队在 IDC 跑了 1000 张 GPU。",  # 用户 ("the user") is not the verb 用 ("use …")
    ],
)  # fmt: skip
def test_salience_never_rejects_a_message_stating_knowledge_however_short(text):
    assert salience(text) is None
