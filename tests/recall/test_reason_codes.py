"""Every reason code of the read path (memoryui.reasons): its words, its stored form, the reading of old
traces' words back into it, and what the recall page says of it (recall.explain). No database."""

from __future__ import annotations

import ast
import inspect
import json
import pickle

import pytest

from memoryui import llm
from memoryui.reasons import CODES, Reason, from_text, restore
from recall import explain
from searchindex.search import NO_WORDS

NOT_CONFIGURED = "No LLM is configured, so the heuristic answered alone."
LEFT_OUT = "Ranked 3rd by the heuristic and left out of the block: "
SILENT = "): no candidate is a strong enough match, so none is recalled, this one included."
TOO_WEAK = (
    "Too weak a match: neither retriever found it close enough — its meaning is no closer to the query than "
    "unrelated text, and it shares no words with the query."
)

# code: (parameters, the words exactly as the API shows them, what the recall page says of it)
SAMPLES: dict[str, tuple[dict, str, str]] = {
    "vector_not_counted": (
        {"refused": "an identifier is matched by its characters, not by meaning"},
        "vector similarity not counted: an identifier is matched by its characters, not by meaning",
        "Too weak a match: neither retriever found it close enough — its closeness in meaning does not count here "
        "(an identifier is matched by its characters, not by meaning), and it shares no words with the query.",
    ),
    "vector_margin": ({"margin": -0.002}, "vector -0.002 over the anchor", TOO_WEAK),
    "vector_margin_checked": (
        {"margin": 0.031},
        "vector +0.031 over the anchor (outside the top k, read from its stored vector)",
        TOO_WEAK,
    ),
    "no_vector_match": ({}, "no vector match", TOO_WEAK),
    "bm25_coverage": ({"coverage": 0.42}, "BM25 covers 42% of the query", TOO_WEAK),
    "no_bm25_match": ({}, "no BM25 match", TOO_WEAK),
    "strong_margin": ({"strong_margin": 0.085}, "strong: margin ≥ +0.085", TOO_WEAK),
    "strong_coverage": ({"strong_coverage": 0.6}, "strong: coverage ≥ 60%", TOO_WEAK),
    "strong_agreement": (
        {"agree_margin": 0.03, "agree_coverage": 0.3},
        "strong: both retrievers agree (margin ≥ +0.030 and coverage ≥ 30%)",
        TOO_WEAK,
    ),
    "weak": (
        {"strong_margin": 0.085, "strong_coverage": 0.6},
        "weak: margin < +0.085 and coverage < 60%",
        TOO_WEAK,
    ),
    "below_floor": (
        {"weak_margin": 0.02, "weak_coverage": 0.3},
        "below floor: margin < +0.020 and coverage < 30%",
        TOO_WEAK,
    ),
    "one_strong_match": ({}, "1 strong match", "Recall stays silent on this query (1 strong match" + SILENT),
    "strong_matches": ({"n": 4}, "4 strong matches", "Recall stays silent on this query (4 strong matches" + SILENT),
    "no_candidates": (
        {},
        "no candidate in either index",
        "Recall stays silent on this query (no candidate in either index" + SILENT,
    ),
    "no_strong_match": (
        {"weak": 2},
        "no strong match (2 weak)",
        "Recall stays silent on this query (no strong match (2 weak)" + SILENT,
    ),
    "none_clears_floor": (
        {},
        "no candidate clears the floor",
        "Recall stays silent on this query (no candidate clears the floor" + SILENT,
    ),
    "no_words": ({}, NO_WORDS, f"Recall stays silent on this query ({NO_WORDS}" + SILENT),
    "retrieval": ({"share": 0.92}, "retrieval 0.92", "Ranked 1st by the heuristic: retrieval score 92% of the best."),
    "exact_key": (
        {"key": "phone:18600000000"},
        "exact key match 'phone:18600000000'",
        "Ranked 1st by the heuristic: exact key match 'phone:18600000000'.",
    ),
    "exact_name": (
        {"name": "deploy-tool"},
        "exact name match 'deploy-tool'",
        "Ranked 1st by the heuristic: exact name match 'deploy-tool'.",
    ),
    "query_in_text": ({}, "query found in text", "Ranked 1st by the heuristic: query found in text."),
    "query_in_key": ({}, "query found in key", "Ranked 1st by the heuristic: query found in key."),
    "tag": ({"tag": "deploy"}, "tag 'deploy'", "Ranked 1st by the heuristic: tag 'deploy'."),
    "text_coverage": (
        {"coverage": 0.84},
        "text covers 84% of the query",
        "Ranked 1st by the heuristic: holds 84% of the query's words (by rarity).",
    ),
    "answer_type_missing": (
        {"kind": "time", "share": 0.7},
        "asked for a time, holds none (× 0.7)",
        "Ranked 1st by the heuristic: asked for a time, holds none (× 0.7).",
    ),
    "names_active_tool": (
        {"tool": "mcp__ata__article-list-query"},
        "names active tool mcp__ata__article-list-query, no schema marker",
        "Ranked 1st by the heuristic: names mcp__ata__article-list-query, a tool in use, but is no call format "
        "or schema.",
    ),
    "durable_marker": (
        {"marker": "owner", "tool": "ata::article-list-query"},
        "kept: durable marker 'owner' (active tool ata::article-list-query)",
        "Ranked 1st by the heuristic: names ata::article-list-query, a tool in use, and is kept as lasting "
        "knowledge (“owner”).",
    ),
    "active_tool_schema": (
        {"tool": "mcp__ata__article-list-query", "marker": "parameter schema"},
        "active tool mcp__ata__article-list-query + marker 'parameter schema'",
        "Kept out by the active-tool filter: it names mcp__ata__article-list-query, a tool the agent is using "
        "right now, and reads like a call format or schema (“parameter schema”) with nothing lasting in it (no "
        "gotcha, workaround, owner…). The tool's live definition is what counts.",
    ),
    "block_best": ({}, "the best match", "Ranked 1st by the heuristic: the best match."),
    "block_close": (
        {"share": 0.82, "cut": 0.7},
        "82% of the best score; the cut is 70%",
        "Ranked 1st by the heuristic: 82% of the best score; the cut is 70%.",
    ),
    "block_below_cut": (
        {"share": 0.45, "cut": 0.7},
        "45% of the best score; the cut is 70%",
        LEFT_OUT + "45% of the best score; the cut is 70%.",
    ),
    "block_weak": (
        {"share": 0.9, "cut": 1.0},
        "a weak match at 90% of the best score; a weak match needs 100%",
        LEFT_OUT + "a weak match at 90% of the best score; a weak match needs 100%.",
    ),
    "block_gap": (
        {"share": 0.3, "drop": 0.5, "after": 2, "gap": 0.4},
        "30% of the best score, after a drop of 50% below #2; a drop of 40% ends the block",
        LEFT_OUT + "30% of the best score, after a drop of 50% below #2; a drop of 40% ends the block.",
    ),
    "block_same_as": (
        {"position": 1, "similarity": 0.981, "threshold": 0.97},
        "says the same as #1 (similarity 0.981 ≥ 0.97)",
        LEFT_OUT + "says the same as #1 (similarity 0.981 ≥ 0.97).",
    ),
    "block_past_limit": (
        {"share": 0.75, "limit": 5},
        "75% of the best score, but the block is full (limit 5)",
        LEFT_OUT + "75% of the best score, but the block is full (limit 5).",
    ),
    "floored": ({"why": Reason("no_bm25_match")}, "below floor: no BM25 match", TOO_WEAK),
    "query_not_answered": (
        {"why": Reason("no_strong_match", weak=1)},
        "query not answered: no strong match (1 weak)",
        "Recall stays silent on this query (no strong match (1 weak)" + SILENT,
    ),
    "past_candidates": (
        {"n": 20},
        "past the first 20 candidates",
        "Not scored: only the best 20 candidates above the floor go to the heuristic and the selector (the "
        "profile's “candidates” knob).",
    ),
    "missing_required": (
        {"word": "locale"},
        "missing required 'locale'",
        "It does not hold the required word “locale”.",
    ),
    "heuristic_rank": ({"rank": 2}, "heuristic rank 2", "Ranked 2nd by the heuristic."),
    "block_left_out": (
        {"rank": 3, "why": Reason("block_below_cut", share=0.45, cut=0.7)},
        "heuristic rank 3: 45% of the best score; the cut is 70%",
        LEFT_OUT + "45% of the best score; the cut is 70%.",
    ),
    "past_limit": (
        {"rank": 7, "limit": 5},
        "heuristic rank 7, past the limit of 5",
        "Ranked 7th by the heuristic: past the limit of 5.",
    ),
    "selector_pick": ({"rank": 1}, "selector pick 1", "Picked 1st by the selector."),
    "not_picked": ({}, "not picked by the selector", "The selector did not pick it."),
    "picked_by_select": ({}, "picked by select:", "Picked by select:."),
    "free_text": ({"text": "relevant"}, "relevant", "Picked 1st by the selector: relevant."),
    "selector_off": ({}, "selector off in this profile", "Off in profile p: the heuristic answered."),
    "selector_not_configured": (
        {},
        "selector not configured (no MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)",
        NOT_CONFIGURED,
    ),
    "selector_nothing_offered": (
        {},
        "nothing for the selector to choose from: the query is not answered",
        "Did not answer (nothing for the selector to choose from: the query is not answered): the heuristic answered.",
    ),
    "selector_no_endpoint": (
        {"message": llm.NOT_CONFIGURED},
        f"not configured: {llm.NOT_CONFIGURED}",
        f"Did not answer (not configured: {llm.NOT_CONFIGURED}): the heuristic answered.",
    ),
    "selector_error": (
        {"message": "HTTP 500"},
        "error: HTTP 500",
        "Did not answer (error: HTTP 500): the heuristic answered.",
    ),
    "selector_timeout": (
        {"message": "no answer within 2500 ms"},
        "timeout: no answer within 2500 ms",
        "Did not answer (timeout: no answer within 2500 ms): the heuristic answered.",
    ),
    "selector_invalid_json": (
        {"message": "the answer is not JSON"},
        "invalid json: the answer is not JSON",
        "Did not answer (invalid json: the answer is not JSON): the heuristic answered.",
    ),
    "selector_invalid_answer": (
        {"message": "$: 'selected' is a required property"},
        "invalid answer: $: 'selected' is a required property",
        "Did not answer (invalid answer: $: 'selected' is a required property): the heuristic answered.",
    ),
}

LABEL = {"vector_not_counted", "vector_margin", "vector_margin_checked", "no_vector_match", "bm25_coverage"}
LABEL |= {"no_bm25_match", "strong_margin", "strong_coverage", "strong_agreement", "weak", "below_floor"}
ANSWER = {"one_strong_match", "strong_matches", "no_candidates", "no_strong_match", "none_clears_floor", "no_words"}
SIGNALS = {"retrieval", "exact_key", "exact_name", "query_in_text", "query_in_key", "tag", "text_coverage"}
SIGNALS |= {"answer_type_missing", "names_active_tool", "durable_marker", "block_best", "block_close"}
LEFT_OUT_OF_BLOCK = {"block_below_cut", "block_weak", "block_gap", "block_same_as", "block_past_limit"}
NOT_SELECTED = {"past_candidates", "missing_required", "block_left_out", "past_limit", "not_picked"}


def run_around(reason: Reason, *, with_codes: bool) -> dict:
    """A recall's JSON in which `reason` stands where the pipeline puts it; its codes stored or not (an
    old trace)."""

    def listed(key: str, reasons: list[Reason]) -> dict:
        codes = {key.removesuffix("s") + "_codes": [r.to_dict() for r in reasons]} if with_codes else {}
        return {key: [str(r) for r in reasons], **codes}

    def candidate(decision: str, reasons: list[Reason], **fields) -> dict:
        return {"id": "m1", "decision": decision, **listed("reasons", reasons), "heuristic": None, **fields}

    run = {"mode": "heuristic", "profile": "p", "answer": {"answered": True, "reason": "1 strong match"}}
    code = reason.code
    if code in LABEL | {"floored"}:
        why = reason if code in LABEL else reason.params["why"]
        label = listed("label_reasons", [why])
        reasons = [Reason("floored", why=why)] if code in LABEL else [reason]
        found = candidate("below_floor", reasons, label="below_floor", vector_margin=-0.01, **label)
    elif code in ANSWER | {"query_not_answered"}:
        answer = reason.params["why"] if code == "query_not_answered" else reason
        run["answer"] = {"answered": False, "reason": str(answer)}
        found = candidate("below_floor", [Reason("query_not_answered", why=answer)], label="weak")
    elif code in SIGNALS:
        found = candidate("selected", [Reason("heuristic_rank", rank=1), reason])
    elif code == "free_text":
        found = candidate("selected", [Reason("selector_pick", rank=1), reason])
    elif code in ("heuristic_rank", "selector_pick", "picked_by_select"):
        found = candidate("selected", [reason])
    elif code == "active_tool_schema":
        found = candidate("filtered", [reason])
    elif code in NOT_SELECTED | LEFT_OUT_OF_BLOCK:
        out = Reason("block_left_out", rank=3, why=reason) if code in LEFT_OUT_OF_BLOCK else reason
        found = candidate("not_selected", [out])
    else:  # why the selector did not answer
        run["fallback_reason"] = str(reason)
        if with_codes:
            run["fallback_reason_code"] = reason.to_dict()
        return {**run, "candidates": [candidate("selected", [Reason("heuristic_rank", rank=1)])]}
    return {**run, "candidates": [found]}


def said(run: dict) -> str:
    """What the recall page says of the reason: its candidate's sentence, or why the selector is silent."""
    if run.get("fallback_reason"):
        return explain.selector_state(run)["text"]
    [group] = explain.explain(run).groups
    return group.rows[0].why


def test_every_code_has_a_sample():
    assert set(SAMPLES) == set(CODES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_reason_says_its_words_is_stored_read_back_and_explained(code):
    params, words, explained = SAMPLES[code]
    reason = Reason(code, **params)
    assert str(reason) == words == CODES[code].text.format(**params)
    assert (reason.code, reason.params) == (code, params)

    stored = json.loads(json.dumps({"reasons": [reason], "reason_codes": [reason.to_dict()]}))
    [restored] = restore(stored["reasons"], stored["reason_codes"])
    assert stored["reasons"] == [words] and restored.to_dict() == reason.to_dict() and restored == words
    assert pickle.loads(pickle.dumps(reason)).to_dict() == reason.to_dict()

    assert from_text(words).to_dict() == reason.to_dict()  # an old trace's words

    with_codes, old = run_around(reason, with_codes=True), run_around(reason, with_codes=False)
    assert said(with_codes) == said(old) == explained
    assert explained not in catch_alls(with_codes)


def catch_alls(run: dict) -> set[str]:
    """What the page says of a candidate whose reasons it cannot read: their words as they are."""
    reasons = run["candidates"][0]["reasons"]
    return {"; ".join(reasons) + ".", f"Kept out by the active-tool filter: {reasons[0]}."}


def test_no_regular_expression_reads_reasons_on_the_recall_page():
    tree = ast.parse(inspect.getsource(explain))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "re" not in imported


def test_a_reason_is_refused_without_its_parameters_or_with_an_unknown_code():
    with pytest.raises(ValueError, match="takes the parameters rank, limit"):
        Reason("past_limit", rank=7)
    with pytest.raises(ValueError, match="unknown reason code"):
        Reason("past_the_end")
    with pytest.raises(ValueError):
        Reason.from_dict({"code": "past_limit", "rank": "seven", "limit": 5})
    with pytest.raises(AttributeError):
        Reason("not_picked").code = "selector_pick"


def test_a_damaged_or_unknown_stored_code_is_read_from_its_words():
    words = ["heuristic rank 7, past the limit of 5", "relevant"]
    restored = restore(words, [{"code": "from_a_later_version"}, {"code": "free_text", "text": "relevant"}])
    assert [r.to_dict() for r in restored] == [
        {"code": "past_limit", "rank": 7, "limit": 5},
        {"code": "free_text", "text": "relevant"},
    ]
    assert [r.code for r in restore(words, [{"code": "free_text"}])] == ["past_limit", "free_text"]  # not one a reason
    assert restore("not a list") == []


def test_words_no_template_makes_are_free_text_and_say_the_same():
    odd = from_text("heuristic rank seven")
    assert (odd.code, odd, odd.params) == ("free_text", "heuristic rank seven", {"text": "heuristic rank seven"})
