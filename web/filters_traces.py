"""The trace list page's filters: the API's (api.filters_recall), worded and shaped for the page's form."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import F

from api.filters import ScopeFilter, choice_filter
from api.filters_recall import WITHIN, MomentFilter, RecallTraceFilterSet, TraceRangeForm
from memoryui import rules
from recall.models import TRACE_OUTCOMES, RecallTrace

OUTCOME_WORDS = {
    "answered": "answered",
    "silent": "silent",
    "selector": "by the selector",
    "heuristic": "by the heuristic",
    "select": "by select:",
}
WITHIN_WORDS = {"hour": "last hour", "day": "last day", "week": "last week"}
FILTERS = ("q", "scope", "profile", "source", "outcome", "within", "since", "until")


def _page_choice(a_noun: str, values, words: dict | None = None, **kwargs) -> django_filters.ChoiceFilter:
    filter_ = choice_filter(values, message=f"%(value)r is not {a_noun}; use one of: {{choices}}", **kwargs)
    if words:
        filter_.extra["choices"] = [(value, words[value]) for value in values]
    return filter_


# The list's orders: newest first unless asked; traces of one moment keep a stable order by id.
SORTS = {
    "newest": ("newest first", (F("created_at").desc(), F("pk").desc())),
    "oldest": ("oldest first", (F("created_at").asc(), F("pk").asc())),
    "slowest": ("slowest first", (F("latency_ms").desc(nulls_last=True), F("created_at").desc(), F("pk").desc())),
    "largest": ("largest block first", (F("block_size").desc(), F("created_at").desc(), F("pk").desc())),
}


class TraceListForm(TraceRangeForm):
    """The page's own parameters besides the filters: the order and the page number."""

    field_order = (*FILTERS, "sort", "page")

    sort = forms.ChoiceField(
        required=False,
        label="Sort",
        choices=[(key, words) for key, (words, _) in SORTS.items()],
        error_messages={"invalid_choice": f"%(value)r is not a sort order; use one of: {', '.join(SORTS)}"},
    )
    page = forms.IntegerField(
        required=False,
        min_value=1,
        error_messages={"invalid": "page must be a whole number", "min_value": "page must be 1 or more"},
    )


class TraceListFilterSet(RecallTraceFilterSet):
    """The trace list page (/recall/traces/): the API's filters, worded for its form, and a sort order.

    Differences from the API: a scope that is not one is matched as typed (a legacy row may hold
    it); the path that answered is one of the outcomes, so there is no `mode` and no `answered`.
    """

    q = django_filters.CharFilter(
        field_name="query",
        lookup_expr="icontains",
        max_length=1000,
        label="Search queries",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "words of the query", "autocomplete": "off"}),
    )
    scope = ScopeFilter(
        strict=False,
        label="Scope",
        max_length=rules.SCOPE_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "any scope", "list": "scope-options", "autocomplete": "off"}),
    )
    profile = django_filters.CharFilter(
        field_name="profile_name",
        max_length=64,
        label="Profile",
        widget=forms.TextInput(attrs={"placeholder": "any profile", "list": "profile-options", "autocomplete": "off"}),
    )
    source = _page_choice("a source", RecallTrace.Source.values, label="Source", empty_label="any")
    outcome = _page_choice(
        "an outcome", TRACE_OUTCOMES, OUTCOME_WORDS, method="filter_outcome", label="Outcome", empty_label="any"
    )
    within = _page_choice(
        "a time window", WITHIN, WITHIN_WORDS, method="filter_within", label="When", empty_label="any time"
    )
    since = MomentFilter(
        field_name="created_at", lookup_expr="gte", label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = MomentFilter(
        field_name="created_at",
        lookup_expr="lte",
        end_of_day=True,
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    mode = None
    answered = None

    class Meta(RecallTraceFilterSet.Meta):
        form = TraceListForm

    def filter_queryset(self, queryset):
        # FilterSet's own loop would take the form's page for a filter.
        data = self.form.cleaned_data
        for name, filter_ in self.filters.items():
            if name in data:
                queryset = filter_.filter(queryset, data[name])
        return queryset.order_by(*SORTS[data.get("sort") or "newest"][1])

    # Call these after is_valid().

    def has_filters(self) -> bool:
        return any(self.form.cleaned_data.get(name) for name in FILTERS)
