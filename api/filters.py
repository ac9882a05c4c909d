"""The list filters as django-filter FilterSets: one declaration parses, checks and applies them.

The API runs them through DRF's DjangoFilterBackend (a bad value raises ValidationError, which
`api.rest.exception_handler` answers as a 400 naming each bad parameter) and drf-spectacular
documents their parameters from them. The memory list page runs `MemoryListFilterSet`: the same
filters, worded for people, whose form is the page's filter form.
"""

from __future__ import annotations

import re
import uuid

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q
from django_filters.fields import ChoiceField

from memoryui import rules
from memoryui.models import Memory, MemoryEvent

ALL_STATUSES = "all"
STATUS_FILTERS = (*rules.STATUSES, ALL_STATUSES)
MEMORY_ORDERINGS = (
    "created_at", "updated_at", "importance", "confidence", "access_count", "accessed_at", "kind", "tier", "scope",
)  # fmt: skip
PINNED_SPELLINGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


# --- fields: parse one query parameter, or say what is wrong with it -----------------------
# A message holding the caller's value passes it as a parameter: DRF's translation formats
# every message with its params, so a literal "%" in a value must never reach the format string.


class ScopeField(forms.CharField):
    """A scope as the write path stores it: a bare `main` is `agent:main` (rules.normalize_scope).

    strict: a value that is not a scope is an error saying why. Otherwise it is kept as typed,
    so a legacy row holding it can still be found.
    """

    def __init__(self, *, strict: bool = True, **kwargs):
        self.strict = strict
        # Strict leaves the value unstripped: normalize_scope strips it and calls a blank one missing.
        kwargs.setdefault("strip", not strict)
        super().__init__(**kwargs)

    def clean(self, value):
        value = super().clean(value)
        if value in self.empty_values:
            return value
        try:
            return rules.normalize_scope(value)
        except rules.ScopeError as exc:
            if not self.strict:
                return value
            raise ValidationError("%(reason)s", code="invalid", params={"reason": str(exc)}) from None


class PinnedField(forms.Field):
    """true/1/yes or false/0/no, in any case; blank means either."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return PINNED_SPELLINGS[str(value).lower()]
        except KeyError:
            raise ValidationError("must be true or false", code="invalid") from None


class UUIDValueField(forms.Field):
    """A UUID exactly as given (not stripped: padding is an error, as any other bad value)."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise ValidationError("%(value)r is not a UUID", code="invalid", params={"value": value}) from None


class StatusField(ChoiceField):
    """A memory status or `all`; blank means active."""

    def clean(self, value):
        return super().clean(value) or rules.Status.ACTIVE.value


def ordering_pattern(orderings: tuple[str, ...]) -> str:
    """The regex of an `ordering` value: names of `orderings`, `-` for descending, comma-separated."""
    one = "-?(?:" + "|".join(orderings) + ")"
    return f"^{one}(?:,{one})*$"


class OrderingField(forms.Field):
    """Comma-separated names of `orderings`, `-` for descending (ordering_pattern, as the schema says)."""

    def __init__(self, *, orderings: tuple[str, ...], **kwargs):
        self.orderings = orderings
        self.pattern = re.compile(ordering_pattern(orderings))
        super().__init__(**kwargs)

    def clean(self, value) -> list[str]:
        if value in (None, ""):  # absent, or left empty as a form sends it
            return []
        ordering = str(value).split(",")
        if not self.pattern.fullmatch(str(value)):
            message = f"order by one of: {', '.join(self.orderings)} (prefix - for descending)"
            raise ValidationError(message, code="invalid")
        return ordering


# --- filters -------------------------------------------------------------------------------


class ScopeFilter(django_filters.CharFilter):
    """One scope, normalized (see ScopeField)."""

    field_class = ScopeField


class PinnedFilter(django_filters.BooleanFilter):
    field_class = PinnedField


class UUIDValueFilter(django_filters.UUIDFilter):
    field_class = UUIDValueField


class StatusFilter(django_filters.ChoiceFilter):
    """Memories of one status (default active); `all` keeps every status."""

    field_class = StatusField

    def filter(self, qs, value):
        return qs if value == ALL_STATUSES else qs.filter(status=value)


class TextFilter(django_filters.CharFilter):
    """Plain text, case-insensitive, in a memory's text or its entity key."""

    def filter(self, qs, value):
        if not value:
            return qs
        return qs.filter(Q(text__icontains=value) | Q(entity_key__icontains=value))


class OrderingFilter(django_filters.CharFilter):
    """Order by the given fields (see OrderingField), then by id to keep pages stable among ties."""

    field_class = OrderingField

    def filter(self, qs, value):
        return qs.order_by(*value, "-id") if value else qs


def choice_filter(
    values, *, message: str = "%(value)r is not one of: {choices}", filter_class=django_filters.ChoiceFilter, **kwargs
) -> django_filters.ChoiceFilter:
    """A filter on one of `values`; a bad value is an error listing them (`message`'s {choices})."""
    values = tuple(values)
    return filter_class(
        choices=[(value, value.replace("_", " ")) for value in values],
        error_messages={"invalid_choice": message.format(choices=", ".join(values))},
        **kwargs,
    )


# --- filter sets ---------------------------------------------------------------------------
# Filters are declared in the order their errors are listed in a 400.


class MemoryFilterSet(django_filters.FilterSet):
    """/api/memories/: every filter optional; only active memories unless `status` says otherwise."""

    status = choice_filter(
        STATUS_FILTERS, filter_class=StatusFilter, help_text="Default `active`; `all` for every status."
    )
    scope = ScopeFilter(help_text="Only this scope; normalized, so `main` means `agent:main`.")
    kind = choice_filter(rules.KINDS, help_text="Only this kind.")
    tier = choice_filter(rules.TIERS, help_text="Only this tier.")
    source = choice_filter(rules.SOURCES, help_text="Only memories written by this source.")
    pinned = PinnedFilter(help_text="true or false.")
    q = TextFilter(help_text="Plain text, case-insensitive, in the text or the entity key.")
    ordering = OrderingFilter(
        orderings=MEMORY_ORDERINGS,
        help_text=f"Comma-separated, `-` for descending: {', '.join(MEMORY_ORDERINGS)}.",
    )

    class Meta:
        model = Memory
        fields = ()


class EventFilterSet(django_filters.FilterSet):
    """/api/events/: the history across the store, by memory, batch, action, actor or scope."""

    memory = UUIDValueFilter(field_name="memory_id", help_text="Only this memory's events.")
    batch = UUIDValueFilter(help_text="Only the events of one bulk action.")
    action = choice_filter(MemoryEvent.Action.values, help_text="Only this action.")
    actor = django_filters.CharFilter(strip=False, help_text="e.g. `user:alice`, `token:agent`.")
    scope = ScopeFilter(field_name="memory__scope", help_text="Only events of memories in this scope.")

    class Meta:
        model = MemoryEvent
        fields = ()
