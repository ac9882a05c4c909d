"""The list's cheap formatting filters give what the built-ins would."""

from __future__ import annotations

from datetime import UTC, datetime

from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import floatformat, truncatechars
from django.utils import timezone

from memoryui.templatetags.memoryui_format import fixed2, isotime, minute, shorten, words


def test_shorten_matches_truncatechars():
    for text in ("", "short", "x" * 140, "y" * 141, "在吗?" * 60):
        assert shorten(text, 140) == truncatechars(text, 140)


def test_minute_and_isotime_match_the_date_filter():
    value = datetime(2026, 11, 22, 2, 36, 5, 123456, tzinfo=UTC)
    assert minute(value) == date_filter(value, "Y-m-d H:i")
    assert isotime(value) == timezone.localtime(value).isoformat()
    assert minute(None) == isotime(None) == ""


def test_fixed2_matches_floatformat():
    for value in (0.0, 0.5, 0.955, 1.0, 0.12345, 0.125, 0.135):
        assert fixed2(value) == floatformat(value, 2)


def test_words_spells_out_a_count_key():
    assert words("typed_added") == "typed added"
    assert words("tombstone") == "tombstone"
