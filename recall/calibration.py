"""Calibration: fit the fusion, answerability and block knobs to a user's own golden queries.

Every golden query is retrieved once (`searchindex.search.retrieve`, candidates as wide as the
starting profile asks); the knobs are then searched offline by re-ranking and re-judging those
retrievals, in two stages with one objective each:

- fusion (`fusion`, `cc_vector_weight`, `cc_min_coverage`, `rrf_k`, `rrf_*_weight`): the mean
  of recall@k and MRR of the ranking, over the queries that expect something (answerable);
- answerability (`strong_margin`, `strong_coverage`, `agree_margin`, `agree_coverage`): the
  mean of the share of answerable queries answered and the share of queries expecting nothing
  (unanswerable) left silent: the balanced accuracy of the decision to answer.

- the block (`block_cut`, `block_weak_cut`, `block_gap`, `block_redundancy`, recall.block): what the
  agent is handed, replayed through the heuristic exactly as recall runs it: the F-measure of
  block precision and block recall (beta 1 unless asked), or the best precision at a block recall
  floor (`min_block_recall`).

With `holdout` the knobs are cross-validated: the queries are dealt into round(1 / holdout) folds
by a hash of each query (the same folds every time), each fold is held out in turn while the knobs
are fitted on the others, and each held-out query is scored with the knobs fitted without it;
`DEALS` such deals, each by another hash, are pooled.
Those out-of-sample numbers cover the same queries as the in-sample ones (every query fitted on,
every query held out once), so the gap between the two is what fitting bought that does not
carry, not the difference between two samples of queries.

The starting settings are always among the candidates, so a calibration holds or improves each
objective on the set; ties keep the starting value, and so do near-ties: a setting within `STEADY`
of the best objective is as good as the best, and of those the one nearest the starting knobs is
kept, so the knobs move only as far as the queries show they must. The sets must be big enough to say
anything: `MIN_QUERIES`, with `MIN_ANSWERABLE` expecting something and `MIN_UNANSWERABLE`
expecting nothing. What is measured is the set the knobs were fitted on: a held-out set tells
how far they carry.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import asdict, astuple, dataclass, field, replace
from datetime import datetime

import numpy as np
from django.db import transaction
from django.utils import timezone

from memoryui.models import Memory
from memoryui.reports import rounded
from recall import block, pipeline
from recall.heuristic import parse_query
from recall.knobs import RecallSettings
from recall.models import RecallProfile
from searchindex.answerability import strong_evidence
from searchindex.defaults import embedder_defaults
from searchindex.documents import IndexUnavailable
from searchindex.fusion import RetrievalSettings, SettingsError
from searchindex.indexes import get_index
from searchindex.search import (
    Found,
    Retrieval,
    SearchError,
    check_outside_top_k,
    clean_query,
    rank,
    retrieve,
)

MIN_QUERIES = 20
# Cross-validation deals the queries into folds this many times, each by another hash: one deal's
# luck (which hard queries land together) moves an out-of-sample number by a few points.
DEALS = 3
# Objective values this close to the best are as good as the best (see _steadiest).
STEADY = 0.005
MIN_ANSWERABLE = 10
MIN_UNANSWERABLE = 5
FUSION_KNOBS = ("fusion", "cc_vector_weight", "cc_min_coverage", "rrf_k", "rrf_vector_weight", "rrf_bm25_weight")
ANSWER_KNOBS = ("strong_margin", "strong_coverage", "agree_margin", "agree_coverage")
BLOCK_KNOBS = ("block_cut", "block_weak_cut", "block_gap", "block_redundancy")

FUSION_GRID = [{"fusion": "cc", "cc_vector_weight": w, "cc_min_coverage": c}
               for w in (0.4, 0.5, 0.6, 0.7, 0.8) for c in (0.0, 0.1, 0.2, 0.3)]  # fmt: skip
FUSION_GRID += [{"fusion": "rrf", "rrf_k": k, "rrf_vector_weight": 1.0, "rrf_bm25_weight": b}
                for k in (10, 60) for b in (0.3, 0.5, 1.0)]  # fmt: skip
ANSWER_GRID = [
    dict(zip(ANSWER_KNOBS, values, strict=True))
    for values in itertools.product(
        (0.06, 0.07, 0.085, 0.1, 0.12), (0.5, 0.6, 0.8), (0.02, 0.03, 0.04, 0.05, 0.06), (0.1, 0.15, 0.2, 0.3)
    )
]


BLOCK_GRID = [
    block.BlockKnobs(cut=cut, weak_cut=weak, gap=gap, redundancy=redundancy)
    for cut, weak, gap, redundancy in itertools.product(
        (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01), (0.7, 0.85, 1.0), (0.2, 0.3, 1.0), (0.95, 0.97, 1.01)
    )
]


class CalibrationRefused(ValueError):
    """The golden queries cannot calibrate anything; the message says why and what is needed."""


@dataclass
class Sample:
    """One golden query and what the indexes answered for it."""

    query: str
    scope: str
    expected: frozenset[str]
    retrieval: Retrieval
    memories: Mapping[str, Memory]  # the candidates' rows as the retrieval loaded them, by id


@dataclass
class Calibration:
    start: RetrievalSettings
    best: RetrievalSettings
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    queries: int
    answerable: int
    skipped: list[str] = field(default_factory=list)
    min_answered: float | None = None
    block_start: block.BlockKnobs | None = None  # None: the block was not calibrated
    block_best: block.BlockKnobs | None = None
    objective: dict = field(default_factory=dict)  # the block's: {"beta"} or {"min_block_recall"}
    # With cross-validation: {"share", "folds", "queries", "answerable", "before", "after"}, the
    # queries scored out of sample (each with the knobs fitted without its fold).
    holdout: dict | None = None

    @property
    def min_answered_met(self) -> bool | None:
        """Whether the calibrated knobs answer the share asked for (None: none was asked)."""
        if self.min_answered is None:
            return None
        return self.after["answerable"]["answered"] >= self.min_answered

    def settings(self, start: RecallSettings) -> RecallSettings:
        """`start` with the calibrated retrieval and block knobs."""
        settings = replace(start, retrieval=self.best)
        return with_block(settings, self.block_best) if self.block_best is not None else settings

    def knobs(self, which: str = "best") -> dict:
        """The calibrated knobs (or the starting ones), retrieval's and the block's, flat."""
        data = {knob: getattr(self, which).to_dict()[knob] for knob in (*FUSION_KNOBS, *ANSWER_KNOBS)}
        blocks = getattr(self, f"block_{'best' if which == 'best' else 'start'}")
        if blocks is not None:
            data.update({f"block_{name}": value for name, value in asdict(blocks).items()})
        return data

    @property
    def changed(self) -> dict:
        start, best = self.knobs("start"), self.knobs("best")
        return {knob: value for knob, value in best.items() if value != start[knob]}

    def to_dict(self) -> dict:
        return {
            "queries": self.queries,
            "answerable": self.answerable,
            "skipped": self.skipped,
            "before": self.before,
            "after": self.after,
            "changed": self.changed,
            "min_answered": self.min_answered,
            "min_answered_met": self.min_answered_met,
            "block_objective": self.objective,
            "holdout": self.holdout,
            "knobs": self.knobs(),
        }


def check_size(queries: int, answerable: int) -> None:
    """Refuse sets too small to calibrate on, saying what they hold and what is needed."""
    unanswerable = queries - answerable
    if queries >= MIN_QUERIES and answerable >= MIN_ANSWERABLE and unanswerable >= MIN_UNANSWERABLE:
        return
    raise CalibrationRefused(
        f"the golden queries are too few to calibrate on: {queries} queries, {answerable} expecting memories "
        f"and {unanswerable} expecting nothing; calibration needs at least {MIN_QUERIES} queries, with at least "
        f"{MIN_ANSWERABLE} expecting memories (to fit the ranking) and {MIN_UNANSWERABLE} expecting nothing (to "
        "fit when to stay silent). Add golden queries, or calibrate on several sets at once."
    )


def collect(golden_sets, settings: RetrievalSettings) -> tuple[list[Sample], list[str]]:
    """Retrieve every golden query of the sets once; (samples, the queries that could not run and why)."""
    samples, skipped = [], []
    for golden_set in golden_sets:
        for golden in golden_set.queries.all():
            try:
                text, _ = clean_query(golden.query)
            except SearchError as exc:
                skipped.append(f"{golden.query[:80]!r}: {exc}")
                continue
            retrieval, memories = retrieve(text, [golden_set.scope], settings, extra_fields=("metadata",))
            check_outside_top_k(retrieval, [golden_set.scope])  # what search reads before staying silent
            expected = frozenset(str(pk) for pk in golden.expected_ids)
            samples.append(Sample(text, golden_set.scope, expected, retrieval, memories))
    return samples, skipped


def score(samples: list[Sample], settings: RetrievalSettings, *, k: int, now: datetime) -> dict[str, dict]:
    """The metrics per query type (answerable, unanswerable) and the two objectives, at k results."""
    answerable = {"queries": 0, "recall@k": 0.0, "mrr": 0.0, "answered": 0.0, "top1": 0.0}
    unanswerable = {"queries": 0, "silent": 0.0}
    for sample in samples:
        candidates, answer = rank(sample.retrieval, settings, now)
        if not sample.expected:
            unanswerable["queries"] += 1
            unanswerable["silent"] += not answer.answered
            continue
        answerable["queries"] += 1
        ids = [c.id for c in candidates]
        answerable["recall@k"] += len(sample.expected & set(ids[:k])) / min(k, len(sample.expected))
        answerable["mrr"] += next((1 / n for n, pk in enumerate(ids, 1) if pk in sample.expected), 0.0)
        given = [c.id for c in candidates if c.passes_floor] if answer.answered else []
        answerable["answered"] += bool(given)
        answerable["top1"] += bool(given) and given[0] in sample.expected
    for key in ("recall@k", "mrr", "answered", "top1"):
        answerable[key] = _share(answerable[key], answerable["queries"])
    unanswerable["silent"] = _share(unanswerable["silent"], unanswerable["queries"])
    return {
        "answerable": answerable,
        "unanswerable": unanswerable,
        "objectives": {
            "ranking": rounded((answerable["recall@k"] + answerable["mrr"]) / 2),
            "answerability": rounded((answerable["answered"] + unanswerable["silent"]) / 2),
        },
    }


def calibrate(
    samples: list[Sample],
    start: RetrievalSettings,
    *,
    k: int,
    min_answered: float | None = None,
    skipped: list[str] | None = None,
    now=None,
) -> Calibration:
    """Search the fusion, then the answerability knobs; the best of each, never worse than `start`.

    With `min_answered` the answerability objective is the share of unanswerable queries left
    silent among the settings that answer at least that share of the answerable ones; when none
    does, the setting that answers the most (and `min_answered_met` is False).
    """
    now = now or timezone.now()
    answerable = sum(bool(s.expected) for s in samples)
    check_size(len(samples), answerable)
    answered = _answerable(samples)
    before = score(samples, start, k=k, now=now)
    # The ranking objective reads answerable queries only.
    trials = [({}, start, (before["objectives"]["ranking"],))]
    for knobs in FUSION_GRID:
        trial = _trial(start, knobs)
        if trial is not None:
            trials.append((knobs, trial, (score(answered, trial, k=k, now=now)["objectives"]["ranking"],)))
    best = _steadiest(start.to_dict(), trials)
    best = _best_answerability(samples, best, min_answered)
    return Calibration(
        start=start,
        best=best,
        before=before,
        after=score(samples, best, k=k, now=now),
        queries=len(samples),
        answerable=answerable,
        skipped=list(skipped or []),
        min_answered=min_answered,
    )


def _best_answerability(
    samples: list[Sample], settings: RetrievalSettings, min_answered: float | None = None
) -> RetrievalSettings:
    """The answerability knobs that decide best whether to answer; labels do not depend on the fusion,
    so every sample's margins and coverages are read once and the rule replayed on arrays."""
    signals = []
    for sample in samples:
        refused = sample.retrieval.refused
        anchors = sample.retrieval.anchors
        # Answered or not is the same with the checked similarities as search's second look gives.
        similarities = {**sample.retrieval.checked, **{hit.id: hit.score for hit in sample.retrieval.vector_hits}}
        vector = {pk: similarity - anchors.get(pk, 0.0) for pk, similarity in similarities.items()}
        lexical = {hit.id: hit.coverage or 0.0 for hit in sample.retrieval.bm25_hits}
        ids = [pk for pk in {**vector, **lexical} if pk in sample.retrieval.infos]
        margins = np.array([-np.inf if refused or pk not in vector else vector[pk] for pk in ids])
        coverages = np.array([lexical.get(pk, 0.0) for pk in ids])
        signals.append((bool(sample.expected), margins, coverages))

    def objective(trial: RetrievalSettings) -> tuple:
        answered = silent = answerable = unanswerable = 0
        for expects, margins, coverages in signals:
            said = bool(np.any(strong_evidence(margins, coverages, trial))) if len(margins) else False
            if expects:
                answerable += 1
                answered += said
            else:
                unanswerable += 1
                silent += not said
        answered, silent = _share(answered, answerable), _share(silent, unanswerable)
        if min_answered is None:
            return ((answered + silent) / 2,)
        feasible = answered >= min_answered
        return (feasible, silent if feasible else answered, answered)

    trials = [({}, settings, objective(settings))]
    for knobs in ANSWER_GRID:
        trial = _trial(settings, knobs)
        if trial is not None:
            trials.append((knobs, trial, objective(trial)))
    return _steadiest(settings.to_dict(), trials)


def _steadiest(start: dict, trials: list[tuple[dict, object, tuple]]):
    """The best of `trials` ((knobs, candidate, objective value), the start first with no knobs).

    With a one-number objective, every trial within STEADY of the best value is as good as the best:
    a difference that small is a query or two, luck of the set more than a better setting. Of those,
    the one whose knobs are nearest the starting ones wins (the start itself first), so a fit moves
    the knobs only as far as the queries show it must. Otherwise the first best value wins."""
    best_value = max(value for _, _, value in trials)
    if len(best_value) > 1:
        return next(candidate for _, candidate, value in trials if value == best_value)
    good = [(knobs, candidate) for knobs, candidate, value in trials if value[0] >= best_value[0] - STEADY]
    return min(good, key=lambda pair: _distance(pair[0], start))[1]


def _distance(knobs: dict, start: dict) -> float:
    """How far `knobs` move from `start`: each number by its relative change, anything else by 1."""
    total = 0.0
    for name, value in knobs.items():
        was = start.get(name)
        if isinstance(value, int | float) and isinstance(was, int | float) and not isinstance(value, bool):
            total += abs(value - was) / max(abs(value), abs(was), 1e-9)
        else:
            total += value != was
    return total


def _trial(settings: RetrievalSettings, knobs: dict) -> RetrievalSettings | None:
    """`settings` with `knobs`, or None when they do not combine (a weak threshold above a strong one)."""
    try:
        return replace(settings, **knobs)
    except SettingsError:
        return None


def _answerable(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.expected]


def _share(count: float, total: int) -> float:
    return rounded(count / total) if total else 0.0


def save_profile(name: str, start: RecallSettings, result: Calibration, golden: list[str], embedder) -> RecallProfile:
    """Save `start` with the calibrated retrieval and block knobs as profile `name` (only what differs
    from the embedder's defaults), with the embedder it was calibrated for and the calibration's numbers."""
    settings = result.settings(start)
    defaults = RecallSettings.from_dict(embedder_defaults(embedder)).to_dict()
    knobs = {knob: value for knob, value in settings.to_dict().items() if defaults[knob] != value}
    with transaction.atomic():
        profile, _ = RecallProfile.objects.select_for_update().get_or_create(name=name)
        profile.knobs = knobs
        profile.embedder = embedder.name
        profile.calibration = {"golden": golden, **result.to_dict()}
        profile.description = f"Calibrated on {', '.join(golden)} ({result.queries} queries) for {embedder.name}."
        profile.full_clean()
        profile.save()
    return profile


# --- the block ------------------------------------------------------------------------------------


@dataclass
class BlockSample:
    """One golden query as the block sees it: its ranked, eligible candidates and their likenesses."""

    expected: frozenset[str]
    entries: list[block.Entry]
    similar: dict[frozenset, float]
    limit: int

    def similarity(self, a: str, b: str) -> float | None:
        return self.similar.get(frozenset((a, b)))


def with_block(settings: RecallSettings, knobs: block.BlockKnobs) -> RecallSettings:
    return replace(
        settings,
        block_cut=knobs.cut,
        block_weak_cut=knobs.weak_cut,
        block_gap=knobs.gap,
        block_redundancy=knobs.redundancy,
    )


def block_samples(samples: list[Sample], settings: RecallSettings, *, now: datetime) -> list[BlockSample]:
    """Replay recall's heuristic on each sample with `settings`: what the block's size is decided on.

    The candidates' memories are the rows `collect` loaded with the retrieval (no query per
    sample, however many settings are replayed), and the likeness of the ones that could share the
    block is read from their stored vectors once per query, so the block knobs are then tried in
    memory."""
    out = []
    limit = settings.retrieval.limit
    for sample in samples:
        candidates, answer = rank(sample.retrieval, settings.retrieval, now)
        passing = [c for c in candidates if c.passes_floor][: settings.candidates] if answer.answered else []
        memories = sample.memories
        found = [Found(memories[c.id], c) for c in passing if c.id in memories]
        ranking = pipeline.heuristic_ranking(found, parse_query(sample.query), settings, [])
        eligible = [r.scored for r in ranking if not r.scored.missing and not r.filtered]
        entries = pipeline.block_entries(eligible, {c.id: c.label for c in passing})
        out.append(BlockSample(sample.expected, entries, _likenesses(entries[: 2 * limit], sample.scope), limit))
    return out


def _likenesses(entries: list[block.Entry], scope: str) -> dict[frozenset, float]:
    if len(entries) < 2:
        return {}
    try:
        vectors = get_index("vector").stored_vectors([e.id for e in entries], scopes=[scope])
    except IndexUnavailable:
        return {}
    ids = [e.id for e in entries if e.id in vectors]
    return {frozenset((a, b)): float(vectors[a] @ vectors[b]) for a, b in itertools.combinations(ids, 2)}


def block_score(samples: list[BlockSample], knobs: block.BlockKnobs, *, beta: float = 1.0) -> dict:
    """Block precision (of all memories handed over, the share expected), block recall (of a query's
    expected memories, the share handed over, averaged over the queries expecting some), their
    F-measure, and the mean block size."""
    return _block_metrics(_block_counts(samples, knobs), beta)


@dataclass
class BlockCounts:
    """What the block metrics are made of; counts of several runs add up."""

    queries: int = 0
    answerable: int = 0
    handed: int = 0
    right: int = 0
    recall_sum: float = 0.0

    def __add__(self, other: BlockCounts) -> BlockCounts:
        return BlockCounts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def _block_counts(samples: list[BlockSample], knobs: block.BlockKnobs) -> BlockCounts:
    counts = BlockCounts(queries=len(samples))
    for sample in samples:
        placements = block.size_block(sample.entries, sample.limit, knobs, sample.similarity)
        given = {p.id for p in placements if p.kept}
        counts.handed += len(given)
        counts.right += len(given & sample.expected)
        if sample.expected:
            counts.answerable += 1
            counts.recall_sum += len(given & sample.expected) / len(sample.expected)
    return counts


def _block_metrics(counts: BlockCounts, beta: float) -> dict:
    precision = counts.right / counts.handed if counts.handed else 0.0
    recall = counts.recall_sum / counts.answerable if counts.answerable else 0.0
    f = (1 + beta**2) * precision * recall / (beta**2 * precision + recall) if precision + recall else 0.0
    return {
        "precision": rounded(precision),
        "recall": rounded(recall),
        "f": rounded(f),
        "size": rounded(counts.handed / counts.queries) if counts.queries else 0.0,
    }


def calibrate_block(
    samples: list[BlockSample], start: block.BlockKnobs, *, beta: float = 1.0, min_recall: float | None = None
) -> block.BlockKnobs:
    """The block knobs with the best F-measure, or with `min_recall` the best precision among those
    keeping block recall at least that high (when none does, the best recall); ties keep `start`."""

    def objective(knobs: block.BlockKnobs) -> tuple:
        m = block_score(samples, knobs, beta=beta)
        if min_recall is None:
            return (m["f"],)
        feasible = m["recall"] >= min_recall
        return (feasible, m["precision"] if feasible else m["recall"])

    trials = [({}, start, objective(start))]
    trials += [(asdict(knobs), knobs, objective(knobs)) for knobs in BLOCK_GRID]
    return _steadiest(asdict(start), trials)


def folds(samples: list[Sample], share: float, deal: int = 0) -> list[list[Sample]]:
    """The samples dealt into round(1 / share) folds (at least 2) by a hash of each query and `deal`:
    the same folds every run, whatever order the queries come in; another deal, other folds."""
    count = max(2, round(1 / share))
    dealt: list[list[Sample]] = [[] for _ in range(count)]
    for sample in samples:
        digest = hashlib.sha256(f"{deal}\n{sample.scope}\n{sample.query}".encode()).digest()
        dealt[int.from_bytes(digest[:4], "big") * count >> 32].append(sample)
    return dealt


def calibrate_recall(
    samples: list[Sample],
    start: RecallSettings,
    *,
    min_answered: float | None = None,
    skipped: list[str] | None = None,
    holdout: float = 0.0,
    beta: float = 1.0,
    min_block_recall: float | None = None,
    now=None,
) -> Calibration:
    """Calibrate the retrieval knobs (`calibrate`), then the block's on the calibrated retrieval.

    Every metric is in-sample, on all the queries, fitted on all of them; with `holdout` the same
    queries are scored out of sample too, each with the knobs fitted without its fold
    (`Calibration.holdout`)."""
    if not 0 <= holdout <= 0.5:
        raise CalibrationRefused(f"holdout must be a share from 0 up to 0.5 (at least two folds), got {holdout:g}")
    now = now or timezone.now()
    options = {"min_answered": min_answered, "beta": beta, "min_block_recall": min_block_recall, "now": now}
    result = _fit(samples, start, skipped=skipped, **options)
    if holdout:
        result.holdout = {
            "share": holdout,
            "folds": max(2, round(1 / holdout)),
            "deals": DEALS,
            "queries": len(samples),
            "answerable": result.answerable,
            "before": _scored(samples, start, beta=beta, now=now),
            "after": _pooled(_cross_validated(samples, start, holdout, options), beta),
        }
    return result


def _cross_validated(samples: list[Sample], start: RecallSettings, holdout: float, options: dict) -> list:
    """Each fold of each deal scored with the knobs fitted on the rest of that deal."""
    parts = []
    for deal in range(DEALS):
        dealt = folds(samples, holdout, deal)
        if any(not fold for fold in dealt):
            raise CalibrationRefused(
                f"holdout {holdout:g} deals {len(samples)} queries into {len(dealt)} folds, and one is empty: "
                "hold out a larger share or add golden queries"
            )
        for index, held in enumerate(dealt):
            fit = [sample for other, fold in enumerate(dealt) if other != index for sample in fold]
            try:
                fitted = _fit(fit, start, **options)
            except CalibrationRefused as exc:
                raise CalibrationRefused(f"holding out fold {index + 1} of {len(dealt)}: {exc}") from None
            parts.append(_counted(held, fitted.settings(start), now=options["now"]))
    return parts


def _fit(samples: list[Sample], start: RecallSettings, *, skipped=None, min_answered, beta, min_block_recall, now):
    result = calibrate(
        samples, start.retrieval, k=start.retrieval.limit, min_answered=min_answered, skipped=skipped, now=now
    )
    retrieval_start, retrieval_best = start, replace(start, retrieval=result.best)
    result.block_start = start.block
    result.block_best = calibrate_block(
        block_samples(samples, retrieval_best, now=now), start.block, beta=beta, min_recall=min_block_recall
    )
    result.before["block"] = block_score(block_samples(samples, retrieval_start, now=now), start.block, beta=beta)
    result.after["block"] = block_score(block_samples(samples, retrieval_best, now=now), result.block_best, beta=beta)
    result.objective = {"beta": beta} if min_block_recall is None else {"min_block_recall": min_block_recall}
    return result


def _counted(samples: list[Sample], settings: RecallSettings, *, now) -> tuple[dict, BlockCounts]:
    """One held-out fold scored with the knobs fitted without it: retrieval's metrics and the block's counts."""
    scored = score(samples, settings.retrieval, k=settings.retrieval.limit, now=now)
    return scored, _block_counts(block_samples(samples, settings, now=now), settings.block)


def _pooled(parts: list[tuple[dict, BlockCounts]], beta: float) -> dict:
    """The held-out folds' metrics as one set: shares weighted by the queries they are shares of."""
    pooled: dict[str, dict] = {}
    for kind in ("answerable", "unanswerable"):
        total = sum(scored[kind]["queries"] for scored, _ in parts)
        pooled[kind] = {"queries": total}
        for metric in parts[0][0][kind]:
            if metric != "queries":
                weighted = sum(scored[kind][metric] * scored[kind]["queries"] for scored, _ in parts)
                pooled[kind][metric] = _share(weighted, total)
    answerable, unanswerable = pooled["answerable"], pooled["unanswerable"]
    pooled["objectives"] = {
        "ranking": rounded((answerable["recall@k"] + answerable["mrr"]) / 2),
        "answerability": rounded((answerable["answered"] + unanswerable["silent"]) / 2),
    }
    pooled["block"] = _block_metrics(sum((counts for _, counts in parts), BlockCounts()), beta)
    return pooled


def _scored(samples: list[Sample], settings: RecallSettings, *, beta: float, now) -> dict:
    scored = score(samples, settings.retrieval, k=settings.retrieval.limit, now=now)
    scored["block"] = block_score(block_samples(samples, settings, now=now), settings.block, beta=beta)
    return scored
