"""Traces keep each reason's code beside its words, and a trace saved before reasons had codes (words
only: tests/recall/fixtures/trace_before_reason_codes.json) reads on the recall page exactly as a trace
of the same recall saved now. The recalls are tests/recall/reason_recalls.py's, through the real indexes."""

from __future__ import annotations

import json
import math
import re

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


NUMBER = re.compile(r"(rank |Ranked )?([-+]?\d+(?:\.(\d+))?)(%|st|nd|rd|th)?")
DRIFT = 0.005  # how far a similarity or a share may move between CPUs


def same_reading(now, then, where: str = "") -> list[str]:
    """Where `now` reads otherwise than `then`: every word and every structure the same, counts
    (limits, sizes) the same, each decimal within DRIFT or one unit of its last digit of its value
    then, a percentage within one point, and a rank within one place (two candidates within DRIFT
    of each other may swap).

    The recalls are computed again, and the int8 embedding model rounds otherwise on a CPU with
    other vector instructions (AVX-512 VNNI or AVX2): a similarity of 0.020 may be 0.022 there.
    """
    differs = [f"{where}: {now!r} != {then!r}"]
    if isinstance(now, float) and isinstance(then, float):
        return [] if math.isclose(now, then, abs_tol=DRIFT) else differs
    if isinstance(now, str) and isinstance(then, str):
        if NUMBER.sub("#", now) != NUMBER.sub("#", then):
            return differs
        for a, b in zip(NUMBER.findall(now), NUMBER.findall(then), strict=True):
            (rank, value, places, suffix), (rank_then, value_then, places_then, suffix_then) = a, b
            if (rank, suffix) != (rank_then, suffix_then):
                return differs
            if suffix == "%" or rank or suffix in ("st", "nd", "rd", "th"):
                allowed = 1.0
            elif places or places_then:
                allowed = max(DRIFT, 10.0 ** -max(len(places), len(places_then)))
            else:
                allowed = 0.0
            if abs(float(value) - float(value_then)) > allowed + 1e-9:
                return differs
        return []
    if isinstance(now, dict) and isinstance(then, dict):
        if now.keys() != then.keys():
            return [f"{where}: keys {sorted(now)} != {sorted(then)}"]
        return [diff for key in now for diff in same_reading(now[key], then[key], f"{where}.{key}")]
    if isinstance(now, list | tuple) and isinstance(then, list | tuple):
        if len(now) != len(then):
            return [f"{where}: {len(now)} items != {len(then)}"]
        pairs = enumerate(zip(now, then, strict=True))
        return [diff for n, (a, b) in pairs for diff in same_reading(a, b, f"{where}[{n}]")]
    if where.endswith(".position") and isinstance(now, int) and isinstance(then, int):
        return [] if abs(now - then) <= 1 else differs  # a place in the block: a rank
    return [] if now == then else differs


def by_text(rows: list) -> list:
    """Candidates in the order of their text: two whose scores are within DRIFT may swap places."""
    return sorted(rows, key=lambda row: row[0] or "")


def test_numbers_in_words_may_drift_a_little_and_nothing_else_may():
    drifted = ["vector +0.020 over the anchor", "99% of the best", "retrieval 0.98", {"share": 0.9939}]
    then = ["vector +0.022 over the anchor", "100% of the best", "retrieval 0.99", {"share": 0.9979}]
    assert same_reading(drifted, then) == []
    assert same_reading("vector +0.120 over the anchor", "vector +0.135 over the anchor")
    assert (
        same_reading(
            ["heuristic rank 4", "Ranked 5th by the heuristic"], ["heuristic rank 3", "Ranked 4th by the heuristic"]
        )
        == []
    )
    assert same_reading("heuristic rank 2", "heuristic rank 4")
    assert same_reading("the block is full (limit 1)", "the block is full (limit 2)")
    assert same_reading("97% of the best", "99% of the best")
    assert same_reading("a weak match", "a strong match")
    assert same_reading({"share": 0.90}, {"share": 0.99})
    assert same_reading({"position": 5}, {"position": 4}) == [] and same_reading({"position": 5}, {"position": 3})
    assert same_reading(("selected", 1), ("not_selected", 1))
    assert same_reading([1, 2], [1, 2, 3])


def read_alike(name: str, now: dict, then: dict) -> list[str]:
    now, then = dict(now), dict(then)
    if "groups" in now:  # page(): each group's rows
        for run in (now, then):
            run["groups"] = [(stage, summary, by_text(rows)) for stage, summary, rows in run["groups"]]
    else:  # words(): the candidates
        now["candidates"], then["candidates"] = by_text(now["candidates"]), by_text(then["candidates"])
    return same_reading(now, then, name)


def test_a_trace_saved_before_reason_codes_reads_as_one_saved_now(saved_before, saved_now):
    assert set(saved_now) == set(saved_before)
    for name, before in saved_before.items():
        assert "reason_codes" not in json.dumps(before), name  # words only
        assert read_alike(name, page(saved_now[name]), page(before["result"])) == []


def test_the_words_of_every_reason_are_what_they_were(saved_before, saved_now):
    for name, before in saved_before.items():
        assert read_alike(name, words(saved_now[name]), words(before["result"])) == []


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
