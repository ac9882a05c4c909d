"""L0 statements (step 3): preferences, explicit remember requests and the one world-fact rule, and what
`l0_extract` keeps of the polluted demo store. Plain functions: no database. Every example is
English and Chinese.
"""

from __future__ import annotations

import pytest

from ingest.extraction.guards import internal_fingerprint
from ingest.extraction.l0_entities import Extracted
from ingest.extraction.l0_statements import l0_extract
from ingest.extraction.salience import salience
from web.demo import POLLUTED_MAIN, POLLUTED_TEST_W


def only(text: str) -> Extracted:
    facts = l0_extract(text)
    assert len(facts) == 1, facts
    return facts[0]


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
    assert facts["remember"].text == "用户喜欢喝茶。"
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
