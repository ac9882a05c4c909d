"""What a query asks for (a time, a number) and whether a memory holds it: a memory that names no
time does not say when, and keeps only a share of its heuristic score."""

from __future__ import annotations

import pytest

from recall import asks, heuristic

WEIGHTS = heuristic.Weights()


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("when is the staging cluster redeployed?", ("time",)),
        ("What time does the stand-up start", ("time",)),
        ("what is the user's birthday?", ("time",)),
        ("How many GPUs does the Seoul office have", ("number",)),
        ("how much did Daniel pay for the class?", ("number",)),
        ("What's the budget for Q3?", ("number",)),
        ("王芳是什么时候开始上课的？", ("time",)),
        ("数据库备份保留多久", ("number",)),
        ("云擎智能给李明开的薪资是多少？", ("number",)),
        ("以宁さんの誕生日はいつ？", ("time",)),
        ("会議は何時から？", ("time",)),
        ("서울 지사 GPU는 몇 장이야?", ("number",)),
        ("When did Luca sit his exam, and how many marks did he get?", ("time", "number")),
        ("Which hospital does Maya work at?", ()),
        ("who teaches the sailing lessons", ()),
        ("用户喜欢什么咖啡", ()),
        ("deploy status", ()),
    ],
)
def test_the_kind_of_answer_a_question_asks_for(query, kinds):
    assert asks.asked(query) == kinds


@pytest.mark.parametrize(
    "text",
    [
        "The staging cluster is redeployed every Tuesday at 15:00 UTC.",
        "User's birthday is December 12, 1988.",
        "Maya picked up Juno on March 2.",
        "Backups run nightly at 2 a.m.",
        "Priya had her interview last week.",
        "用户生日是 1988 年 12 月 12 日",
        "李明上周三扭伤了脚踝。",
        "会議は毎週月曜日の午前に始まる。",
        "회의는 매주 월요일이다.",
    ],
)
def test_texts_that_name_a_time(text):
    assert asks.holds(text, asks.TIME)


@pytest.mark.parametrize(
    "text",
    [
        "What's the status of the deploy?",
        "Depth-3 chain test",  # a digit, but no time
        "Welcome to the onboarding banner.",
        "用户喜欢喝美式咖啡，不加糖。",
        "Grace's surgeon is Dr. Hanh Nguyen.",
    ],
)
def test_texts_that_name_no_time(text):
    assert not asks.holds(text, asks.TIME)


def test_numbers_in_digits_words_and_chinese_measures_count_and_plain_words_do_not():
    for text in ("The Seoul office has 48 RTX 4070 cards.", "It took three weeks.", "李明养了两只猫。", "costs $22"):
        assert asks.holds(text, asks.NUMBER), text
    for text in ("The user prefers concise answers.", "用户一直喜欢用飞书沟通。", "Maya's dog walker is Tessa."):
        assert not asks.holds(text, asks.NUMBER), text


def score(text: str, query: str, weights: heuristic.Weights = WEIGHTS) -> heuristic.Scored:
    return heuristic.score("m", 1.0, 0.5, heuristic.Fields(text), heuristic.QueryForms.of(query), weights)


def test_a_memory_without_the_kind_of_answer_asked_for_keeps_a_share_of_its_score_and_says_why():
    query = "when is the staging cluster redeployed?"
    answers = score("The staging cluster is redeployed every Tuesday at 15:00 UTC.", query)
    status = score("What's the status of the staging cluster deploy?", query)
    assert status.score == pytest.approx(answers.score * WEIGHTS.answer_type)
    assert status.evidence == pytest.approx(answers.evidence * WEIGHTS.answer_type)
    assert "asked for a time, holds none (× 0.7)" in status.signals
    assert not any(signal.startswith("asked for") for signal in answers.signals)


def test_a_key_holding_the_answer_counts_and_weight_1_turns_it_off():
    query = "when is Lin's birthday"
    keyed = heuristic.Fields("Lin's birthday, as she wrote it", entity_key="birthday:1988-12-12")
    held = heuristic.score("k", 1.0, 0.5, keyed, heuristic.QueryForms.of(query), WEIGHTS)
    assert not any(signal.startswith("asked for") for signal in held.signals)
    off = heuristic.Weights(answer_type=1.0)
    assert score("Lin likes cake", query, off).score == score("Lin's birthday is on 12 December", query, off).score
