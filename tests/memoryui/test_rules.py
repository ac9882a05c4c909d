"""Domain rules that need no database: scopes, hashing, placement, validation."""

from __future__ import annotations

import re

import pytest

from memoryui import rules


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("main", "agent:main"),
        ("agent:main", "agent:main"),
        ("user:42", "user:42"),
        ("global", "global"),
        ("test-w", "agent:test-w"),
        ("project:acme/web@v2", "project:acme/web@v2"),
    ],
)
def test_scope_normalization_joins_bare_ids_and_prefixed_ids(raw, expected):
    assert rules.normalize_scope(raw) == expected
    assert re.match(rules.SCOPE_PATTERN, raw)


@pytest.mark.parametrize(
    "raw",
    [
        "", "   ", "robot:x", "agent:", "agent:has space", "a" * 201, "global:x", "agent:a:b",
        # Nothing is folded or trimmed: the schema's pattern is the whole rule.
        " agent:main", "Agent:main", "GLOBAL:x", "ａｇｅｎｔ：main", "agent:王芳",
    ],
)  # fmt: skip
def test_malformed_scopes_are_rejected_with_a_reason(raw):
    with pytest.raises(rules.ScopeError) as excinfo:
        rules.normalize_scope(raw)
    assert str(excinfo.value)
    assert not re.match(rules.SCOPE_PATTERN, raw) or len(raw) > rules.SCOPE_MAX_LENGTH


def test_exact_dedup_hash_ignores_case_width_punctuation_and_spacing():
    assert rules.content_hash("在吗?") == rules.content_hash("在吗？")
    assert rules.content_hash("I prefer  TERSE answers.") == rules.content_hash(" i prefer terse answers. ")
    assert rules.content_hash("ＡＢＣ１２３") == rules.content_hash("abc123")
    assert rules.content_hash("lucky number 88") != rules.content_hash("lucky number 89")


@pytest.mark.parametrize(
    ("kind", "confidence", "tier", "pinned", "low", "high"),
    [
        ("entity", 0.9, "core", True, 0.85, 1.0),
        ("preference", 0.95, "core", True, 0.85, 1.0),
        ("preference", 0.7, "working", False, 0.55, 0.80),
        ("remember", 0.8, "working", False, 0.75, 0.95),
        ("fact", 0.6, "working", False, 0.55, 0.80),
        ("project_state", 1.0, "working", False, 0.55, 0.80),
        ("summary", 0.8, "working", False, 0.50, 0.70),
        ("summary", 0.5, "peripheral", False, 0.50, 0.70),
        ("note", 0.9, "peripheral", False, 0.10, 0.30),
        ("fact", 0.2, "peripheral", False, 0.10, 0.30),
    ],
)
def test_placement_follows_the_tier_and_importance_table(kind, confidence, tier, pinned, low, high):
    placement = rules.place_memory(kind, confidence)
    assert placement.tier == tier
    assert placement.pinned is pinned
    assert low <= placement.importance <= high


def test_explicit_remember_of_an_entity_goes_to_core():
    assert rules.place_memory("remember", 0.8, entity_key="phone:18600000000").tier == "core"


def test_peripheral_memories_get_a_ttl_and_core_ones_do_not():
    assert rules.place_memory("note", 0.5, peripheral_ttl_days=7).ttl_days == 7
    assert rules.place_memory("entity", 0.9).ttl_days is None


def test_merged_text_keeps_the_existing_text_unless_the_new_one_adds_information():
    assert rules.merged_text("Lucky number is 88", "lucky number is 88") == "Lucky number is 88"
    assert rules.merged_text("Lucky number is 88", "Lucky number is 88, and 66") == "Lucky number is 88, and 66"
    assert rules.merged_text("Lucky number is 88", "Something else") == "Lucky number is 88"


def test_merged_importance_is_bumped_and_capped():
    assert rules.merged_importance(0.5, 0.4) == pytest.approx(0.55)
    assert rules.merged_importance(0.99, 0.2) == 1.0


def test_clean_memory_fields_names_every_bad_field():
    with pytest.raises(rules.MemoryValidationError) as excinfo:
        rules.clean_memory_fields(
            {
                "scope": "robot:x",
                "kind": "bogus",
                "text": "  ",
                "tier": "hot",
                "importance": 1.5,
                "confidence": True,
                "pinned": "yes",
                "status": "gone",
                "source": "llm",
                "entity_key": "no-colon",
                "metadata": [1],
                "expires_at": "tomorrow",
                "colour": "red",
            }
        )
    errors = excinfo.value.errors
    assert set(errors) == {
        "scope", "kind", "text", "tier", "importance", "confidence", "pinned", "status", "source",
        "entity_key", "metadata", "expires_at", "colour",
    }  # fmt: skip
    assert "bogus" in errors["kind"][0]
    assert "between 0 and 1" in errors["importance"][0]


def test_clean_memory_fields_requires_scope_kind_and_text_unless_partial():
    with pytest.raises(rules.MemoryValidationError) as excinfo:
        rules.clean_memory_fields({})
    assert set(excinfo.value.errors) == {"scope", "kind", "text"}
    assert rules.clean_memory_fields({"importance": 0.5}, partial=True) == {"importance": 0.5}


def test_text_over_the_limit_is_rejected_with_its_length():
    with pytest.raises(rules.MemoryValidationError) as excinfo:
        rules.clean_memory_fields({"scope": "main", "kind": "fact", "text": "x" * 11}, text_max_length=10)
    assert "11 characters" in excinfo.value.errors["text"][0]


def test_entity_keys_are_normalized_and_must_be_type_value():
    assert rules.normalize_entity_key(" Phone:18600000000 ") == "phone:18600000000"
    assert rules.normalize_entity_key("") is None
    with pytest.raises(rules.EntityKeyError):
        rules.normalize_entity_key(":nothing")


def test_naive_datetimes_are_rejected():
    with pytest.raises(ValueError, match="time zone"):
        rules.parse_datetime_value("2026-01-01T00:00:00")
    assert rules.parse_datetime_value("2026-01-01T00:00:00Z").year == 2026


@pytest.mark.parametrize(
    ("short", "long", "restates"),
    [
        ("Releases go out on Thursdays.", "Releases go out on Thursdays, after the QA sign-off.", True),
        ("用户对花生过敏。", "用户对花生过敏，推荐餐厅时要避开花生类菜品。", True),
        ("The team runs RTX 4070 GPUs.", "The team runs 1000 RTX 4070 GPUs, mostly for inference.", True),
        ("Session summary: no downtime.", "session summary: no downtime", True),  # same words, same order
        ("Prefers tabs.", "Does not prefer tabs.", False),  # the added words negate
        ("用户喜欢飞书。", "用户不喜欢飞书。", False),
        ("Runs RTX 4070 GPUs.", "Runs RTX 4090 GPUs in the IDC.", False),  # 4070 is not in the longer text
        ("Alice reports to Bob.", "Bob reports to Alice.", False),  # same words, another order, no more
        ("Prefers tabs.", "Prefers tabs.", True),
    ],
)
def test_a_restatement_says_all_the_shorter_text_says(short, long, restates):
    assert rules.restates_with_more(short, long) is restates


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Commit 3f9a2c1 fixed the floor.", "Commit 3f9a2d1 fixed the floor."),
        ("用户的车牌号是粤B·88Q66。", "用户的车牌号是粤B·66Q88。"),
        ("Runs RTX 4070 GPUs.", "Runs RTX 4090 GPUs."),
    ],
)
def test_codes_holding_digits_differ_like_numbers(a, b):
    assert rules.semantic_merge_blocker(a, b).startswith("the numbers differ")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("每天下午三点开站会。", "每天下午四点开站会。"),
        ("我们买了两个显示器。", "我们买了三个显示器。"),
        ("第三次复查正常。", "第四次复查正常。"),
        ("十五年前搬到了成都。", "十二年前搬到了成都。"),
        ("车牌是粤B·88Q66。", "车牌是粤B·88Q67。"),
    ],
)
def test_chinese_numerals_and_separated_codes_differ_like_numbers(a, b):
    assert rules.semantic_merge_blocker(a, b).startswith("the numbers differ")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("车牌是粤B·88Q66。", "车牌是粤B88Q66"),  # the same code with and without its separator
        ("Ticket JIRA-1234 is blocked.", "Ticket JIRA1234 is blocked."),
        ("我们一起去吃饭。", "咱们一起去吃饭吧。"),  # 一 in 一起 counts nothing
    ],
)
def test_the_same_code_written_apart_and_words_with_numeral_characters_are_no_numbers(a, b):
    assert rules.semantic_merge_blocker(a, b) is None


def test_chinese_numerals_read_as_their_values():
    assert rules.numbers_of("两个人，十五年，二十三次，一百零五元") == {"2", "15", "23", "105"}
