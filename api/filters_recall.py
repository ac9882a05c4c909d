"""The recall trace list's filters as a django-filter FilterSet (see api.filters)."""

from __future__ import annotations

import django_filters

from api.filters import ScopeFilter, choice_filter
from api.serializers_recall import TRACE_MODES
from recall.models import RecallTrace


class RecallTraceFilterSet(django_filters.FilterSet):
    """/api/recall/traces/: by scope, by where the recall came from, by the path that answered it."""

    scope = ScopeFilter(help_text="Only this scope; `main` means `agent:main`.")
    source = choice_filter(RecallTrace.Source.values, help_text="Only this source.")
    mode = choice_filter(TRACE_MODES, help_text="Only recalls this path answered.")

    class Meta:
        model = RecallTrace
        fields = ()
