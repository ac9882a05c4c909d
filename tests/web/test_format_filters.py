"""The list's cheap formatting filters give what the built-ins would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import floatformat, truncatechars
from django.utils import timezone

from web.templatetags.memoryui_format import fixed2, minute, or_dash, shorten, when, words


def test_shorten_matches_truncatechars():
    for text in ("", "short", "x" * 140, "y" * 141, "在吗?" * 60):
        assert shorten(text, 140) == truncatechars(text, 140)


def test_minute_matches_the_date_filter():
    value = datetime(2026, 11, 22, 2, 36, 5, 123456, tzinfo=UTC)
    assert minute(value) == date_filter(value, "Y-m-d H:i")
    assert minute(None) == ""


def test_fixed2_matches_floatformat():
    for value in (0.0, 0.5, 0.955, 1.0, 0.12345, 0.125, 0.135):
        assert fixed2(value) == floatformat(value, 2)


def test_words_spells_out_a_count_key():
    assert words("typed_added") == "typed added"
    assert words("tombstone") == "tombstone"


def test_when_reads_as_a_person_would_with_the_exact_time_on_hover():
    now = timezone.now()
    recent = when(now - timedelta(minutes=3))
    assert ">3\xa0minutes ago</time>" in recent
    exact = timezone.localtime(now - timedelta(minutes=3)).strftime("%Y-%m-%d %H:%M:%S")
    assert f'title="{exact} ' in recent  # to the second, with the zone: no microseconds, no ISO "T"
    assert ">just now<" in when(now)
    assert ">in 2\xa0days</time>" in when(now + timedelta(days=2, minutes=1))
    old = datetime(2026, 3, 12, 14, 5, 59, 123456, tzinfo=UTC)
    assert ">12 Mar 2026, 14:05</time>" in when(old)
    assert "123456" not in when(old)


def test_an_empty_value_is_one_dash_everywhere():
    for empty in (None, "", {}, []):
        assert or_dash(empty) == when(None) == '<span class="muted" data-empty>—</span>'
    assert or_dash("phone:1") == "phone:1"
    assert or_dash(0) == 0
