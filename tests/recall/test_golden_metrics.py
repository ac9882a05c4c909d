"""The golden-set metrics as the pages show them: in words, and recall@k at each profile's own limit,
so a limit-3 profile compared with the default is measured in its top 3, never shown as "n/a"."""

from __future__ import annotations

from recall.golden import Evaluation, QueryOutcome, metric_rows


def evaluation(limit: int, *outcomes: QueryOutcome, profile: str = "p") -> Evaluation:
    return Evaluation(profile=profile, limit=limit, outcomes=list(outcomes))


def outcome(query_id: int, expected: list[str], recalled: list[str]) -> QueryOutcome:
    return QueryOutcome(query_id=query_id, query=f"q{query_id}", expected=expected, recalled=recalled)


def by_key(rows: list[dict]) -> dict[str, dict]:
    return {row["key"]: row for row in rows}


def test_the_metrics_have_names_a_person_reads():
    rows = metric_rows(evaluation(5, outcome(1, ["a"], ["a"]), outcome(2, [], [])))
    assert [row["name"] for row in rows] == [
        "found in the top 5",
        "handed over nothing unexpected",
        "right memory first",
        "stays silent when it should",
        "silent only when it should be",
    ]
    assert all(row["help"] for row in rows)
    assert [row["key"] for row in rows] == [
        "recall@k",
        "block_precision",
        "top1",
        "no_result_recall",
        "no_result_precision",
    ]


def test_block_precision_counts_every_memory_handed_over_that_was_not_expected():
    run = evaluation(
        5,
        outcome(1, ["a"], ["a", "x", "y"]),  # right first, padded with two
        outcome(2, ["b"], ["b"]),
        outcome(3, [], ["z"]),  # should have stayed silent
        outcome(4, [], []),
    )
    assert run.metrics["block_precision"] == 2 / 5
    assert run.outcomes[0].unexpected == ["x", "y"] and run.outcomes[0].passed
    assert run.outcomes[2].unexpected == ["z"] and run.outcomes[0].missed == []
    assert evaluation(5, outcome(1, [], [])).metrics["block_precision"] is None  # nothing handed over


def test_recall_at_k_uses_each_profiles_own_limit():
    # Three expected memories; the default recalls all of them in its top 5, a limit-3 profile two.
    default = evaluation(5, outcome(1, ["a", "b", "c"], ["x", "a", "b", "y", "c"]), outcome(2, [], []))
    three = evaluation(3, outcome(1, ["a", "b", "c"], ["a", "x", "b"]), outcome(2, [], ["z"]))
    rows = by_key(metric_rows(default, three))
    recall = rows["recall@k"]
    assert (recall["a"], recall["a_k"]) == (1.0, 5)
    assert (recall["b"], recall["b_k"]) == (2 / 3, 3)  # never None: measured at its own limit
    assert recall["name"] == "found in the top k (each profile's limit)"
    assert rows["top1"]["a"] == 0.0 and rows["top1"]["b"] == 1.0
    assert rows["no_result_recall"]["a"] == 1.0 and rows["no_result_recall"]["b"] == 0.0


def test_a_metric_with_nothing_to_average_over_stays_unknown():
    rows = by_key(metric_rows(evaluation(5, outcome(1, [], ["a"]))))
    assert rows["recall@k"]["a"] is None and rows["top1"]["a"] is None
    assert rows["no_result_precision"]["a"] is None  # no query recalled nothing
    assert rows["no_result_recall"]["a"] == 0.0
    assert rows["recall@k"]["b"] is None and rows["recall@k"]["b_k"] is None  # no second profile
