"""Golden queries: run a set against a recall profile, score it, and compare two profiles.

For each query the recall runs as an agent's would (the profile's knobs, its selector if an
LLM is configured) but changes nothing: access counts are not bumped. Scores:

- recall@k: expected memories among the recalled ones (k = the profile's limit), over
  min(k, number expected), averaged over the queries that expect something;
- top-1: share of those queries whose first recalled memory is expected;
- no-result precision: of the queries that recalled nothing, the share that expects nothing;
- no-result recall: of the queries that expect nothing, the share that recalled nothing.

A metric with nothing to average over is None (shown as "n/a"), never a flattering 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recall.pipeline import CONFIGURED, RecallSettings, recall


@dataclass
class QueryOutcome:
    query_id: int
    query: str
    expected: list[str]
    recalled: list[str]
    mode: str = ""
    fallback_reason: str | None = None
    error: str = ""

    @property
    def answerable(self) -> bool:
        return bool(self.expected)

    @property
    def top1(self) -> bool:
        return bool(self.recalled) and self.recalled[0] in self.expected

    @property
    def passed(self) -> bool:
        """Expected nothing and got nothing, or the first recalled memory is expected."""
        return not self.recalled if not self.expected else self.top1


@dataclass
class Evaluation:
    profile: str
    limit: int
    outcomes: list[QueryOutcome] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, float | None]:
        answerable = [o for o in self.outcomes if o.answerable and not o.error]
        silent_expected = [o for o in self.outcomes if not o.answerable and not o.error]
        silent = [o for o in self.outcomes if not o.recalled and not o.error]
        return {
            f"recall@{self.limit}": _mean([_recall(o, self.limit) for o in answerable]),
            "top1": _mean([1.0 if o.top1 else 0.0 for o in answerable]),
            "no_result_precision": _mean([0.0 if o.answerable else 1.0 for o in silent]),
            "no_result_recall": _mean([0.0 if o.recalled else 1.0 for o in silent_expected]),
        }

    @property
    def by_query(self) -> dict[int, QueryOutcome]:
        return {o.query_id: o for o in self.outcomes}


def _recall(outcome: QueryOutcome, k: int) -> float:
    found = len(set(outcome.expected) & set(outcome.recalled[:k]))
    return found / min(len(outcome.expected), k)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def evaluate(
    golden_set, settings: RecallSettings, *, profile: str = "default", selector_config=CONFIGURED
) -> Evaluation:
    """Run every query of `golden_set` with `settings` (the configured selector unless told otherwise)."""
    evaluation = Evaluation(profile=profile, limit=settings.retrieval.limit)
    for query in golden_set.queries.all():
        expected = [str(pk) for pk in query.expected_ids]
        outcome = QueryOutcome(query_id=query.pk, query=query.query, expected=expected, recalled=[])
        try:
            result = recall(
                query.query,
                scope=golden_set.scope,
                tools=query.tools,
                settings=settings,
                profile=profile,
                selector_config=selector_config,
            )
        except ValueError as exc:  # SearchError: a query that cannot run is a failed query, not a crash
            outcome.error = str(exc)
        else:
            outcome.recalled = [rc.id for rc in result.selected]
            outcome.mode, outcome.fallback_reason = result.mode, result.fallback_reason
        evaluation.outcomes.append(outcome)
    return evaluation


@dataclass
class Movement:
    query_id: int
    query: str
    moved_in: list[str]  # recalled by B, not by A
    moved_out: list[str]  # recalled by A, not by B
    passed_a: bool
    passed_b: bool


def compare(a: Evaluation, b: Evaluation) -> list[Movement]:
    """Per query, the memories that moved in or out going from profile A to profile B."""
    movements = []
    b_outcomes = b.by_query
    for outcome in a.outcomes:
        other = b_outcomes.get(outcome.query_id)
        if other is None:
            continue
        movements.append(
            Movement(
                query_id=outcome.query_id,
                query=outcome.query,
                moved_in=[pk for pk in other.recalled if pk not in outcome.recalled],
                moved_out=[pk for pk in outcome.recalled if pk not in other.recalled],
                passed_a=outcome.passed,
                passed_b=other.passed,
            )
        )
    return movements
