"""A recall's candidates in words (recall.explain): grouped by the stage that kept them out, each
outcome said once, from the recall's JSON alone (so a trace saved long ago reads the same). No database."""

from __future__ import annotations

from recall.explain import explain, selector_state

NOT_CONFIGURED = "selector not configured (no MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)"


def candidate(pk: str, decision: str, reasons: list[str], **fields) -> dict:
    heuristic = fields.pop("heuristic", {"decision": decision, "reasons": reasons})
    return {"id": pk, "decision": decision, "reasons": reasons, "heuristic": heuristic, "selector": None, **fields}


BELOW = candidate(
    "b1",
    "below_floor",
    ["below floor: vector -0.002 over the anchor", "below floor: no BM25 match"],
    label="below_floor",
    label_reasons=["vector -0.002 over the anchor", "no BM25 match", "below floor: margin < +0.000 and coverage < 10%"],
    vector_margin=-0.002,
    bm25_coverage=None,
)
FILTERED = candidate(
    "f1", "filtered", ["active tool mcp__ata__article-list-query + marker 'call format'"], label="strong"
)
PAST_LIMIT = candidate("n1", "not_selected", ["heuristic rank 7, past the limit of 5"], label="weak")
MISSING = candidate("n2", "not_selected", ["missing required 'locale'"], label="weak")
RECALLED = candidate(
    "s1", "selected", ["heuristic rank 1", "retrieval 1.00", "text covers 84% of the query"], label="strong"
)


def run(*candidates: dict, **fields) -> dict:
    fields.setdefault("mode", "heuristic")
    fields.setdefault("fallback_reason", NOT_CONFIGURED)
    fields.setdefault("answer", {"answered": True, "reason": "1 strong match"})
    return {"candidates": list(candidates), **fields}


def test_candidates_are_grouped_by_stage_with_a_one_line_summary_each():
    explained = explain(run(RECALLED, BELOW, FILTERED, PAST_LIMIT, MISSING, dict(BELOW, id="b2")))
    assert [group.stage for group in explained.groups] == ["selected", "filtered", "not_selected", "below_floor"]
    assert [group.summary for group in explained.groups] == [
        "1 recalled",
        "1 filtered by the active-tool filter",
        "2 not selected (1 past the limit, 1 missing a required word)",
        "2 below the relevance floor",
    ]
    assert explained.summary == " · ".join(group.summary for group in explained.groups)
    assert explained.recalled.rows[0].candidate["id"] == "s1"
    assert [g.stage for g in explained.not_recalled] == ["filtered", "not_selected", "below_floor"]


def test_a_below_floor_candidate_is_too_weak_a_match_said_once_in_words():
    [row] = explain(run(BELOW)).groups[0].rows
    assert row.why == (
        "Too weak a match: neither retriever found it close enough — its meaning is no closer to the query "
        "than unrelated text, and it shares no words with the query."
    )
    assert "margin" not in row.why and "0.002" not in row.why and "floor:" not in row.why


def test_below_floor_with_some_shared_words_says_how_many():
    shared = dict(BELOW, vector_margin=None, bm25_coverage=0.05, label_reasons=["no vector match"])
    [row] = explain(run(shared)).groups[0].rows
    assert row.why.endswith(
        "the vector search did not find it, and it shares few of the query's words (5%, by rarity)."
    )


def test_a_query_left_unanswered_says_recall_stays_silent():
    weak = candidate("w1", "below_floor", ["query not answered: no strong match (1 weak)"], label="weak")
    explained = explain(run(weak, answer={"answered": False, "reason": "no strong match (1 weak)"}))
    [group] = explained.groups
    assert group.summary == "1 below the relevance floor (the query is not answered)"
    assert group.rows[0].why.startswith("Recall stays silent on this query (no strong match (1 weak))")


def test_a_filtered_candidate_names_the_tool_and_the_marker():
    [row] = explain(run(FILTERED)).groups[0].rows
    assert "it names mcp__ata__article-list-query, a tool the agent is using right now" in row.why
    assert "(“call format”)" in row.why


def test_not_selected_says_which_rank_and_limit_or_which_word_is_missing():
    rows = {row.candidate["id"]: row for row in explain(run(PAST_LIMIT, MISSING)).groups[0].rows}
    assert rows["n1"].why == "Ranked 7th by the heuristic: past the limit of 5."
    assert rows["n2"].why == "It does not hold the required word “locale”."


def test_a_recalled_candidate_keeps_every_signal_in_words():
    [row] = explain(run(RECALLED)).groups[0].rows
    assert (
        row.why == "Ranked 1st by the heuristic: the best retrieval score; holds 84% of the query's words (by rarity)."
    )


def test_when_the_selector_leaves_out_a_heuristic_pick_the_row_says_so():
    left_out = candidate(
        "x1",
        "not_selected",
        ["not picked by the selector"],
        heuristic={"decision": "selected", "reasons": ["heuristic rank 2", "retrieval 0.50"]},
        selector={"decision": "not_selected", "reasons": ["not picked by the selector"]},
    )
    explained = explain(run(left_out, mode="selector", fallback_reason=None))
    assert (
        explained.groups[0].rows[0].why == "The selector did not pick it. The heuristic would have recalled it (2nd)."
    )
    assert explained.groups[0].summary == "1 not selected (not picked by the selector)"
    assert explained.selector is None  # the selector answered: its column shows its decisions


def test_the_selector_column_says_why_it_is_empty():
    assert selector_state(run(RECALLED))["state"] == "not_configured"
    assert selector_state(run(RECALLED, fallback_reason="selector off in this profile", profile="p"))["text"] == (
        "Off in profile p: the heuristic answered."
    )
    timed_out = selector_state(run(RECALLED, fallback_reason="timeout after 2500 ms"))
    assert timed_out == {"state": "failed", "text": "Did not answer (timeout after 2500 ms): the heuristic answered."}
    assert selector_state(run(RECALLED, mode="select", fallback_reason=None))["state"] == "select"


def test_a_trace_with_little_in_it_still_reads():
    assert explain({"block": "", "candidates": []}).groups == []
    odd = explain({"candidates": [{"id": "z", "decision": "weird"}, "not a dict"]})
    assert [(g.stage, g.summary) for g in odd.groups] == [("not_selected", "1 not selected")]
    assert odd.groups[0].rows[0].why == "Not selected."
