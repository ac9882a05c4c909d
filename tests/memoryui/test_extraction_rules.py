"""The deterministic write-path rules: source filter, fingerprints, salience, L0 extraction, tool guard.

Plain functions over plain values: no database. Every example is English and Chinese.
"""

from __future__ import annotations

import pytest

from memoryui import rules
from memoryui.demo import POLLUTED_MAIN, POLLUTED_TEST_W
from memoryui.extraction_rules import (
    DEFAULT_INTERNAL_FINGERPRINTS,
    Extracted,
    internal_fingerprint,
    l0_extract,
    salience,
    source_filter,
    tool_guard,
)


def only(text: str) -> Extracted:
    facts = l0_extract(text)
    assert len(facts) == 1, facts
    return facts[0]


def keys(text: str) -> set[str | None]:
    return {fact.entity_key for fact in l0_extract(text)}


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


# --- salience ---------------------------------------------------------------------------------

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


# --- L0: entities -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "statement"),
    [
        ("我叫东升", "name:东升", "用户的名字是东升。"),
        ("我的名字是李东升", "name:李东升", "用户的名字是李东升。"),
        ("我叫东升，以后就这么叫我", "name:东升", "用户的名字是东升。"),
        ("my name is Li Dongsheng", "name:li-dongsheng", "The user's name is Li Dongsheng."),
        ("My name is Bob and I like tea", "name:bob", "The user's name is Bob."),
        ("call me Bob", "name:bob", "The user wants to be called Bob."),
        ("叫我东升就行", "name:东升", "用户希望被称呼为东升。"),
    ],
)
def test_a_user_naming_themselves_becomes_a_name_entity(text, key, statement):
    fact = only(text)
    assert (fact.kind, fact.entity_key, fact.text) == ("entity", key, statement)
    assert fact.confidence >= 0.85


@pytest.mark.parametrize("text", ["call me back later", "call me when you're done", "我叫了外卖", "明天早上叫我起床"])
def test_verbs_that_look_like_naming_are_not_names(text):
    assert l0_extract(text) == []


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("我的手机号是 186 0000 0000", "phone:18600000000"),
        ("手机：186-0000-0000", "phone:18600000000"),
        ("我的电话是 +86 186 0000 0000", "phone:18600000000"),
        ("my phone number is 18600000000", "phone:18600000000"),
        ("my phone number is +1 415 555 0100", "phone:14155550100"),
        ("reach me at +44 20 7946 0958", "phone:442079460958"),
    ],
)
def test_phone_numbers_are_keyed_by_their_digits(text, key):
    fact = only(text)
    assert (fact.kind, fact.entity_key) == ("entity", key)
    assert key.split(":")[1] in fact.text  # the exact token stays searchable


def test_a_number_with_no_cue_saying_whose_it_is_is_not_the_users_phone():
    assert l0_extract("给 18600000000 打个电话") == []
    assert l0_extract("他的手机号是 13800138000") == []
    assert only("王芳的电话是 138 0013 8000").text == "王芳的手机号是 13800138000。"
    assert only("Bob's phone number is 138 0013 8000").confidence < only("my phone is 13800138000").confidence


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("我的邮箱是 Dong@Example.com", "email:dong@example.com"),
        ("my email is Bob@Example.COM", "email:bob@example.com"),
    ],
)
def test_email_addresses_are_keyed_in_lower_case(text, key):
    assert only(text).entity_key == key


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("我的身份证号是 11010519491231002x", "id_number:11010519491231002X"),
        ("my ID number is 11010519491231002X", "id_number:11010519491231002X"),
    ],
)
def test_chinese_id_numbers_are_entities_and_a_bad_check_digit_lowers_confidence(text, key):
    assert only(text).entity_key == key
    assert only("身份证 110105194912310021").confidence < only(text).confidence
    assert l0_extract("身份证 110105194913310021") == []  # month 13 is no birth date


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("生日是1988年12月12日", "用户的生日是 1988-12-12。"),
        ("我1988年12月12日出生", "用户的生日是 1988-12-12。"),
        ("我的生日是 1988-12-12", "用户的生日是 1988-12-12。"),
        ("my birthday is 12 December 1988", "The user's birthday is 1988-12-12."),
        ("My birthday is December 12, 1988", "The user's birthday is 1988-12-12."),
        ("I was born on 1988/12/12", "The user's birthday is 1988-12-12."),
    ],
)
def test_birthdays_become_iso_dates(text, statement):
    fact = only(text)
    assert (fact.kind, fact.entity_key, fact.text) == ("entity", "birthday:1988-12-12", statement)


def test_a_birthday_without_a_year_is_keyed_by_month_and_day():
    assert (only("我的生日是12月12日").entity_key, only("我的生日是12月12日").text) == (
        "birthday:--12-12",
        "用户的生日是 12月12日。",
    )
    assert only("my birthday is December 12").text == "The user's birthday is December 12."


def test_an_impossible_birthday_is_not_stored():
    assert l0_extract("my birthday is 1988-02-30") == []


@pytest.mark.parametrize(
    ("text", "key", "statement"),
    [
        ("幸运数字是88", "lucky_number:88", "用户的幸运数字是 88。"),
        ("我的幸运数字是 88 66 99", "lucky_number:88-66-99", "用户的幸运数字是 88、66 和 99。"),
        ("my lucky number is 7", "lucky_number:7", "The user's lucky number is 7."),
        ("my lucky numbers are 88, 66 and 99", "lucky_number:88-66-99", "The user's lucky numbers are 88, 66 and 99."),
        ("我的车牌号是浙A12345", "license_plate:浙A12345", "用户的车牌号是浙A12345。"),
        ("my license plate is ABC 123", "license_plate:ABC123", "The user's license plate is ABC123."),
    ],
)
def test_stated_values_are_entities_keyed_by_their_value(text, key, statement):
    fact = only(text)
    assert (fact.kind, fact.entity_key, fact.text) == ("entity", key, statement)


def test_one_message_can_state_several_facts():
    assert keys("我叫东升,幸运数字是 88") == {"name:东升", "lucky_number:88"}
    assert keys("我叫东升，幸运数字是 88") == {"name:东升", "lucky_number:88"}
    assert keys("Hi, my name is Bob, my email is bob@x.io") == {"name:bob", "email:bob@x.io"}


@pytest.mark.parametrize(
    "text",
    ["我的幸运数字是啥?", "what's my lucky number?", "what is my name?", "My name is Bob, right?", "你的名字是小助手"],
)
def test_questions_and_other_peoples_facts_yield_no_user_entity(text):
    assert l0_extract(text) == []


def test_the_statement_in_a_message_that_also_asks_is_kept():
    assert keys("我叫东升,你叫什么?") == {"name:东升"}


def test_every_entity_key_is_valid_for_the_store():
    messages = [
        "我叫东升,幸运数字是 88",
        "my name is Li Dongsheng",
        "我的手机号是 186 0000 0000",
        "生日是1988年12月12日",
        "my email is Bob@Example.COM",
        "我的身份证号是 11010519491231002X",
        "我的生日是12月12日",
        "我的车牌是 浙A·12345",
    ]
    for fact in (fact for text in messages for fact in l0_extract(text)):
        assert rules.normalize_entity_key(fact.entity_key) == fact.entity_key
        assert fact.kind in rules.KINDS and fact.kind != "note"


# --- L0: preferences, remember requests, world facts -------------------------------------------


@pytest.mark.parametrize(
    ("text", "statement", "low"),
    [
        ("I prefer tabs", "The user prefers tabs.", 0.85),
        ("I like short answers, with examples", "The user likes short answers, with examples.", 0.8),
        ("I don't like emojis", "The user doesn't like emojis.", 0.8),
        ("please always answer in English", "Always answer in English.", 0.9),
        ("never add Co-Authored-By to commits", "Never add Co-Authored-By to commits.", 0.9),
        ("From now on, answer in Chinese", "From now on, answer in Chinese.", 0.9),
        ("我喜欢喝茶", "用户喜欢喝茶。", 0.8),
        ("我不喜欢香菜", "用户不喜欢香菜。", 0.8),
        ("我比较喜欢用飞书沟通，不喜欢邮件", "用户比较喜欢用飞书沟通，不喜欢邮件。", 0.8),
        ("不要用 emoji", "不要用 emoji。", 0.8),
        ("以后都用中文回答", "以后都用中文回答。", 0.9),
        ("请永远不要在周末打扰我", "永远不要在周末打扰我。", 0.9),
    ],
)
def test_preference_sentences_become_preferences_without_a_key(text, statement, low):
    fact = only(text)
    assert (fact.kind, fact.text, fact.entity_key, fact.explicit) == ("preference", statement, None, False)
    assert low <= fact.confidence <= 0.9


def test_a_preference_after_a_one_off_order_is_kept_and_the_order_dropped():
    fact = only("commit 一下，never add Co-Authored-By to commits")
    assert (fact.kind, fact.text) == ("preference", "Never add Co-Authored-By to commits.")


def test_always_and_never_are_surer_than_likes_and_hedges_are_less_sure():
    assert only("never use tabs").confidence > only("I like spaces").confidence
    assert only("以后都用中文回答").confidence > only("我喜欢喝茶").confidence
    assert only("maybe I prefer tabs").confidence < only("I prefer tabs").confidence
    assert only("我可能喜欢喝茶").confidence < only("我喜欢喝茶").confidence
    assert only("I think my birthday is 12 December 1988").confidence < only("my birthday is 1988-12-12").confidence


@pytest.mark.parametrize("text", ["never mind", "I like it", "不要了", "I'd like a coffee", "我们有 3 个问题"])
def test_reactions_and_one_off_wishes_are_not_preferences(text):
    assert l0_extract(text) == []


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("/remember the staging db resets on Sunday", "The staging db resets on Sunday."),
        ("remember that the gateway is frozen until Monday", "The gateway is frozen until Monday."),
        (
            "note that the staging database is reset every Sunday night",
            "The staging database is reset every Sunday night.",
        ),
        ("记住：每周五开周会", "每周五开周会。"),
        ("请记住，周五下午四点开周会", "周五下午四点开周会。"),
        ("记住：写代码前先跑测试", "写代码前先跑测试。"),  # dictated content is kept even when it reads like an order
    ],
)
def test_explicit_remember_requests_keep_the_content_without_the_command(text, statement):
    fact = only(text)
    assert (fact.kind, fact.text, fact.entity_key, fact.explicit) == ("remember", statement, None, True)
    assert fact.confidence >= 0.9


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("我的幸运数字是 88 66 99，记一下", "lucky_number:88-66-99"),
        ("请记住我的手机号是 13800138000", "phone:13800138000"),
        ("remember that my birthday is 12 December 1988", "birthday:1988-12-12"),
        ("My birthday is 12 December 1988, remember that", "birthday:1988-12-12"),
    ],
)
def test_remembering_an_entity_fact_stores_the_entity_marked_explicit(text, key):
    fact = only(text)
    assert (fact.kind, fact.entity_key, fact.explicit) == ("entity", key, True)
    assert fact.confidence >= 0.95
    assert fact.rule.startswith("explicit remember")


def test_a_remember_request_mixing_an_entity_and_a_note_keeps_both():
    facts = {fact.kind: fact for fact in l0_extract("记住：我叫东升，我喜欢喝茶")}
    assert facts["entity"].entity_key == "name:东升"
    assert facts["remember"].text == "我喜欢喝茶。"
    assert all(fact.explicit for fact in facts.values())


@pytest.mark.parametrize(
    "text",
    ["remember to buy milk", "你能记住我说过的话吗?", "测试一下记忆功能", "记住", "收集一下我的偏好，然后帮我记下来"],
)
def test_reminders_questions_about_memory_and_tasks_to_note_are_not_remember_requests(text):
    assert l0_extract(text) == []


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("我们在 IDC 跑了 1000 张 RTX 4070，帮我算一下一个月电费大概多少", "用户的团队在 IDC 跑了 1000 张 RTX 4070。"),
        ("we run 1000 RTX 4070s in an IDC", "The user's team runs 1000 RTX 4070s in an IDC."),
    ],
)
def test_a_counted_asset_the_user_operates_is_a_low_confidence_fact(text, statement):
    fact = only(text)
    assert (fact.kind, fact.text, fact.entity_key) == ("fact", statement, None)
    assert fact.confidence < 0.7


@pytest.mark.parametrize("text", ["I have 10 minutes", "I have 3 questions", "我在杭州工作"])
def test_other_facts_about_the_world_are_left_to_l1(text):
    assert l0_extract(text) == []


def test_the_polluted_store_keeps_exactly_its_four_pieces_of_knowledge():
    kept = {}
    for text in POLLUTED_MAIN + POLLUTED_TEST_W:
        if internal_fingerprint(text) or salience(text):
            continue
        if facts := l0_extract(text):
            kept[text] = [(fact.kind, fact.entity_key) for fact in facts]
    assert kept == {
        "我叫东升，以后就这么叫我": [("entity", "name:东升")],
        "我的幸运数字是 88 66 99，记一下": [("entity", "lucky_number:88-66-99")],
        "我们在 IDC 跑了 1000 张 RTX 4070，帮我算一下一个月电费大概多少": [("fact", None)],
        "commit 一下，never add Co-Authored-By to commits": [("preference", None)],
    }


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
