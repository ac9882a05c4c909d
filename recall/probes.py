"""The queries a scope was asked, for measuring its vector search (searchindex.tuning.asked).

A scope's HNSW graph is measured with real queries where there are enough of them: the texts of
its latest recall traces (agents' and people's recalls, sampled at MEMORYUI_RECALL_TRACE_RATE and
kept for MEMORYUI_RECALL_RETENTION_DAYS), then of its golden sets' queries. The connection is made
when the app is ready (recall/apps.py).
"""

from __future__ import annotations

from recall.models import GoldenQuery, RecallTrace
from searchindex import probes as searchindex_probes

# Traces read per query wanted: an agent asks some queries again and again.
OVERREAD = 4


def scope_queries(sender, *, scope: str, limit: int, **kwargs) -> list[str]:
    """Up to `limit` distinct query texts of `scope`: its newest traces' first, then its golden queries."""
    found: dict[str, None] = {}
    traced = RecallTrace.objects.filter(scope=scope).order_by("-created_at", "-id")
    for text in traced.values_list("query", flat=True)[: limit * OVERREAD]:
        found.setdefault(text, None)
    if len(found) < limit:
        golden = GoldenQuery.objects.filter(golden_set__scope=scope).order_by("-created_at", "-id")
        for text in golden.values_list("query", flat=True)[: limit * OVERREAD]:
            found.setdefault(text, None)
    return list(found)[:limit]


def connect() -> None:
    searchindex_probes.asked.connect(scope_queries, dispatch_uid="recall.probes.scope_queries")
