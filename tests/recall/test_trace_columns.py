"""A trace's list columns (answered, latency_ms, block_size) are read from its recall: on save, and by
the migration that back-fills the traces saved before the columns existed."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.utils import timezone

from recall.models import RecallTrace, trace_columns
from recall.pipeline import recall

pytestmark = pytest.mark.django_db

migration = importlib.import_module("recall.migrations.0007_trace_columns")


def stored(answered: bool | None, total: float | None, selected: int) -> dict:
    """A recall's JSON as a trace holds it, cut to what the columns read."""
    return {
        "answer": None if answered is None else {"answered": answered, "reason": "x", "signals": {}},
        "selected": [{"id": f"00000000-0000-0000-0000-00000000000{n}", "text": "t"} for n in range(selected)],
        "timings_ms": {} if total is None else {"search": 3.0, "total": total},
        "candidates": [],
        "block": "",
    }


def saved_row(result: dict) -> RecallTrace:
    """A trace as a database holds it before the back-fill: the columns at their defaults."""
    return RecallTrace.objects.create(
        source="api", actor="token:agent", scope="agent:main", query="phone", limit=5, profile_name="default",
        knobs={}, mode="heuristic", result=result, created_at=timezone.now(),
    )  # fmt: skip


def test_the_columns_say_answered_or_silent_the_total_time_and_how_many_were_handed_over():
    assert trace_columns(stored(True, 41.237, 2)) == {"answered": True, "latency_ms": 41.24, "block_size": 2}
    assert trace_columns(stored(False, 12.0, 0)) == {"answered": False, "latency_ms": 12.0, "block_size": 0}
    # select: has no answerability decision (it picks by id); an old trace may hold no timings.
    assert trace_columns(stored(None, None, 1)) == {"answered": True, "latency_ms": None, "block_size": 1}


def test_the_migration_fills_one_row_from_its_result():
    trace = saved_row(stored(False, 87.5, 0))
    trace.answered, trace.block_size = True, 3  # as wrong as a default can be
    migration.fill_columns(trace)
    assert (trace.answered, trace.latency_ms, trace.block_size) == (False, 87.5, 0)


def test_the_back_fill_reads_every_saved_trace_and_going_back_undoes_nothing():
    silent = saved_row(stored(False, 15.0, 0))
    answered = saved_row(stored(True, 230.0, 3))
    broken = saved_row({"timings_ms": {"total": "soon"}, "selected": None})
    RecallTrace.objects.update(answered=True, latency_ms=None, block_size=0)
    migration.back_fill(apps, None)
    rows = {t.pk: (t.answered, t.latency_ms, t.block_size) for t in RecallTrace.objects.all()}
    assert rows == {silent.pk: (False, 15.0, 0), answered.pk: (True, 230.0, 3), broken.pk: (True, None, 0)}
    migration.Migration.operations[-1].reverse_code(apps, None)  # the columns go with the fields
    assert RecallTrace.objects.get(pk=silent.pk).answered is False


def test_a_recall_saved_as_a_trace_fills_its_columns(indexes, write):
    write("The user's phone number is 18600000000.", kind="entity", entity_key="phone:18600000000")
    result = recall("18600000000", scope="agent:main", selector_config=None)
    trace = RecallTrace.objects.get(pk=RecallTrace.record(result, source="cli", actor="cli:recall").pk)
    assert trace.answered is True and trace.block_size == len(result.selected) == 1
    assert trace.latency_ms == round(result.timings_ms["total"], 2) and trace.latency_ms > 0
    silent = recall("quantum entanglement of distant galaxies", scope="agent:main", selector_config=None)
    assert not silent.answered
    saved = RecallTrace.create_from(RecallTrace.fields_of(silent), source="playground", actor="user:alice")
    assert (saved.answered, saved.block_size) == (False, 0)


def test_a_run_signed_before_the_columns_existed_still_gets_them():
    fields = {
        "created_at": timezone.now().isoformat(), "scope": "agent:main", "query": "phone", "tools": [], "limit": 5,
        "profile_name": "default", "knobs": {}, "mode": "heuristic", "fallback_reason": "", "selected_ids": [],
        "result": stored(False, 9.5, 0),
    }  # fmt: skip
    trace = RecallTrace.create_from(fields, source="playground", actor="user:alice")
    assert (trace.answered, trace.latency_ms, trace.block_size) == (False, 9.5, 0)
