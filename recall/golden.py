"""Golden queries: run a set against a recall profile, score it, and compare two profiles.

For each query the recall runs as an agent's would (the profile's knobs, its selector if an
LLM is configured) but changes nothing: access counts are not bumped. Scores:

- recall@k: expected memories among the recalled ones (k = the profile's limit), over
  min(k, number expected), averaged over the queries that expect something;
- block precision: of all the memories recalled, the share expected (what the agent reads that
  it should not is the rest);
- top-1: share of those queries whose first recalled memory is expected;
- no-result precision: of the queries that recalled nothing, the share that expects nothing;
- no-result recall: of the queries that expect nothing, the share that recalled nothing.

A metric with nothing to average over is None (shown as "n/a"), never a flattering 1.0.

The pages name the metrics in words (METRICS) and compare recall@k profile by profile, each at
its own limit. A golden query's expected memories may be given by the short ids the pages show
(`resolve_expected`); a query expecting nothing (`expected_ids == []`) is one recall should stay
silent on, which the forms and the API ask for explicitly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from ingest import writing
from memoryui import memory_ids
from memoryui.models import Memory
from recall.knobs import RecallSettings
from recall.models import GoldenQuery, GoldenSet
from recall.pipeline import CONFIGURED, recall
from searchindex import outbox


@dataclass
class QueryOutcome:
    query_id: int
    query: str
    expected: list[str]
    recalled: list[str]
    mode: str = ""
    fallback_reason: str | None = None
    error: str = ""
    tools: list[str] = field(default_factory=list)

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

    @property
    def unexpected(self) -> list[str]:
        """What was handed over that the query does not expect: the block's padding."""
        return [pk for pk in self.recalled if pk not in self.expected]

    @property
    def missed(self) -> list[str]:
        return [pk for pk in self.expected if pk not in self.recalled]


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
        ran = [o for o in self.outcomes if not o.error]
        handed = sum(len(o.recalled) for o in ran)
        return {
            f"recall@{self.limit}": _mean([_recall(o, self.limit) for o in answerable]),
            "block_precision": (handed - sum(len(o.unexpected) for o in ran)) / handed if handed else None,
            "top1": _mean([1.0 if o.top1 else 0.0 for o in answerable]),
            "no_result_precision": _mean([0.0 if o.answerable else 1.0 for o in silent]),
            "no_result_recall": _mean([0.0 if o.recalled else 1.0 for o in silent_expected]),
        }

    @property
    def by_query(self) -> dict[int, QueryOutcome]:
        return {o.query_id: o for o in self.outcomes}


# The metrics as the pages name them: (key in `Evaluation.metrics`, name, what it measures).
# recall@k's key carries each profile's own limit; "recall@k" stands for it.
RECALL_AT_K = "recall@k"
METRICS = (
    (
        RECALL_AT_K,
        "found in the top {k}",
        "expected memories among the recalled ones (recall@k, k = the profile's limit)",
    ),
    (
        "block_precision",
        "handed over nothing unexpected",
        "of all the memories recalled, the share that were expected (block precision)",
    ),
    ("top1", "right memory first", "the first memory recalled is an expected one (top-1)"),
    (
        "no_result_recall",
        "stays silent when it should",
        "of the queries expecting nothing, the share that recalled nothing",
    ),
    (
        "no_result_precision",
        "silent only when it should be",
        "of the queries that recalled nothing, the share expecting nothing",
    ),
)


def metric_rows(first: Evaluation, second: Evaluation | None = None) -> list[dict]:
    """The metrics of one run, or of two side by side, in words; recall@k at each profile's own limit."""
    rows = []
    for key, name, help_text in METRICS:
        row = {"key": key, "help": help_text, "a": None, "b": None, "a_k": None, "b_k": None}
        for side, evaluation in (("a", first), ("b", second)):
            if evaluation is None:
                continue
            if key == RECALL_AT_K:
                row[side] = evaluation.metrics.get(f"recall@{evaluation.limit}")
                row[f"{side}_k"] = evaluation.limit
            else:
                row[side] = evaluation.metrics.get(key)
        if key == RECALL_AT_K:
            same = second is None or second.limit == first.limit
            name = name.format(k=first.limit if same else "k (each profile's limit)")
        row["name"] = name
        rows.append(row)
    return rows


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
        outcome = QueryOutcome(
            query_id=query.pk, query=query.query, expected=expected, recalled=[], tools=list(query.tools or [])
        )
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


# --- expected memories, as a person gives them ----------------------------------------------------

NOTHING = "none"  # in place of ids: recall should return nothing (as ticking "should stay silent")
SHORT_ID_MIN = memory_ids.SHORT_ID_MIN


def says_nothing(tokens: list[str]) -> bool:
    """Whether what was typed as expected memories is (or holds) the `none` keyword."""
    return any(token.casefold() == NOTHING for token in tokens)


def resolve_expected(
    tokens: list[str], scope: str, *, visible: list[str] | None = None
) -> tuple[list[str], list[memory_ids.MemoryIdError]]:
    """The memory ids a golden query expects, from what a person typed: full ids, or the short ids
    (a prefix of at least 8 characters) the pages show, each naming exactly one active memory of
    `scope` (`memoryui.memory_ids`); or `none` alone, for a query recall should stay silent on.
    `visible`: the scopes the person may see (None: all), where a memory of another scope is named.

    Returns (ids, problems): every problem names the id and why it is refused; its `code` is the
    resolver's, or `tombstoned`, `elsewhere` or `nothing_with_ids`.
    """
    if says_nothing(tokens):
        if len(tokens) > 1:
            message = f"{NOTHING} means recall should return nothing: give it alone, or give memory ids"
            return [], [memory_ids.MemoryIdError(message, typed=NOTHING, code="nothing_with_ids")]
        return [], []
    ids: list[str] = []
    problems: list[memory_ids.MemoryIdError] = []
    for token in tokens:
        shown = token[: memory_ids.SHOWN_CHARS]
        try:
            match = memory_ids.lookup(token, scopes=scope)
        except memory_ids.MemoryIdError as exc:
            elsewhere = memory_ids.scopes_holding(token, scopes=visible) if exc.code == "unknown" else []
            if elsewhere:
                message = f"{shown!r} is in {', '.join(elsewhere)}, not in this set's scope {scope}"
                exc = memory_ids.MemoryIdError(message, typed=token, code="elsewhere")
            problems.append(exc)
            continue
        if match.status != Memory.Status.ACTIVE:
            message = f"{shown!r} is {match.status}: recall never returns it; restore it or expect another"
            problems.append(memory_ids.MemoryIdError(message, typed=token, code="tombstoned"))
        else:
            ids.append(str(match.id))
    return list(dict.fromkeys(ids)), problems


# --- labelled sets as golden queries -------------------------------------------------------------

LABELLED_NAMESPACE = uuid.UUID("2f1d6c1e-7c53-4d0e-9a55-2b8a4a1f6e01")  # the benchmarks' memory ids too


class LabelledSetError(ValueError):
    """A labelled set file that cannot be read; the message names the place and the reason."""


def read_labelled(data: dict) -> tuple[list[dict], list[dict]]:
    """(memories, queries) of a labelled set in either format of bench/data.

    Memories: key, scope, kind, text and optional entity_key, tags, created_at. Queries: id,
    query, scope, type, relevant (memory keys; [] when nothing answers). A conversation set gives
    one `fact` per observation, dated by its session, and one query per question with its
    evidence as the relevant keys.
    """
    if not isinstance(data, dict) or not ("conversations" in data or {"memories", "queries"} <= data.keys()):
        raise LabelledSetError("expected an object with `memories` and `queries`, or with `conversations`")
    if "conversations" not in data:
        return data["memories"], data["queries"]
    memories, queries = [], []
    for conversation in data["conversations"]:
        dates = {s["id"]: s["date"] for s in conversation["sessions"]}
        memories += [
            {"key": o["key"], "scope": conversation["scope"], "kind": "fact", "text": o["text"],
             "created_at": f"{dates[o['session']]}T12:00:00+00:00"}
            for o in conversation["observations"]
        ]  # fmt: skip
        queries += [
            {"id": q["id"], "query": q["question"], "scope": conversation["scope"], "type": q["type"],
             "relevant": q["evidence"]}
            for q in conversation["questions"]
        ]  # fmt: skip
    return memories, queries


def labelled_id(key: str) -> uuid.UUID:
    """The memory id a labelled memory key is imported under (stable: benchmarks compare runs by it)."""
    return uuid.uuid5(LABELLED_NAMESPACE, key)


def import_labelled(data: dict, *, name: str, actor: str) -> dict:
    """Write a labelled set's memories into their scopes and its queries as one golden set a scope.

    Memory ids are derived from the keys, so importing again adds nothing twice; the golden sets
    (`<name>/<scope>`) are replaced. Returns the counts and the golden sets' names.
    """
    memories, queries = read_labelled(data)
    ids = {m["key"]: labelled_id(m["key"]) for m in memories}
    for position, q in enumerate(queries, 1):
        unknown = [key for key in q["relevant"] if key not in ids]
        if unknown:
            raise LabelledSetError(f"query {position} ({q['query'][:60]!r}): unknown memory keys {', '.join(unknown)}")
    created = 0
    with transaction.atomic():
        existing = set(Memory.objects.filter(pk__in=ids.values()).values_list("pk", flat=True))
        for m in memories:
            if ids[m["key"]] in existing:
                continue
            fields = {"scope": m["scope"], "kind": m["kind"], "text": m["text"], "confidence": 0.9}
            if m.get("entity_key"):
                fields["entity_key"] = m["entity_key"]
            if m.get("tags"):
                fields["metadata"] = {"tags": m["tags"]}
            memory, was_created = writing.write(actor=actor, id=ids[m["key"]], semantic=False, **fields)
            if not was_created:
                raise LabelledSetError(f"memory {m['key']} duplicates {memory.pk}: a labelled set holds no duplicate")
            if m.get("created_at"):
                when = datetime.fromisoformat(m["created_at"])
                Memory.objects.filter(pk=memory.pk).update(created_at=when, updated_at=when)
            created += 1
        sets = []
        scopes = list(dict.fromkeys(q["scope"] for q in queries))
        for scope in scopes:
            golden, _ = GoldenSet.objects.update_or_create(
                name=f"{name}/{scope}"[:100], scope=scope, defaults={"description": f"Imported from {name}."}
            )
            golden.queries.all().delete()
            GoldenQuery.objects.bulk_create(
                GoldenQuery(
                    golden_set=golden,
                    query=q["query"],
                    expected_ids=[str(ids[key]) for key in q["relevant"]],
                    note=str(q.get("type") or q.get("note") or "")[:200],
                )
                for q in queries
                if q["scope"] == scope
            )
            sets.append(golden.name)
    outbox.sync_memories([str(pk) for pk in ids.values()])
    return {"memories": len(memories), "created": created, "queries": len(queries), "golden_sets": sets}
