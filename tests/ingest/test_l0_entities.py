"""L0 entities (step 3): names, phone numbers, e-mail addresses, ID numbers, birthdays, lucky numbers and
license plates, typed and keyed in their canonical form. Plain functions: no database. Every example
is English and Chinese.
"""

from __future__ import annotations

import pytest

from ingest.extraction.l0_entities import Extracted
from ingest.extraction.l0_statements import l0_extract
from memoryui import rules


def only(text: str) -> Extracted:
    facts = l0_extract(text)
    assert len(facts) == 1, facts
    return facts[0]


def keys(text: str) -> set[str | None]:
    return {fact.entity_key for fact in l0_extract(text)}


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
