"""L0 remember requests (step 3): one memory per statement, in the third person. A request joining
two facts keeps them apart, and first-person words are resolved to the user; "and" inside one fact
splits nothing. English and Chinese.
"""

from __future__ import annotations

import pytest

from ingest.extraction import extract
from ingest.extraction.l0_statements import l0_extract
from ingest.extraction.third_person import third_person
from ingest.ingestion import ingest
from memoryui.models import Memory

FREEZE_AND_MANAGER = "Remember that our payments freeze starts on December 15 and my manager is Priya Raman."


def remembered(text: str) -> list[str]:
    facts = l0_extract(text)
    assert all(fact.kind == "remember" and fact.explicit for fact in facts), facts
    return [fact.text for fact in facts]


@pytest.mark.parametrize(
    ("text", "statements"),
    [
        (FREEZE_AND_MANAGER, ["The payments freeze starts on December 15.", "The user's manager is Priya Raman."]),
        (
            "remember that we ship on Fridays and I review PRs",
            ["The user's team ships on Fridays.", "The user reviews PRs."],
        ),
        (
            "Our payments freeze starts on December 15, and also my manager is Priya Raman, remember that",
            ["The payments freeze starts on December 15.", "The user's manager is Priya Raman."],
        ),
        (
            "记住：我们的支付冻结从12月15日开始，我的经理是Priya Raman。",
            ["支付冻结从12月15日开始。", "用户的经理是Priya Raman。"],
        ),
        ("记住：我住在杭州，我老婆在上海工作", ["用户住在杭州。", "用户老婆在上海工作。"]),
    ],
)
def test_a_remember_request_joining_two_statements_becomes_two_memories(text, statements):
    assert remembered(text) == statements


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("remember that I like tea and coffee", "The user likes tea and coffee."),
        ("remember that Tom and Jerry are my cats", "Tom and Jerry are the user's cats."),
        ("remember that R&D and QA share the floor", "R&D and QA share the floor."),
        (
            "remember that my parents and my sisters live in Paris",
            "The user's parents and the user's sisters live in Paris.",
        ),
        (
            "remember that I like apples and my brother's friends",
            "The user likes apples and the user's brother's friends.",
        ),
        ("remember that I know Tom and Jerry are cats", "The user knows Tom and Jerry are cats."),
        ("记住：我喜欢喝茶，还有咖啡", "用户喜欢喝茶，还有咖啡。"),
        ("记住：我的猫叫Tom，它很胖", "用户的猫叫Tom，它很胖。"),
    ],
)
def test_and_inside_one_statement_does_not_split_it(text, statement):
    assert remembered(text) == [statement]


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("remember that my manager is Priya", "The user's manager is Priya."),
        ("remember that I am allergic to nuts", "The user is allergic to nuts."),
        ("remember that I'm on call this week", "The user is on call this week."),
        ("remember that I usually work from home on Mondays", "The user usually works from home on Mondays."),
        ("remember that I don't eat pork", "The user doesn't eat pork."),
        ("remember that Bob owes me 20 dollars", "Bob owes the user 20 dollars."),
        ("remember that we have a standup at 10", "The user's team has a standup at 10."),
        ("remember that our team owns the billing service", "The user's team owns the billing service."),
        ("remember that my wife and I have two kids", "The user's wife and the user have two kids."),
        ("remember that I moved to Berlin in 2020", "The user moved to Berlin in 2020."),
        ("记住我的经理是王芳", "用户的经理是王芳。"),
        ("记住：我们团队每周五发版", "用户的团队每周五发版。"),
        ("记住：我们每周五发版", "用户的团队每周五发版。"),
    ],
)
def test_first_person_words_in_a_remember_request_are_resolved_to_the_user(text, statement):
    assert remembered(text) == [statement]


@pytest.mark.parametrize(
    ("text", "unchanged"),
    [
        ("The US office uses I/O schedulers, i.e. CFQ", "The US office uses I/O schedulers, i.e. CFQ"),
        ("Ask the team lead about the API", "Ask the team lead about the API"),
        ("自我介绍要简短", "自我介绍要简短"),
    ],
)
def test_words_that_only_look_like_first_person_are_left_alone(text, unchanged):
    assert third_person(text) == unchanged


def test_preferences_and_instructions_keep_their_own_wording():
    assert [f.text for f in l0_extract("I like tea and coffee")] == ["The user likes tea and coffee."]
    assert [f.text for f in l0_extract("请永远不要在周末打扰我")] == ["永远不要在周末打扰我。"]


@pytest.mark.django_db
def test_a_dry_run_of_the_transcript_shows_two_memories_in_the_third_person(indexes):
    data = {
        "scope": "agent:main",
        "messages": [{"role": "user", "content": FREEZE_AND_MANAGER}, {"role": "assistant", "content": "Noted."}],
    }
    report = extract(ingest(data).transcript, dry_run=True, l1="off")
    added = [(o.action, o.kind, o.text) for o in report.outcomes]
    assert added == [
        ("added", "remember", "The payments freeze starts on December 15."),
        ("added", "remember", "The user's manager is Priya Raman."),
    ]
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("text", "statements"),
    [
        # A remember command that opens a later sentence is a request all the same.
        (
            "Do that. And remember that the nightly export must start after the backup has finished.",
            [("remember", "The nightly export must start after the backup has finished.")],
        ),
        (
            "I prefer tabs. Remember that the release is on Friday.",
            [("preference", "The user prefers tabs."), ("remember", "The release is on Friday.")],
        ),
        # An order in a sentence after the request is this turn's task, not something to remember …
        (
            "Remember that the staging deploy needs the VPN. Now convert refund_test.go.",
            [("remember", "The staging deploy needs the VPN.")],
        ),
        ("记住：写代码前先跑测试。然后帮我看看这个bug。", [("remember", "写代码前先跑测试。")]),
        # … unless it is a rule to keep.
        (
            "Remember that the staging deploy needs the VPN. Never deploy on Fridays.",
            [("remember", "The staging deploy needs the VPN."), ("remember", "Never deploy on Fridays.")],
        ),
        # "remember to …" later on is still a reminder for later, not knowledge.
        ("Can you check the logs? Remember to restart the server after.", []),
    ],
)
def test_a_request_in_a_later_sentence_and_the_task_after_one(text, statements):
    assert sorted((fact.kind, fact.text) for fact in l0_extract(text)) == sorted(statements)
