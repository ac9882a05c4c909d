"""A recall's candidates in words a person reads: each one's outcome said once, grouped by the stage
that decided it.

The pipeline's reasons (recall.pipeline, searchindex.answerability, recall.toolfilter) are terse and
exact ("vector -0.002 over the anchor", "heuristic rank 7: 12% of the best score; the cut is 70%"):
they stay as they are in the API, the command line and the traces, and the playground shows them as
numbers on demand. This module reads a recall as its JSON (`RecallResult.to_dict()`, which a trace
stores) and says what happened to each candidate in a sentence. It reads each reason by its code and
parameters (memoryui.reasons); a trace saved before reasons had codes holds their words only, which
`memoryui.reasons.restore` reads back, so old traces read the same way.

The memory list's search results are worded with the same phrases (`match_why`): a label and one
sentence on what found the memory, by meaning, by keywords or both, the numbers on demand.

Plain values only: no database, no index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memoryui.reasons import Reason, restore, restore_one
from recall import block

RECALLED, FILTERED, NOT_SELECTED, BELOW_FLOOR = "selected", "filtered", "not_selected", "below_floor"
# The order of the groups on the page: what was recalled, then the nearest misses first.
STAGES = (RECALLED, FILTERED, NOT_SELECTED, BELOW_FLOOR)

DECISION_WORDS = {RECALLED: "selected", FILTERED: "filtered", NOT_SELECTED: "not selected", BELOW_FLOOR: "below floor"}

# Why a candidate was not selected, for the group's one-line summary.
PAST_LIMIT, PAST_CANDIDATES, MISSING_WORD, NOT_PICKED, OTHER = (
    "past the limit",
    "past the candidates the heuristic scores",
    "missing a required word",
    "not picked by the selector",
    "other",
)
# The heuristic's block left it out (recall.block), by the placement's code.
BLOCK_CAUSES = {
    block.BELOW_CUT: "too far below the best",
    block.WEAK: "a weak match",
    block.GAP: "after a drop in scores",
    block.SAME_AS: "says the same as another",
    block.PAST_LIMIT: PAST_LIMIT,
}


@dataclass
class Row:
    """One candidate and its outcome in words."""

    candidate: dict
    why: str  # the one sentence the page shows for its final decision
    cause: str = ""  # for not selected: which of the causes above


@dataclass
class Group:
    stage: str
    rows: list[Row] = field(default_factory=list)
    summary: str = ""


@dataclass
class Explained:
    groups: list[Group]  # in STAGES order, the empty ones left out
    summary: str  # "5 recalled · 1 filtered by the active-tool filter · …"
    selector: dict | None  # when no candidate has a selector decision: why (see selector_state)

    @property
    def recalled(self) -> Group | None:
        return next((g for g in self.groups if g.stage == RECALLED), None)

    @property
    def not_recalled(self) -> list[Group]:
        return [g for g in self.groups if g.stage != RECALLED]


def explain(run: dict) -> Explained:
    """Group a recall's candidates by their final decision, each with its reason in words."""
    candidates = [c for c in (run.get("candidates") or []) if isinstance(c, dict)]
    groups = {stage: Group(stage) for stage in STAGES}
    for candidate in candidates:
        stage = candidate.get("decision")
        group = groups.get(stage) or groups[NOT_SELECTED]
        group.rows.append(_row(candidate, run))
    shown = [group for group in groups.values() if group.rows]
    for group in shown:
        group.summary = group_summary(group, run)
    return Explained(
        groups=shown,
        summary=" · ".join(group.summary for group in shown),
        selector=selector_state(run),
    )


def group_summary(group: Group, run: dict) -> str:
    """One line for a group: "31 below the relevance floor", "7 not selected (6 past the limit, …)"."""
    n = len(group.rows)
    if group.stage == RECALLED:
        return f"{n} recalled"
    if group.stage == FILTERED:
        return f"{n} filtered by the active-tool filter"
    if group.stage == BELOW_FLOOR:
        if not _answered(run) and any(row.candidate.get("label") != BELOW_FLOOR for row in group.rows):
            return f"{n} below the relevance floor (the query is not answered)"
        return f"{n} below the relevance floor"
    causes: dict[str, int] = {}
    for row in group.rows:
        causes[row.cause] = causes.get(row.cause, 0) + 1
    if len(causes) == 1:
        [cause] = causes
        return f"{n} not selected" + ("" if cause == OTHER else f" ({cause})")
    parts = ", ".join(f"{count} {cause}" for cause, count in causes.items())
    return f"{n} not selected ({parts})"


def selector_state(run: dict) -> dict | None:
    """Why the Selector column is empty, when it is: {"state", "text"}; None when the selector answered.

    States: `not_configured` (no LLM endpoint: the page says how to set one up), `off` (the profile
    turns it off), `select` (the query picked memories by id), `failed` (it erred, was too slow, or
    had nothing to choose from).
    """
    candidates = [c for c in (run.get("candidates") or []) if isinstance(c, dict)]
    if any(c.get("selector") for c in candidates):
        return None
    reason = restore_one(run.get("fallback_reason"), run.get("fallback_reason_code"))
    if run.get("mode") == "select":
        return {"state": "select", "text": "Not asked: select: picks memories by id."}
    if reason is None:
        return {"state": "failed", "text": "Not asked."}
    if reason.code == "selector_not_configured":
        return {"state": "not_configured", "text": "No LLM is configured, so the heuristic answered alone."}
    if reason.code == "selector_off":
        return {"state": "off", "text": f"Off in profile {run.get('profile') or 'default'}: the heuristic answered."}
    return {"state": "failed", "text": f"Did not answer ({reason}): the heuristic answered."}


def reasons_of(data: dict, key: str = "reasons") -> list[Reason]:
    """The reasons `data` (a candidate, a decision) lists under `key`, read from the codes stored beside
    them: `reasons` → `reason_codes`, `label_reasons` → `label_reason_codes`, `signals` → `signal_codes`."""
    return restore(data.get(key), data.get(key.removesuffix("s") + "_codes"))


# --- how well a memory matches: the answerability label in words ----------------------------------

STRONG, WEAK = "strong", "weak"
MATCH_TITLES = {STRONG: "Strong match", WEAK: "Weak match", BELOW_FLOOR: "Below the floor"}
STRONG_CODES = ("strong_margin", "strong_coverage", "strong_agreement")  # searchindex.answerability


@dataclass(frozen=True)
class Evidence:
    """What the two retrievers say of one candidate: the answerability decision's two signals."""

    margin: float | None  # vector similarity over the anchor text (None: the vector search missed it)
    coverage: float | None  # the share of the query's words it holds, by rarity (None: no BM25 match)
    refused: str | None = None  # why closeness in meaning does not count for this query at all
    strong_by: str = ""  # the reason code that made it strong, when it is

    @property
    def by_meaning(self) -> bool:
        return self.refused is None and self.margin is not None and self.margin > 0

    @property
    def by_words(self) -> bool:
        return bool(self.coverage)


@dataclass(frozen=True)
class Match:
    """A candidate's label in words and the one sentence that says why."""

    label: str  # strong, weak, below_floor ("" when not judged)
    title: str  # "Strong match"
    why: str  # "Found by both meaning and keywords: …"


def match_why(hit: dict, reasons_key: str = "reasons") -> Match:
    """A search hit's label and one sentence on its evidence, for a person reading the results.

    `hit` is a candidate as JSON: `label`, `vector_margin`, `bm25_coverage` and the label's reasons
    under `reasons_key` (a search result, searchindex.search.Found.to_dict(), holds them under
    `reasons`; a recall candidate under `label_reasons`). The numbers stay in the candidate.
    """
    label = hit.get("label") or ""
    evidence = _evidence(hit, reasons_of(hit, reasons_key))
    title = MATCH_TITLES.get(label, "Not judged")
    if label == BELOW_FLOOR:
        return Match(label, title, _too_weak(evidence))
    meaning, words = evidence.by_meaning, evidence.by_words
    if meaning and words:
        why = f"Found by both meaning and keywords: {_close(label, evidence)}, and {_holds(evidence)}."
    elif meaning:
        why = f"Found by meaning only: {_close(label, evidence)}, and {_no_words(evidence)}."
    elif words:
        why = f"Found by keywords only: {_holds(evidence)}, and {_no_meaning(evidence)}."
    else:
        why = f"Barely found: {_no_meaning(evidence)}, and {_no_words(evidence)}."
    return Match(label, title, why)


def _evidence(candidate: dict, label_reasons: list[Reason]) -> Evidence:
    codes = {reason.code: reason for reason in label_reasons}
    refused = codes.get("vector_not_counted")
    return Evidence(
        margin=candidate.get("vector_margin"),
        coverage=candidate.get("bm25_coverage"),
        refused=refused.params["refused"].strip() if refused is not None else None,
        strong_by=next((code for code in STRONG_CODES if code in codes), ""),
    )


def _close(label: str, evidence: Evidence) -> str:
    if evidence.strong_by == "strong_margin":
        return "it is very close to the query in meaning"
    if label == STRONG:
        return "it is close to the query in meaning"
    return "it is a little closer to the query in meaning than unrelated text"


def _holds(evidence: Evidence) -> str:
    if evidence.coverage >= 0.995:  # as the percentage would show it
        return "it holds all of the query's words"
    return f"it holds {evidence.coverage:.0%} of the query's words (by rarity)"


def _no_meaning(evidence: Evidence) -> str:
    if evidence.refused:
        return f"its closeness in meaning does not count here ({evidence.refused})"
    if evidence.margin is None:
        return "the vector search did not find it"
    return "its meaning is no closer to the query than unrelated text"


def _no_words(evidence: Evidence) -> str:
    if evidence.coverage is None:
        return "it shares no words with the query"
    return "it shares only very common words with the query"


def _too_weak(evidence: Evidence) -> str:
    """Below the floor: neither signal is enough, each said in words."""
    if evidence.by_meaning:
        meaning = "its meaning is barely closer to the query than unrelated text"
    else:
        meaning = _no_meaning(evidence)
    if evidence.by_words:
        words = f"it shares few of the query's words ({evidence.coverage:.0%}, by rarity)"
    else:
        words = _no_words(evidence)
    return f"Too weak a match: neither retriever found it close enough — {meaning}, and {words}."


# --- one candidate --------------------------------------------------------------------------------


def _row(candidate: dict, run: dict) -> Row:
    decision = candidate.get("decision")
    reasons = reasons_of(candidate)
    if decision == RECALLED:
        return Row(candidate, recalled_why(candidate))
    if decision == FILTERED:
        return Row(candidate, filtered_why(reasons))
    if decision == BELOW_FLOOR:
        return Row(candidate, below_floor_why(candidate, run))
    cause, why = not_selected_why(candidate, reasons)
    return Row(candidate, why + _heuristic_disagrees(candidate, run), cause)


def recalled_why(candidate: dict) -> str:
    """The final path's reasons, in full: its rank and every signal that counted."""
    reasons = reasons_of(candidate)
    if not reasons:
        return "Recalled."
    first, rest = reasons[0], reasons[1:]
    if first.code == "heuristic_rank":
        head = f"Ranked {_ordinal(first.params['rank'])} by the heuristic"
    elif first.code == "selector_pick":
        head = f"Picked {_ordinal(first.params['rank'])} by the selector"
    elif first.code == "picked_by_select":
        head = "Picked by select:"
    else:
        return "; ".join(reasons) + "."
    signals = [_signal_words(reason) for reason in rest]
    return head + (": " + "; ".join(signals) if signals else "") + "."


def _signal_words(signal: Reason) -> str:
    """A signal in words; the others (a key or tag matched, the block's placement, the selector's own
    reason) read as they are."""
    params = signal.params
    if signal.code == "retrieval":
        share = round(params["share"], 2)  # as its words show it
        return "the best retrieval score" if share >= 0.995 else f"retrieval score {share:.0%} of the best"
    if signal.code == "text_coverage":
        return f"holds {params['coverage']:.0%} of the query's words (by rarity)"
    if signal.code == "names_active_tool":
        return f"names {params['tool']}, a tool in use, but is no call format or schema"
    if signal.code == "durable_marker":
        return f"names {params['tool']}, a tool in use, and is kept as lasting knowledge (“{params['marker']}”)"
    return str(signal)


def filtered_why(reasons: list[Reason]) -> str:
    found = next((reason for reason in reasons if reason.code == "active_tool_schema"), None)
    if found is None:
        return "Kept out by the active-tool filter" + (f": {reasons[0]}." if reasons else ".")
    return (
        f"Kept out by the active-tool filter: it names {found.params['tool']}, a tool the agent is using right now, "
        f"and reads like a call format or schema (“{found.params['marker']}”) with nothing lasting in it "
        "(no gotcha, workaround, owner…). The tool's live definition is what counts."
    )


def below_floor_why(candidate: dict, run: dict) -> str:
    if candidate.get("label") != BELOW_FLOOR and not _answered(run):
        answer = run.get("answer") or {}
        why = answer.get("reason") or "no strong match"
        return (
            f"Recall stays silent on this query ({why}): no candidate is a strong enough match, "
            "so none is recalled, this one included."
        )
    return _too_weak(_evidence(candidate, reasons_of(candidate, "label_reasons")))


def not_selected_why(candidate: dict, reasons: list[Reason]) -> tuple[str, str]:
    """(cause, sentence) for a candidate that cleared the floor but was not recalled."""
    placement = candidate.get("block")
    if isinstance(placement, dict) and placement.get("code") in BLOCK_CAUSES and not _picked_elsewhere(reasons):
        code, params = placement["code"], placement.get("params") or {}
        said = block.words(code, float(placement.get("share") or 0.0), params)
        rank = _ordinal(int(placement.get("position") or 0))
        return BLOCK_CAUSES[code], f"Ranked {rank} by the heuristic and left out of the block: {said}."
    for reason in reasons:
        params = reason.params
        if reason.code == "block_left_out" and params["why"].code.removeprefix("block_") in BLOCK_CAUSES:
            cause = BLOCK_CAUSES[params["why"].code.removeprefix("block_")]
            rank = _ordinal(params["rank"])
            return cause, f"Ranked {rank} by the heuristic and left out of the block: {params['why']}."
        if reason.code == "past_limit":
            return (
                PAST_LIMIT,
                f"Ranked {_ordinal(params['rank'])} by the heuristic: past the limit of {params['limit']}.",
            )
        if reason.code == "past_candidates":
            return PAST_CANDIDATES, (
                f"Not scored: only the best {params['n']} candidates above the floor go to the heuristic "
                "and the selector (the profile's “candidates” knob)."
            )
        if reason.code == "missing_required":
            words = [r.params["word"] for r in reasons if r.code == "missing_required"]
            quoted = ", ".join(f"“{word}”" for word in words)
            return MISSING_WORD, f"It does not hold the required word{'s' if len(words) > 1 else ''} {quoted}."
        if reason.code == "not_picked":
            return NOT_PICKED, "The selector did not pick it."
    return OTHER, ("; ".join(reasons) or "Not selected") + "."


def _picked_elsewhere(reasons: list[Reason]) -> bool:
    """The final decision was not the heuristic's (the selector answered): its reasons say why."""
    return any(reason.code in ("not_picked", "selector_pick") for reason in reasons)


def _heuristic_disagrees(candidate: dict, run: dict) -> str:
    """When the selector answered and left out what the heuristic would have recalled, say so."""
    heuristic = candidate.get("heuristic") or {}
    if run.get("mode") != "selector" or heuristic.get("decision") != RECALLED:
        return ""
    rank = next((r.params["rank"] for r in reasons_of(heuristic) if r.code == "heuristic_rank"), None)
    return f" The heuristic would have recalled it{f' ({_ordinal(rank)})' if rank else ''}."


def _answered(run: dict) -> bool:
    answer = run.get("answer")
    return not isinstance(answer, dict) or bool(answer.get("answered", True))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
