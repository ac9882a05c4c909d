"""Recall: what an agent gets for its current turn (docs/architecture.md "Read path: recall", steps 1-6).

    candidates   hybrid search in the scope (searchindex.search): fused, reranked, floored
    selector     an LLM picks among the headers of the candidates that cleared the floor
                 (recall.selector), within its latency budget
    heuristic    deterministic field-weighted scoring of the same candidates (recall.heuristic);
                 it always runs, and answers when the selector is off, fails or is too slow
    filter       the active-tool filter (recall.toolfilter) drops usage notes of the tools the
                 agent is using, on both paths: the selector's answer is post-filtered
    block        the chosen memories as a short, current-turn-only text block

Every candidate carries both decisions and their reasons, so a trace (recall.models) can show
why a memory was or was not recalled. `recall()` changes nothing; `record_recall()` bumps the
access counts of what an agent was actually given.

A reason is a code with its parameters (memoryui.reasons), shown as its words. The recall's JSON
(`RecallResult.to_dict`) lists the words, as it always has; its full form (a trace, the API's
`explain`) also stores each reason's code, beside the words and in the same order:

    candidate   reasons → reason_codes, label_reasons → label_reason_codes, signals → signal_codes,
                heuristic and selector: {"decision", "reasons", "reason_codes"}
    recall      fallback_reason → fallback_reason_code, answer: {"answered", "reason", "signals",
                "reason_code"}

each code `{"code": <code>, **params}`. A trace saved before reasons had codes holds the words only;
recall.explain reads them back (memoryui.reasons.restore).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from memoryui import memory_ids
from memoryui.models import Memory
from memoryui.reasons import Reason, codes_of
from memoryui.reports import rounded
from recall import block, heuristic, selector, toolfilter
from recall.knobs import RecallSettings
from searchindex.answerability import Answer
from searchindex.defaults import active_defaults
from searchindex.documents import IndexUnavailable
from searchindex.embeddings import EmbedderUnavailable, get_embedder
from searchindex.fusion import LIMIT_MAX, Candidate, clamp_limit
from searchindex.indexes import get_index
from searchindex.search import NEAR_MISSES, NO_WORDS, Found, SearchError, clean_query, has_words, search
from searchindex.tokens import tokenize

DECISIONS = ("selected", "not_selected", "filtered", "below_floor")
MAX_BLOCK_LINE_CHARS = 600
BLOCK_HEADING = "Recalled memories, for this turn only (not part of the conversation; do not store or repeat them):"

# --- the result -----------------------------------------------------------------------------------


@dataclass
class Decision:
    decision: str
    reasons: list[Reason] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "decision": self.decision,
            "reasons": _texts(self.reasons),
            "reason_codes": codes_of(self.reasons),
        }


@dataclass
class RecallCandidate:
    """One candidate memory and what each path decided about it."""

    found: Found
    heuristic: Decision
    final: Decision
    selector: Decision | None = None
    score: float = 0.0  # the heuristic's
    signals: list[str] = field(default_factory=list)
    placement: block.Placement | None = None  # in the heuristic's block or not, and why

    @property
    def id(self) -> str:
        return str(self.found.memory.pk)

    def to_dict(self, now: datetime) -> dict:
        data = self.found.to_dict()
        label_reasons = self.found.candidate.reasons  # the answerability label's; `reasons` are the decision's
        data.pop("reasons")
        data.update(
            age=age(self.found.memory.created_at, now),
            label_reasons=_texts(label_reasons),
            label_reason_codes=codes_of(label_reasons),
            fused_score=data.pop("score"),
            score=round(self.score, 4),
            signals=_texts(self.signals),
            signal_codes=codes_of(self.signals),
            heuristic=self.heuristic.to_dict(),
            selector=self.selector.to_dict() if self.selector else None,
            decision=self.final.decision,
            reasons=_texts(self.final.reasons),
            reason_codes=codes_of(self.final.reasons),
            block=self.placement.to_dict() if self.placement else None,
        )
        return data


@dataclass
class RecallResult:
    query: str
    scope: str
    tools: list[str]
    limit: int
    settings: RecallSettings
    profile: str = "default"
    search_text: str = ""
    mode: str = "heuristic"  # selector | heuristic | select (the query picked memories by id)
    fallback_reason: Reason | None = None
    selected: list[RecallCandidate] = field(default_factory=list)
    candidates: list[RecallCandidate] = field(default_factory=list)  # every candidate, fused order
    block: str = ""
    notices: list[str] = field(default_factory=list)
    degraded: dict[str, str] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    answer: Answer | None = None  # the answerability decision on the candidates
    selector_answer: str = ""  # the model's raw answer, when it gave one
    selector_ms: float | None = None
    created_at: datetime = field(default_factory=timezone.now)

    def _compact_candidates(self) -> list[dict]:
        near_misses = [c for c in self.candidates if c.final.decision == "below_floor"][:NEAR_MISSES]
        kept = [c for c in self.candidates if c.final.decision != "below_floor" or c in near_misses]
        return [
            {
                "id": c.id,
                "decision": c.final.decision,
                "reasons": _texts(c.final.reasons),
                "score": round(c.score, 4),
                "fused_score": round(c.found.candidate.score, 6),
                "vector_rank": c.found.candidate.vector_rank,
                "bm25_rank": c.found.candidate.bm25_rank,
                "block": c.placement.to_dict() if c.placement else None,
            }
            for c in kept
        ]

    @property
    def answered(self) -> bool:
        return self.answer is None or self.answer.answered

    @property
    def answer_reason(self) -> str:
        return self.answer.reason if self.answer else ""

    def decision_of(self, memory_id: str) -> RecallCandidate | None:
        return next((c for c in self.candidates if c.id == str(memory_id)), None)

    def to_dict(self, *, full: bool = True) -> dict:
        """The recall as JSON. `full=False` (an agent's call) keeps the candidates that cleared the
        floor and the best near misses, each with its decision, reasons, score and ranks."""
        now = self.created_at
        answer = self.answer.to_dict() if self.answer else None
        if answer is not None:
            answer["reason"] = str(self.answer.reason)
            if full:
                answer["reason_code"] = codes_of([self.answer.reason])[0]
        data = {
            "query": self.query,
            "scope": self.scope,
            "tools": self.tools,
            "limit": self.limit,
            "profile": self.profile,
            "mode": self.mode,
            "fallback_reason": str(self.fallback_reason) if self.fallback_reason is not None else None,
            "answer": answer,
            "selected": [
                {
                    "id": c.id,
                    "text": c.found.memory.text,
                    "kind": c.found.memory.kind,
                    "tier": c.found.memory.tier,
                    "score": round(c.score, 4),
                    "age": age(c.found.memory.created_at, now),
                }
                for c in self.selected
            ],
            "candidates": [c.to_dict(now) for c in self.candidates] if full else self._compact_candidates(),
            "block": self.block,
            "notices": self.notices,
            "degraded": self.degraded,
            "selector": {"answer": self.selector_answer, "elapsed_ms": rounded(self.selector_ms, 2)},
            "timings_ms": {stage: round(ms, 2) for stage, ms in self.timings_ms.items()},
        }
        if full:
            fallback = self.fallback_reason
            data["fallback_reason_code"] = codes_of([fallback])[0] if fallback is not None else None
        return data


def _texts(reasons: Iterable[str]) -> list[str]:
    """Reasons as the words the API, the pages and the command line show."""
    return [str(reason) for reason in reasons]


def age(when: datetime | None, now: datetime) -> str:
    """A compact age: <1m, 5m, 3h, 12d, 4mo, 2y."""
    if when is None:
        return "?"
    seconds = max(0.0, (now - when).total_seconds())
    for unit, size in (("y", 365 * 86400), ("mo", 30 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit in ("y", "mo") else 1):
            return f"{int(seconds // size)}{unit}"
    return "<1m"


# --- the pipeline ---------------------------------------------------------------------------------

CONFIGURED = object()


def recall(
    query: str | None,
    *,
    scope: str,
    tools=(),
    limit: int | None = None,
    settings: RecallSettings | None = None,
    profile: str = "default",
    selector_config: selector.SelectorConfig | None | object = CONFIGURED,
    now: datetime | None = None,
) -> RecallResult:
    """Recall for one turn of an agent in `scope`; raises SearchError for a query that cannot run.

    `selector_config` defaults to the configured LLM endpoint (None: no selector).
    """
    started = time.perf_counter()
    settings = settings or RecallSettings.from_dict(active_defaults())
    # Cleaned here, before search sees it: `select:` and `+word` are read from the cleaned text, a
    # `select:` recall never searches, and a query that cannot run is refused whatever its syntax.
    text, notices = clean_query(query)
    parsed = heuristic.parse_query(text)
    limit, clamped = clamp_limit(limit if limit is not None else settings.retrieval.limit)
    if clamped:
        notices.append(clamped)
    recent = toolfilter.recent_tools(tools)
    given = tools.split(",") if isinstance(tools, str) else list(tools or ())
    if len({str(tool).strip().casefold() for tool in given if str(tool).strip()}) > len(recent):
        notices.append(f"recent tools: only the last {toolfilter.MAX_RECENT_TOOLS} distinct ones are used")
    result = RecallResult(
        query=text,
        scope=scope,
        tools=recent,
        limit=limit,
        settings=settings,
        profile=profile,
        search_text=parsed.text,
        notices=notices,
        created_at=now or timezone.now(),
    )
    if parsed.select_ids:
        _pick_directly(result, parsed)
    elif re.search(r"(?:^|\s)select:\s*$", text, re.IGNORECASE):
        raise SearchError("q", "select: names no memory: write select:<id>,<id>.")
    elif not has_words(parsed.text):
        # As search answers it: nothing found, and why (searchindex.search.NO_WORDS), not a 400.
        result.answer = Answer(False, Reason("no_words"))
        result.notices.append(f"nothing recalled: {NO_WORDS}")
    else:
        _run(result, parsed, selector_config)
    result.block = render_block(result.selected, result.created_at)
    result.timings_ms["total"] = (time.perf_counter() - started) * 1000
    return result


def _run(result: RecallResult, parsed: heuristic.ParsedQuery, selector_config) -> None:
    settings = result.settings
    found = search(
        parsed.text,
        scopes=[result.scope],
        limit=LIMIT_MAX,
        settings=settings.retrieval,
        now=result.created_at,
        extra_fields=("metadata",),
    )
    result.notices += found.notices  # asked for LIMIT_MAX, search clamps no limit: its notices are recall's
    result.degraded = found.degraded
    result.answer = found.answer
    result.timings_ms.update(found.timings_ms)
    answered = found.answer.answered
    passing = [f for f in found.candidates if f.candidate.passes_floor] if answered else []
    considered, beyond = passing[: settings.candidates], passing[settings.candidates :]

    # The selector's budget runs while the heuristic works: a stalled model costs the budget, not
    # the budget plus the heuristic.
    pending = _start_selector(result, considered, selector_config)

    heuristic_started = time.perf_counter()
    by_id: dict[str, RecallCandidate] = {}
    for f in found.candidates:
        rc = RecallCandidate(found=f, heuristic=Decision("not_selected"), final=Decision("not_selected"))
        if not f.candidate.passes_floor:
            rc.heuristic = Decision("below_floor", [Reason("floored", why=why) for why in f.candidate.reasons])
        elif not answered:
            rc.heuristic = Decision("below_floor", [Reason("query_not_answered", why=found.answer.reason)])
        elif f in beyond:
            rc.heuristic = Decision("not_selected", [Reason("past_candidates", n=settings.candidates)])
        by_id[rc.id] = rc
    result.candidates = list(by_id.values())

    ranking = heuristic_ranking(considered, parsed, settings, result.tools)
    eligible: list[heuristic.Scored] = []
    for ranked in ranking:
        scored = ranked.scored
        rc = by_id[scored.id]
        rc.score, rc.signals = scored.score, scored.signals
        if scored.missing:
            rc.heuristic = Decision("not_selected", [Reason("missing_required", word=word) for word in scored.missing])
        elif ranked.filtered:
            rc.heuristic = Decision("filtered", [ranked.filtered])
        else:
            eligible.append(scored)
    filtered = {ranked.scored.id: ranked.filtered for ranked in ranking if ranked.filtered}
    heuristic_picks: list[str] = []
    for place, placement in enumerate(_size_block(result, eligible, by_id), 1):
        rc = by_id[placement.id]
        rc.placement = placement
        if placement.kept:
            heuristic_picks.append(placement.id)
            rc.heuristic = Decision("selected", [Reason("heuristic_rank", rank=place), placement.reason, *rc.signals])
        else:
            rc.heuristic = Decision("not_selected", [Reason("block_left_out", rank=place, why=placement.reason)])
    result.timings_ms["heuristic"] = (time.perf_counter() - heuristic_started) * 1000

    selector_picks = _selector_picks(result, pending, considered, by_id, filtered) if pending else None
    if selector_picks is None:
        for rc in result.candidates:
            rc.final = rc.heuristic
        result.selected = [by_id[pk] for pk in heuristic_picks]
    else:
        result.mode = "selector"
        for rc in result.candidates:
            rc.final = rc.selector if rc.selector is not None else rc.heuristic
        result.selected = [by_id[pk] for pk in selector_picks]


@dataclass
class Ranked:
    """One candidate as the heuristic ranked it: its score and signals, and the active-tool filter's word."""

    scored: heuristic.Scored
    filtered: Reason | None = None  # why the active-tool filter keeps it out, when it does


def heuristic_ranking(
    considered: list[Found], parsed: heuristic.ParsedQuery, settings: RecallSettings, tools: list[str]
) -> list[Ranked]:
    """The heuristic's scores of the candidates it considers, best first (ties keep the fused order),
    each run through the active-tool filter. Calibration replays recall's block with it."""
    best = max((f.candidate.score for f in considered), default=0.0)
    query = heuristic.QueryForms.of(parsed.text)
    ranking = []
    for f in considered:
        fields_ = heuristic.Fields.of(f.memory)
        share = f.candidate.score / best if best > 0 else 0.0
        scored = heuristic.score(
            str(f.memory.pk), share, f.candidate.bm25_coverage, fields_, query, settings.weights, parsed.required
        )
        decision = toolfilter.active_tool_decision(
            " ".join([fields_.text, fields_.entity_key or "", *fields_.tags]),
            tools,
            tool_names=fields_.tool_names,
            schema_markers=settings.schema_markers,
            durable_markers=settings.durable_markers,
        )
        if not decision.suppressed and decision.reason:
            scored.signals.append(decision.reason)
        ranking.append(Ranked(scored, decision.reason if decision.suppressed else None))
    ranking.sort(key=lambda ranked: -ranked.scored.score)  # stable: ties keep the fused order
    return ranking


def block_entries(eligible: list[heuristic.Scored], labels: dict[str, str]) -> list[block.Entry]:
    """What the block's size is decided on: each eligible candidate's evidence and answerability label."""
    return [block.Entry(s.id, s.evidence, labels[s.id]) for s in eligible]


def _size_block(result: RecallResult, eligible: list[heuristic.Scored], by_id) -> list[block.Placement]:
    """The heuristic's block: the ranked candidates placed in it or left out (recall.block), the
    memories that would go in checked against each other for saying the same thing."""
    knobs = result.settings.block
    entries = block_entries(eligible, {pk: rc.found.candidate.label for pk, rc in by_id.items()})
    placements = block.size_block(entries, result.limit, knobs)
    contenders = [p.id for p in placements if p.kept or p.code == block.PAST_LIMIT][: 2 * result.limit]
    if knobs.redundancy > 1.0 or len(contenders) < 2:
        return placements
    if "vector" in result.degraded:
        result.notices.append("the block was not checked for memories saying the same thing: the vector index is down")
        return placements
    try:
        vectors = get_index("vector").stored_vectors(contenders, scopes=[result.scope])
    except IndexUnavailable as exc:
        result.notices.append(f"the block was not checked for memories saying the same thing: {exc}")
        return placements

    def similarity(a: str, b: str) -> float | None:
        return float(vectors[a] @ vectors[b]) if a in vectors and b in vectors else None

    return block.size_block(entries, result.limit, knobs, similarity)


def _start_selector(result: RecallResult, considered: list[Found], selector_config):
    """Send the candidates' headers to the model selector, or say (fallback_reason) why not."""
    settings = result.settings
    if not settings.selector:
        result.fallback_reason = Reason("selector_off")
        return None
    config = selector.SelectorConfig.from_settings(settings.selector_timeout_ms)
    if selector_config is not CONFIGURED:
        config = selector_config
    if config is None:
        result.fallback_reason = Reason("selector_not_configured")
        return None
    if not considered:
        result.fallback_reason = Reason("selector_nothing_offered")
        return None
    headers = [
        selector.Header(
            id=str(f.memory.pk),
            kind=f.memory.kind,
            tier=f.memory.tier,
            age=age(f.memory.created_at, result.created_at),
            first_line=selector.first_line(f.memory.text),
        )
        for f in considered
    ]
    try:
        return selector.start(result.search_text, headers, result.tools, result.limit, config)
    except Exception as exc:  # a client that cannot even be built (a malformed base URL): fall back, say why
        result.fallback_reason = Reason("selector_error", message=f"{type(exc).__name__}: {str(exc)[:200]}")
        return None


def _selector_picks(result, pending, considered, by_id, filtered) -> list[str] | None:
    """The selector's picks after the post-filter, or None (and the fallback reason) when it did not answer."""
    waited = time.perf_counter()
    try:
        answer = pending.wait()
    except selector.SelectorFailed as exc:
        result.fallback_reason = exc.reason
        result.selector_answer = exc.raw
        result.selector_ms = exc.elapsed_ms
        return None
    finally:
        result.timings_ms["selector_wait"] = (time.perf_counter() - waited) * 1000
        result.timings_ms["selector"] = pending.elapsed_ms()
    result.selector_answer, result.selector_ms = answer.raw, answer.elapsed_ms
    result.notices += answer.notices
    picks = []
    for f in considered:
        rc = by_id[str(f.memory.pk)]
        rc.selector = Decision("not_selected", [Reason("not_picked")])
    for position, pk in enumerate(answer.ids, 1):
        rc = by_id[pk]
        said = [Reason("free_text", text=answer.reasons[pk])] if answer.reasons.get(pk) else []
        why = [Reason("selector_pick", rank=position), *said]
        if pk in filtered:
            rc.selector = Decision("filtered", [filtered[pk], *why])
        elif rc.heuristic.reasons and rc.heuristic.reasons[0].code == "missing_required":
            rc.selector = Decision("not_selected", [*rc.heuristic.reasons, *why])
        else:
            rc.selector = Decision("selected", why)
            picks.append(pk)
    return picks


def _pick_directly(result: RecallResult, parsed: heuristic.ParsedQuery) -> None:
    """`select:<id>,<id>`: the memories named (full ids or the short ids the pages show), in that
    order, if active in the scope."""
    result.mode = "select"
    valid = []
    for raw in parsed.select_ids:
        try:
            valid.append(str(memory_ids.resolve(raw, scopes=result.scope)))
        except memory_ids.MemoryIdError as exc:
            if exc.code != "unknown":
                result.notices.append(f"select: {exc}")
                continue
            try:  # a full id of no memory here: said below, as one that is not active in the scope
                valid.append(str(uuid.UUID(raw)))
            except ValueError:
                result.notices.append(f"select: {exc}")
    rows = {str(m.pk): m for m in Memory.objects.active().filter(pk__in=valid, scope=result.scope)}
    for pk in valid:
        memory = rows.get(pk)
        if memory is None:
            result.notices.append(f"select: no active memory {pk} in {result.scope}")
            continue
        if len(result.selected) >= result.limit:
            result.notices.append(f"select: {pk} is past the limit of {result.limit}")
            continue
        found = Found(memory, _direct_candidate(pk))
        picked = Decision("selected", [Reason("picked_by_select")])
        rc = RecallCandidate(found=found, heuristic=picked, final=picked, score=1.0)
        result.selected.append(rc)
        result.candidates.append(rc)
    if parsed.text:
        result.notices.append("the words besides select: were not searched")


def _direct_candidate(pk: str) -> Candidate:
    return Candidate(
        id=pk, vector_rank=None, vector_score=None, bm25_rank=None, bm25_score=None, bm25_coverage=None,
        contributions={}, fused=0.0, adjustments={}, score=0.0, label="strong", reasons=(Reason("picked_by_select"),),
    )  # fmt: skip


def render_block(selected: list[RecallCandidate], now: datetime) -> str:
    """The ephemeral recall block: a heading that says it is for this turn only, a line a memory."""
    if not selected:
        return ""
    lines = [BLOCK_HEADING]
    for rc in selected:
        memory = rc.found.memory
        text = " ".join(memory.text.split())
        if len(text) > MAX_BLOCK_LINE_CHARS:
            text = text[: MAX_BLOCK_LINE_CHARS - 1] + "…"
        when = age(memory.created_at, now)
        lines.append(f"- [{memory.pk}] {memory.kind}/{memory.tier} · score {rc.score:.2f} · {when} old: {text}")
    return "\n".join(lines)


def record_recall(result: RecallResult, *, actor: str) -> int:
    """Bump access_count/accessed_at of the memories an agent was given, with a `recalled` event each."""
    ids = [rc.found.memory.pk for rc in result.selected]
    return Memory.objects.record_recalled(
        ids, actor=actor, reason=f"recalled for {result.query[:200]!r} ({result.mode})"
    )


# --- why not recalled? ----------------------------------------------------------------------------


def why_not(result: RecallResult, memory_id, *, scopes: list[str] | None = None) -> list[tuple[str, str]]:
    """The stages one memory went through in `result`, up to the one that dropped it: (stage, what happened).

    `memory_id` is a full or short id (`memoryui.memory_ids`), of a memory in `scopes` (None: any);
    tombstoned memories and those of other scopes are found, since being one is the answer.
    """
    try:
        pk = memory_ids.resolve(str(memory_id), scopes=scopes)
    except memory_ids.MemoryIdError as exc:
        return [("memory", f"{exc}.")]
    memory = Memory.objects.get(pk=pk)
    if memory.status != Memory.Status.ACTIVE:
        why = memory.tombstone_reason or "no reason given"
        return [("memory", f"It is tombstoned ({why}): only active memories are recalled.")]
    if memory.scope != result.scope:
        return [("scope", f"It is in scope {memory.scope}; this recall ran in {result.scope}.")]
    rc = result.decision_of(pk)
    if result.mode == "select":
        verdict = "picked by select:" if rc else "not named by select:, which picks memories by id only"
        return [("select", verdict)]
    if rc is None:
        return [("retrieval", _not_retrieved(result, memory))]
    data = rc.to_dict(result.created_at)
    similarity, margin = data["vector_similarity"], data["vector_margin"]
    vector = (
        f"vector #{data['vector_rank']} (similarity {similarity}, {margin:+.3f} over the anchor)"
        if data["vector_rank"] and margin is not None
        else f"vector #{data['vector_rank']} (similarity {similarity})"
        if data["vector_rank"]
        else "not in the vector candidates"
    )
    bm25 = (
        f"BM25 #{data['bm25_rank']} (score {data['bm25_score']}, covers {data['bm25_coverage']:.0%} of the query)"
        if data["bm25_rank"]
        else "not in the BM25 candidates"
    )
    stages = [("retrieval", f"{vector}; {bm25}; fused {data['fused_score']}")]
    if not result.answered:
        stages.append(("answerability", f"the query is not answered: {result.answer_reason}"))
        return stages
    if data["label"] == "below_floor":
        stages.append(("relevance floor", "below the floor: " + "; ".join(data["reasons"])))
        return stages
    stages.append(("relevance floor", f"{data['label']}: " + "; ".join(data["reasons"])))
    stages.append(("heuristic", f"{rc.heuristic.decision}: " + "; ".join(rc.heuristic.reasons)))
    if rc.selector is not None:
        stages.append(("selector", f"{rc.selector.decision}: " + "; ".join(rc.selector.reasons)))
    else:
        stages.append(("selector", f"did not answer ({result.fallback_reason})"))
    stages.append(("final", f"{rc.final.decision} (answered by the {result.mode})"))
    return stages


def _not_retrieved(result: RecallResult, memory: Memory) -> str:
    """Why retrieval missed a memory: how close it was to the last candidate of each retriever."""
    knobs = result.settings.retrieval
    parts = [f"it is in neither the vector top {knobs.vector_k} nor the BM25 top {knobs.bm25_k} for this query"]
    scores = [rc.found.candidate.vector_score for rc in result.candidates if rc.found.candidate.vector_score]
    try:
        embedder = get_embedder()
        query_vector = embedder.embed_query(result.search_text)
        [passage] = embedder.embed_passages([memory.text])
        similarity = float(query_vector @ passage)
        cutoff = f"; the last vector candidate had {min(scores):.3f}" if scores else ""
        parts.append(f"its similarity to the query is {similarity:.3f}{cutoff}")
    except EmbedderUnavailable:
        pass
    terms = list(dict.fromkeys(tokenize(result.search_text)))
    held = set(terms) & set(tokenize(" ".join([memory.text, memory.entity_key or ""])))
    parts.append(f"it holds {len(held)} of the query's {len(terms)} search terms")
    return "; ".join(parts) + "."
