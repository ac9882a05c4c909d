"""The recall trace list's FilterSet: the parameters the schema documents for it."""

from __future__ import annotations

import pytest

from api.filters_recall import RecallTraceFilterSet
from api.serializers_recall import TRACE_MODES
from recall.models import TRACE_OUTCOMES, RecallTrace

pytestmark = pytest.mark.django_db


def test_the_trace_filters_normalize_the_scope_and_check_source_and_mode():
    filterset = RecallTraceFilterSet({"scope": "main", "source": "web", "mode": "selector"})
    assert not filterset.is_valid()
    assert filterset.form.cleaned_data["scope"] == "agent:main"
    assert filterset.errors["source"] == ["'web' is not one of: " + ", ".join(RecallTrace.Source.values)]


def test_the_schema_documents_the_trace_filters_with_their_enums(alice_client):
    schema = alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/recall/traces/"]["get"]["parameters"]}
    filters = {"scope", "source", "mode", "outcome", "answered", "profile", "q", "within", "since", "until"}
    assert set(parameters) == {*filters, "page", "page_size"}
    assert set(parameters["outcome"]["schema"]["enum"]) == set(TRACE_OUTCOMES)
    assert set(parameters["source"]["schema"]["enum"]) == set(RecallTrace.Source.values)
    assert set(parameters["mode"]["schema"]["enum"]) == set(TRACE_MODES)
