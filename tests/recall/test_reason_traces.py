"""Traces keep each reason's code beside its words, and a trace saved before reasons had codes (words
only: tests/recall/fixtures/trace_before_reason_codes.json) reads on the recall page exactly as a trace
of the same recall saved now. The recalls are tests/recall/reason_recalls.py's, through the real indexes."""

from __future__ import annotations

import json

import pytest

from memoryui.reasons import Reason
from recall.explain import explain
from recall.models import RecallTrace
from tests.recall.reason_recalls import FIXTURE, run_recalls, write_store

pytestmark = pytest.mark.django_db

REASON_LISTS = ("reasons", "label_reasons", "signals")


@pytest.fixture(scope="module")
def saved_before() -> dict[str, dict]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture
def saved_now(indexes, write) -> dict[str, dict]:
    """The same recalls run now, each saved as a trace and read back from the database."""
    traces = run_recalls(write_store(write))
    saved = {name: RecallTrace.create_from(fields, source="cli", actor="test") for name, fields in traces.items()}
    return {name: RecallTrace.objects.get(pk=trace.pk).result for name, trace in saved.items()}


def page(run: dict) -> dict:
    """What the recall page says of a recall: its summary, the selector's state, each candidate's sentence."""
    explained = explain(run)
    rows = [
        (group.stage, group.summary, [(row.candidate.get("text"), row.why, row.cause) for row in group.rows])
        for group in explained.groups
    ]
    return {"summary": explained.summary, "selector": explained.selector, "groups": rows}


def words(run: dict) -> dict:
    """Every reason of a recall in words, as the API gives them; memories named by their text, not their id."""
    candidates = []
    for c in run["candidates"]:
        block = {key: value for key, value in (c["block"] or {}).items() if key != "id"}
        paths = [(c[path]["decision"], c[path]["reasons"]) if c[path] else None for path in ("heuristic", "selector")]
        candidates.append((c["text"], c["decision"], *(c[key] for key in REASON_LISTS), *paths, block))
    answer = run["answer"] and run["answer"]["reason"]
    return {
        "mode": run["mode"],
        "fallback_reason": run["fallback_reason"],
        "answer": answer,
        "notices": run["notices"],
        "selected": [s["text"] for s in run["selected"]],
        "candidates": candidates,
    }


def test_a_trace_saved_before_reason_codes_reads_as_one_saved_now(saved_before, saved_now):
    assert set(saved_now) == set(saved_before)
    for name, before in saved_before.items():
        assert "reason_codes" not in json.dumps(before), name  # words only
        assert page(before["result"]) == page(saved_now[name]), name


def test_the_words_of_every_reason_are_what_they_were(saved_before, saved_now):
    for name, before in saved_before.items():
        assert words(saved_now[name]) == words(before["result"]), name


def test_a_trace_keeps_each_reasons_code_beside_its_words(saved_now):
    free_text = []
    for name, run in saved_now.items():
        fallback, code = run["fallback_reason"], run["fallback_reason_code"]
        assert (code is None) if fallback is None else Reason.from_dict(code) == fallback, name
        if run["answer"]:
            assert Reason.from_dict(run["answer"]["reason_code"]) == run["answer"]["reason"], name
        for c in run["candidates"]:
            lists = [(c, key) for key in REASON_LISTS] + [(c[p], "reasons") for p in ("heuristic", "selector") if c[p]]
            for data, key in lists:
                codes = [Reason.from_dict(code) for code in data[key.removesuffix("s") + "_codes"]]
                assert codes == data[key], (name, key)
                free_text += [reason for reason in codes if reason.code == "free_text"]
    assert free_text and set(free_text) == {"relevant"}  # only the selector model's own words
