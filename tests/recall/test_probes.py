"""The queries a scope was asked (recall/probes.py), which its vector search is measured with
(searchindex/tuning.py): its newest traces' first, then its golden queries, distinct, one scope's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from recall.models import GoldenQuery, GoldenSet, RecallTrace
from searchindex.probes import asked_queries

pytestmark = pytest.mark.django_db


def trace(query: str, *, scope: str = "agent:main", minutes_ago: int = 0) -> RecallTrace:
    return RecallTrace.objects.create(
        source="api", actor="token:agent", scope=scope, query=query, limit=5, profile_name="default",
        mode="heuristic", knobs={}, result={}, created_at=timezone.now() - timedelta(minutes=minutes_ago),
    )  # fmt: skip


def test_a_scope_is_asked_its_newest_traced_queries_first_each_once():
    trace("where is the VPN config?", minutes_ago=30)
    trace("who is on call?", minutes_ago=20)
    trace("where is the VPN config?", minutes_ago=10)  # asked again
    trace("lunch menu", scope="agent:other", minutes_ago=5)

    assert asked_queries("agent:main", 10) == ["where is the VPN config?", "who is on call?"]
    assert asked_queries("agent:other", 10) == ["lunch menu"]
    assert asked_queries("agent:nobody", 10) == []


def test_golden_queries_follow_the_traces_and_the_limit_holds():
    golden = GoldenSet.objects.create(name="basics", scope="agent:main")
    GoldenQuery.objects.create(golden_set=golden, query="the user's phone number", expected_ids=[])
    GoldenQuery.objects.create(golden_set=golden, query="who is on call?", expected_ids=[])
    elsewhere = GoldenSet.objects.create(name="basics", scope="agent:other")
    GoldenQuery.objects.create(golden_set=elsewhere, query="not this scope's", expected_ids=[])
    trace("who is on call?")

    assert asked_queries("agent:main", 10) == ["who is on call?", "the user's phone number"]
    assert asked_queries("agent:main", 1) == ["who is on call?"]
