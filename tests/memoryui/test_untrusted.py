"""Untrusted input: strings that cannot be stored, text that shows nothing, nesting too deep."""

from __future__ import annotations

import json

import pytest

from memoryui.untrusted import MAX_JSON_DEPTH, first_json_problem, is_visible, json_problems, string_problem


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("ok \udfff", "lone UTF-16 surrogate (U+DFFF) at character 3"),
        ("\ud800", "lone UTF-16 surrogate (U+D800) at character 0"),
        ("a\x00b", "NUL character at character 1"),
    ],
)
def test_strings_that_no_text_can_store_are_named_with_their_position(value, reason):
    assert reason in string_problem(value)


@pytest.mark.parametrize("value", ["plain", "用户的幸运数字是 88", "emoji 🙂", "tab\tand\nnewline"])
def test_ordinary_strings_pass(value):
    assert string_problem(value) is None


@pytest.mark.parametrize("value", ["\u200b\u200c\u200d", "\x01\x02", " \u00a0\u3000", "\u202e\ufeff", ""])
def test_text_of_only_invisible_characters_is_not_visible(value):
    assert not is_visible(value)


@pytest.mark.parametrize("value", ["x", "\u200bx", "记", "88"])
def test_text_with_one_visible_character_is_visible(value):
    assert is_visible(value)


def test_json_problems_name_the_path_of_keys_and_values():
    value = json.loads('{"tags": ["ok", "\\udfff"], "nested": {"\\u0000k": 1}}')
    assert list(json_problems(value)) == [
        ("$.tags[1]", "holds a lone UTF-16 surrogate (U+DFFF) at character 0, which no text can store"),
        ("$.nested", "has a key that holds a NUL character at character 0"),
    ]


def test_nesting_is_limited_and_the_check_itself_does_not_recurse():
    deep: object = "leaf"
    for _ in range(50_000):  # far past Python's recursion limit
        deep = [deep]
    assert first_json_problem(deep) == f"$: is nested more than {MAX_JSON_DEPTH} levels deep".replace(
        "$:", "$" + "[0]" * MAX_JSON_DEPTH + ":"
    )
    at_limit: object = "leaf"
    for _ in range(MAX_JSON_DEPTH):
        at_limit = {"k": at_limit}
    assert first_json_problem(at_limit) is None
    assert first_json_problem({"k": at_limit}) is not None
