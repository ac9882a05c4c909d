"""The answerability decision: labels from margin and coverage, and whether a query is answered.

Plain values only: no database, no index.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memoryui.reasons import Reason
from searchindex.answerability import BELOW, STRONG, WEAK, decide, judge, label
from searchindex.documents import Hit
from searchindex.fusion import CandidateInfo, RetrievalSettings, fuse, with_checked
from searchindex.search import Retrieval, rank

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KNOBS = RetrievalSettings(
    strong_margin=0.085, strong_coverage=0.6, agree_margin=0.04, agree_coverage=0.1, weak_margin=0.0, weak_coverage=0.1
)
PLAIN = CandidateInfo(tier="working", updated_at=NOW)


def candidate(*, similarity=None, anchor=None, coverage=None):
    """One fused candidate with the signals given."""
    vector = [Hit("m", 1, similarity)] if similarity is not None else []
    bm25 = [Hit("m", 1, 3.0, coverage)] if coverage is not None else []
    [found] = fuse(vector, bm25, {"m": PLAIN}, KNOBS, NOW, anchors={"m": anchor} if anchor is not None else None)
    return found


@pytest.mark.parametrize(
    ("signals", "expected", "why"),
    [
        ({"similarity": 0.90, "anchor": 0.80}, STRONG, "strong: margin ≥ +0.085"),
        ({"coverage": 0.75}, STRONG, "strong: coverage ≥ 60%"),
        ({"similarity": 0.85, "anchor": 0.80, "coverage": 0.25}, STRONG, "both retrievers agree"),
        ({"similarity": 0.85, "anchor": 0.80}, WEAK, "weak"),
        ({"coverage": 0.3}, WEAK, "weak"),
        ({"similarity": 0.78, "anchor": 0.80, "coverage": 0.05}, BELOW, "below floor"),
    ],
)
def test_label_follows_margin_coverage_and_agreement(signals, expected, why):
    level, reasons = label(candidate(**signals), KNOBS)

    assert level == expected
    assert why in reasons[-1]


def test_margin_is_similarity_minus_the_anchor_of_the_memorys_script():
    found = candidate(similarity=0.88, anchor=0.79)

    assert found.margin == pytest.approx(0.09)
    level, reasons = label(found, KNOBS)
    assert level == STRONG and reasons[0] == "vector +0.090 over the anchor"


def test_a_refused_query_never_counts_its_vector_similarity():
    level, reasons = label(candidate(similarity=0.99, anchor=0.70), KNOBS, refused="a one-character query")

    assert level == BELOW
    assert "not counted: a one-character query" in reasons[0]


def test_a_query_is_answered_only_when_some_candidate_is_strong():
    weak = candidate(similarity=0.85, anchor=0.80)
    strong = candidate(coverage=0.9)

    labelled, answer = judge([weak], KNOBS)
    assert labelled[0].label == WEAK and not answer.answered
    assert answer.reason == "no strong match (1 weak)"

    labelled, answer = judge([strong, weak], KNOBS)
    assert answer.answered and answer.reason == "1 strong match"
    assert answer.signals["best_coverage"] == 0.9 and answer.signals["best_margin"] == pytest.approx(0.05)


def test_nothing_retrieved_is_not_answered_and_says_so():
    answer = decide([])

    assert not answer.answered and answer.reason == "no candidate in either index"


def test_a_focused_store_does_not_raise_the_bar():
    # Every memory of a focused store is about the same person: the scope's top hits are all
    # close to the query. The anchor does not depend on them, so the answer stays strong.
    answer_and_lookalikes = [Hit(f"m{i}", i + 1, 0.88 - i * 0.004) for i in range(20)]
    infos = {hit.id: PLAIN for hit in answer_and_lookalikes}
    anchors = dict.fromkeys(infos, 0.78)

    ranked, answer = judge(fuse(answer_and_lookalikes, [], infos, KNOBS, NOW, anchors=anchors), KNOBS)

    assert answer.answered
    assert ranked[0].id == "m0" and ranked[0].label == STRONG


def test_a_query_is_judged_again_with_the_exact_similarity_of_candidates_outside_the_vector_top_k():
    retrieval = Retrieval(
        query="q",
        vector_hits=[Hit("near-miss", 1, 0.80)],
        bm25_hits=[Hit("answer", 1, 3.0, 0.5)],  # BM25 found it; the approximate vector index did not
        anchors={"near-miss": 0.80, "answer": 0.80},
        infos={"near-miss": PLAIN, "answer": PLAIN},
    )
    ranked, answer = rank(retrieval, KNOBS, NOW)
    assert not answer.answered

    retrieval.checked = {"answer": 0.86}
    rechecked, answer = rank(retrieval, KNOBS, NOW)

    assert answer.answered
    [found] = [c for c in rechecked if c.id == "answer"]
    assert found.label == STRONG and found.margin == pytest.approx(0.06) and found.vector_score is None
    assert "read from its stored vector" in found.reasons[0]
    assert [c.id for c in rechecked] == [c.id for c in ranked], "the check never changes the ranking"


def test_the_checked_similarity_set_on_fused_candidates_is_what_fusing_with_it_gives():
    vector = [Hit("v1", 1, 0.84), Hit("both", 2, 0.83)]
    bm25 = [Hit("both", 1, 4.0, 0.4), Hit("b1", 2, 3.0, 0.3), Hit("b2", 3, 2.0, 0.2)]
    infos = dict.fromkeys(("v1", "both", "b1", "b2"), PLAIN)
    anchors = dict.fromkeys(infos, 0.80)
    # "both" is in the vector top k: a similarity read for it is not the one it was ranked with.
    checked = {"b1": 0.88, "both": 0.10, "gone": 0.99}
    fused = fuse(vector, bm25, infos, KNOBS, NOW, anchors=anchors)

    updated = with_checked(fused, checked)

    assert updated == fuse(vector, bm25, infos, KNOBS, NOW, anchors=anchors, checked=checked)
    assert [c.checked_similarity for c in updated] != [c.checked_similarity for c in fused]
    assert {c.id: c.checked_similarity for c in updated} == {"v1": None, "both": None, "b1": 0.88, "b2": None}
    assert all(c.checked_similarity is None for c in fused), "the fused candidates are left as they were"


def test_a_judged_candidate_is_the_fused_one_with_its_label_and_reasons_and_nothing_else_changed():
    fused = [candidate(similarity=0.90, anchor=0.80, coverage=0.3), candidate(coverage=0.05)]
    labelled, _ = judge(fused, KNOBS)
    for before, after in zip(fused, labelled, strict=True):
        level, reasons = label(before, KNOBS)
        assert after == replace(before, label=level, reasons=tuple(reasons))
        assert after is not before and before.label == "" and before.reasons == ()
    # The reasons the settings alone decide are made once and are the same words as made afresh.
    again, _ = judge([fused[0]], KNOBS)
    strong, below = labelled[0].reasons[-1], labelled[1].reasons[-1]
    assert again[0].reasons[-1] is strong and strong == Reason("strong_margin", strong_margin=0.085)
    assert below == Reason("below_floor", weak_margin=0.0, weak_coverage=0.1) and below.code == "below_floor"
