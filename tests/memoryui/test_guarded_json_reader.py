"""memoryui.jsontext, the one reader of JSON text memoryui did not write: the API's limits (size,
32 levels, numbers a JSON client reads back), the place named, and no recursion into deep text."""

from __future__ import annotations

import json
import sys

import pytest

from memoryui import jsontext
from memoryui.untrusted import MAX_JSON_DEPTH


def nested_arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_objects(depth: int) -> str:
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_a_document_nested_to_the_limit_is_read_and_one_level_more_is_refused_naming_the_place():
    assert jsontext.loads(nested_objects(MAX_JSON_DEPTH)) == json.loads(nested_objects(MAX_JSON_DEPTH))

    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(nested_objects(MAX_JSON_DEPTH + 1))

    assert refused.value.code == jsontext.TOO_DEEP
    assert refused.value.reason == f"is nested more than {MAX_JSON_DEPTH} levels deep"
    assert refused.value.path == "$" + ".a" * MAX_JSON_DEPTH


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_thousands_of_levels_are_refused_by_measure_without_recursing(depth):
    text = '{"messages": [' + nested_arrays(depth) + "]}"

    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(text)

    assert refused.value.code == jsontext.TOO_DEEP
    assert refused.value.path == "$.messages" + "[0]" * (MAX_JSON_DEPTH - 1)
    assert refused.value.depth == depth + 2
    assert (refused.value.line, refused.value.column) == (1, 15 + MAX_JSON_DEPTH - 2)


def test_deep_text_is_refused_even_by_a_caller_already_deep_in_its_own_stack():
    # Python's decoder recurses once a level: a caller near the recursion limit would see a
    # RecursionError from text a few hundred levels deep. The reader never hands such text over.
    def at_depth(remaining: int) -> jsontext.JSONTextError:
        if remaining:
            return at_depth(remaining - 1)
        with pytest.raises(jsontext.JSONTextError) as refused:
            jsontext.loads(nested_arrays(500))
        return refused.value

    assert at_depth(sys.getrecursionlimit() - 200).code == jsontext.TOO_DEEP


def test_brackets_inside_strings_are_text_not_nesting():
    text = json.dumps({"a": "[" * 5000, "b": '"{\\' * 100, "c": [["]]]]]]"]]})

    assert jsontext.loads(text) == json.loads(text)
    assert jsontext.nesting(text) == 3


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("NaN", "NaN is not a number JSON allows"),
        ('{"x": -Infinity}', "-Infinity is not a number JSON allows"),
        ('{"x": 1e999}', "the number 1e999 is too large"),
        ('{"x": -1e400}', "the number -1e400 is too large"),
        ("9" * 5000, "Exceeds the limit (4300 digits)"),
    ],
)
def test_numbers_no_json_client_reads_back_are_refused(text, reason):
    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(text)

    assert refused.value.code == jsontext.NUMBER
    assert reason in refused.value.reason


def test_text_that_is_not_json_says_where():
    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads('{"a": 1,\n "b": }')

    error = refused.value
    assert (error.code, error.reason, error.line, error.column, error.position) == (
        jsontext.SYNTAX,
        "Expecting value",
        2,
        7,
        15,
    )
    assert str(error) == "Expecting value (line 2, column 7)"


def test_text_broken_before_it_gets_deep_is_a_syntax_error_where_it_breaks():
    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads("[1 2 " + nested_arrays(5000))

    assert (refused.value.code, refused.value.position) == (jsontext.SYNTAX, 3)


def test_a_document_larger_than_the_api_takes_is_refused(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    within = json.dumps({"text": "x" * 900})
    assert jsontext.loads(within) == {"text": "x" * 900}

    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(json.dumps({"text": "é" * 500}, ensure_ascii=False))  # 500 characters, 1,000 bytes

    assert refused.value.code == jsontext.TOO_LARGE
    assert refused.value.reason == "is 1,012 bytes; at most 1,000 (the API's DATA_UPLOAD_MAX_MEMORY_SIZE)"


def test_the_root_names_the_document_in_the_path():
    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(nested_objects(40), root="metadata")

    assert refused.value.path == "metadata" + ".a" * MAX_JSON_DEPTH
    assert str(refused.value) == f"metadata{'.a' * MAX_JSON_DEPTH} is nested more than 32 levels deep"


def test_a_path_through_long_keys_is_cut_to_its_head():
    key = "k" * 500
    with pytest.raises(jsontext.JSONTextError) as refused:
        jsontext.loads(json.dumps({key: json.loads(nested_arrays(40))}))

    assert len(refused.value.path) == jsontext.PATH_MAX_CHARS and refused.value.path.endswith("…")
