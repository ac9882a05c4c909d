"""Whole numbers from the environment: a value that is not one, or is out of its range, stops the
start with the variable's name, the value and what it takes; an unset or empty one is the default."""

from __future__ import annotations

import importlib.util

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_int


@pytest.mark.parametrize(
    ("value", "bounds", "expected"),
    [
        (None, {}, 7),
        ("", {"low": 1}, 7),
        (" 12 ", {"low": 1, "high": 100}, 12),
        ("0", {"low": 0}, 0),
        ("-3", {}, -3),
        ("100", {"low": 4, "high": 100}, 100),
    ],
)
def test_a_whole_number_in_its_range_or_the_default(monkeypatch, value, bounds, expected):
    if value is None:
        monkeypatch.delenv("MEMORYUI_TEST_NUMBER", raising=False)
    else:
        monkeypatch.setenv("MEMORYUI_TEST_NUMBER", value)
    assert env_int("MEMORYUI_TEST_NUMBER", 7, **bounds) == expected


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        ("ten", {}, "MEMORYUI_TEST_NUMBER='ten': a whole number"),
        ("2.5", {"low": 1}, "MEMORYUI_TEST_NUMBER='2.5': a whole number, at least 1"),
        ("0", {"low": 1}, "MEMORYUI_TEST_NUMBER='0': a whole number, at least 1"),
        ("-1", {"low": 0}, "MEMORYUI_TEST_NUMBER='-1': a whole number, at least 0"),
        ("101", {"low": 4, "high": 100}, "MEMORYUI_TEST_NUMBER='101': a whole number from 4 to 100"),
        ("9", {"high": 8}, "MEMORYUI_TEST_NUMBER='9': a whole number, at most 8"),
    ],
)
def test_anything_else_names_the_variable_and_what_it_takes(monkeypatch, value, bounds, message):
    monkeypatch.setenv("MEMORYUI_TEST_NUMBER", value)
    with pytest.raises(ImproperlyConfigured) as raised:
        env_int("MEMORYUI_TEST_NUMBER", 7, **bounds)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("MEMORYUI_RECALL_RETENTION_DAYS", "0", "MEMORYUI_RECALL_RETENTION_DAYS='0': a whole number, at least 1"),
        ("MEMORYUI_DRY_RUN_CONCURRENCY", "-2", "MEMORYUI_DRY_RUN_CONCURRENCY='-2': a whole number, at least 1"),
        ("MEMORYUI_LIST_PAGE_SIZE", "fifty", "MEMORYUI_LIST_PAGE_SIZE='fifty': a whole number"),
    ],
)
def test_the_settings_refuse_to_load_with_a_bad_number(monkeypatch, name, value, message):
    """The settings module read afresh (a copy: the loaded settings are untouched)."""
    monkeypatch.setenv(name, value)
    spec = importlib.util.find_spec("config.settings")
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(ImproperlyConfigured) as raised:
        spec.loader.exec_module(module)
    assert str(raised.value) == message
