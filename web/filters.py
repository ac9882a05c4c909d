"""The memory list page's filters: the API's (api.filters), worded and shaped for the page's form."""

from __future__ import annotations

import django_filters
from django import forms

from api.filters import STATUS_FILTERS, MemoryFilterSet, ScopeFilter, StatusFilter, TextFilter, choice_filter
from memoryui import rules
from memoryui.models import Memory
from web.forms import MemoryListForm

PINNED_CHOICES = {"yes": True, "no": False}  # the list page's select


def _page_choice(noun: str, values, **kwargs) -> django_filters.ChoiceFilter:
    return choice_filter(values, message=f"%(value)r is not a {noun}; use one of: {{choices}}", **kwargs)


class MemoryListFilterSet(MemoryFilterSet):
    """The memory list page (/memories/): the API's filters, worded and shaped for its form.

    Its form is MemoryListForm (search mode, sort, page) plus these filters' fields, and the page
    renders it. Differences from the API: pinned is the select's yes/no, a scope that is not one
    is matched as typed, and the order is the form's `sort` (no `ordering`).
    """

    q = TextFilter(
        max_length=1000,
        label="Search",
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "words, a name, a number, an id", "autocomplete": "off"}
        ),
    )
    scope = ScopeFilter(
        strict=False,
        max_length=rules.SCOPE_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "any scope", "list": "scope-options", "autocomplete": "off"}),
    )
    kind = _page_choice("kind", rules.KINDS, empty_label="any")
    tier = _page_choice("tier", rules.TIERS, empty_label="any")
    status = _page_choice(
        "status",
        STATUS_FILTERS,
        filter_class=StatusFilter,
        empty_label=None,
        widget=forms.Select(attrs={"data-default": rules.Status.ACTIVE.value}),
    )
    pinned = django_filters.ChoiceFilter(
        choices=[("yes", "pinned"), ("no", "not pinned")],
        empty_label="any",
        method="filter_pinned",
        error_messages={"invalid_choice": "%(value)r is not a pinned filter; use yes or no"},
    )
    source = _page_choice("source", rules.SOURCES, empty_label="any")
    ordering = None

    class Meta(MemoryFilterSet.Meta):
        form = MemoryListForm

    def filter_pinned(self, queryset, name, value):
        return queryset.filter(pinned=PINNED_CHOICES[value])

    def filter_queryset(self, queryset):
        # FilterSet's own loop would take the form's match, sort and page for filters.
        data = self.form.cleaned_data
        for name, filter_ in self.filters.items():
            if name in data:
                queryset = filter_.filter(queryset, data[name])
        return queryset.order_by(*self.form.order_by())

    # Call these after is_valid().

    def hybrid(self) -> bool:
        """Whether the search box runs hybrid search (a query, in hybrid mode, over active memories)."""
        data = self.form.cleaned_data
        return bool(data["q"]) and data["match"] == "hybrid" and data["status"] == rules.Status.ACTIVE

    def keeps(self, memory: Memory) -> bool:
        """Whether a search hit also passes the other filters (search itself filters by scope)."""
        data = self.form.cleaned_data
        pinned = PINNED_CHOICES.get(data["pinned"])
        return (
            (not data["kind"] or memory.kind == data["kind"])
            and (not data["tier"] or memory.tier == data["tier"])
            and (not data["source"] or memory.source == data["source"])
            and (pinned is None or memory.pinned == pinned)
        )

    def has_filters(self) -> bool:
        data = self.form.cleaned_data
        return any(data.get(name) for name in ("q", "scope", "kind", "tier", "pinned", "source")) or (
            data.get("status") != rules.Status.ACTIVE
        )
