"""The recall trace list's filters as a django-filter FilterSet (see api.filters).

The trace list page (web.filters_traces) runs the same filters, worded for people.
"""

from __future__ import annotations

import datetime as dt

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.utils import dateparse, timezone

from api.filters import PinnedFilter, ScopeFilter, choice_filter
from api.serializers_recall import TRACE_MODES
from recall.models import TRACE_OUTCOMES, RecallTrace

# The recent windows `within` offers: the last hour, day or week.
WITHIN = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(weeks=1)}


class MomentField(forms.Field):
    """A date (2026-11-27) or a date and time (2026-11-27T09:30, with or without an offset), as an aware
    datetime in the current time zone. `end_of_day`: a date alone means its last moment (an `until`
    that names a day includes the whole day)."""

    def __init__(self, *, end_of_day: bool = False, **kwargs):
        self.end_of_day = end_of_day
        super().__init__(**kwargs)

    def to_python(self, value):
        if value in self.empty_values:
            return None
        text = str(value).strip()
        try:  # a date first: parse_datetime reads a date alone as its midnight
            day = dateparse.parse_date(text)
            moment = None if day else dateparse.parse_datetime(text)
        except ValueError:  # well formed, but no such day or time (2026-02-30)
            moment = day = None
        if day is not None:
            moment = dt.datetime.combine(day, dt.time.max if self.end_of_day else dt.time.min)
        if moment is None:
            raise ValidationError(
                "%(value)r is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM", code="invalid", params={"value": text}
            )
        moment = timezone.make_aware(moment) if timezone.is_naive(moment) else moment
        try:  # in UTC: PostgreSQL refuses offsets past ±15:59, which ISO 8601 (and Python) allow
            return moment.astimezone(dt.UTC)
        except OverflowError:  # 9999-12-31T23:00-05:00 is past the last moment there is
            raise ValidationError(
                "%(value)r is out of range: use a moment between the years 1 and 9999",
                code="invalid",
                params={"value": text},
            ) from None


class MomentFilter(django_filters.Filter):
    field_class = MomentField


class TraceRangeForm(forms.Form):
    """A trace list's filter form: `until` must not come before `since`."""

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "must not be before since")
        return data


class RecallTraceFilterSet(django_filters.FilterSet):
    """/api/recall/traces/: by scope, where the recall came from, how it came out, when, and its query's words."""

    scope = ScopeFilter(help_text="Only this scope; `main` means `agent:main`.")
    source = choice_filter(RecallTrace.Source.values, help_text="Only this source.")
    mode = choice_filter(TRACE_MODES, help_text="Only recalls this path answered.")
    outcome = choice_filter(
        TRACE_OUTCOMES,
        method="filter_outcome",
        help_text="`answered` or `silent` (the answerability decision), or the path that answered: "
        "`selector`, `heuristic`, `select`.",
    )
    answered = PinnedFilter(  # true/1/yes or false/0/no, as `pinned` takes them
        help_text="true: the query was answered; false: recall stayed silent."
    )
    profile = django_filters.CharFilter(field_name="profile_name", help_text="Only recalls run with this profile.")
    q = django_filters.CharFilter(
        field_name="query", lookup_expr="icontains", help_text="Plain text, case-insensitive, in the query."
    )
    within = choice_filter(WITHIN, method="filter_within", help_text="Only the recalls of the last hour, day or week.")
    since = MomentFilter(
        field_name="created_at",
        lookup_expr="gte",
        help_text="From this moment on: YYYY-MM-DD or an ISO 8601 date and time.",
    )
    until = MomentFilter(
        field_name="created_at",
        lookup_expr="lte",
        end_of_day=True,
        help_text="Up to this moment: YYYY-MM-DD (the whole day) or an ISO 8601 date and time.",
    )

    class Meta:
        model = RecallTrace
        fields = ()
        form = TraceRangeForm

    def filter_outcome(self, queryset, name, value):
        return queryset.with_outcome(value) if value else queryset

    def filter_within(self, queryset, name, value):
        return queryset.filter(created_at__gte=timezone.now() - WITHIN[value]) if value else queryset
