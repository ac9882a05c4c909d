"""The block's size: after the best match, only what the evidence supports, each left-out memory with its reason."""

from __future__ import annotations

import pytest

from recall import heuristic
from recall.block import (
    BELOW_CUT,
    BEST,
    CLOSE,
    GAP,
    PAST_LIMIT,
    SAME_AS,
    WEAK,
    BlockKnobs,
    Entry,
    size_block,
    words,
)

KNOBS = BlockKnobs(cut=0.5, weak_cut=1.0, gap=1.0, redundancy=0.97)


def codes(placements) -> list[str]:
    return [p.code for p in placements]


def test_limit_is_a_ceiling_not_a_quota_far_weaker_memories_stay_out():
    ranked = [Entry("a", 1.0), Entry("b", 0.21), Entry("c", 0.18), Entry("d", 0.15), Entry("e", 0.15)]
    placements = size_block(ranked, 5, KNOBS)
    assert codes(placements) == [BEST, BELOW_CUT, BELOW_CUT, BELOW_CUT, BELOW_CUT]
    assert [p.id for p in placements if p.kept] == ["a"]
    assert placements[1].reason == "21% of the best score; the cut is 50%"


def test_memories_close_to_the_best_join_it_up_to_the_limit():
    ranked = [Entry("a", 1.0), Entry("b", 0.9), Entry("c", 0.8), Entry("d", 0.6)]
    placements = size_block(ranked, 2, KNOBS)
    assert codes(placements) == [BEST, CLOSE, PAST_LIMIT, PAST_LIMIT]
    assert placements[2].reason == "80% of the best score, but the block is full (limit 2)"
    assert [p.position for p in placements] == [1, 2, 3, 4]


def test_a_weak_match_needs_its_own_cut():
    ranked = [Entry("a", 1.0), Entry("b", 0.95, label="weak"), Entry("c", 0.9)]
    placements = size_block(ranked, 5, KNOBS)
    assert codes(placements) == [BEST, WEAK, CLOSE]
    assert placements[1].reason == "a weak match at 95% of the best score; a weak match needs 100%"
    relaxed = size_block(ranked, 5, BlockKnobs(cut=0.5, weak_cut=0.9))
    assert codes(relaxed) == [BEST, CLOSE, CLOSE]


def test_the_best_leads_the_block_even_when_weak():
    placements = size_block([Entry("a", 1.0, label="weak"), Entry("b", 0.2)], 5, KNOBS)
    assert codes(placements) == [BEST, BELOW_CUT]
    assert placements[0].reason == "the best match"


def test_a_drop_ends_the_block_whatever_comes_after():
    ranked = [Entry("a", 1.0), Entry("b", 0.95), Entry("c", 0.6), Entry("d", 0.58)]
    placements = size_block(ranked, 5, BlockKnobs(cut=0.5, gap=0.3))
    assert codes(placements) == [BEST, CLOSE, GAP, GAP]
    assert placements[2].reason == ("60% of the best score, after a drop of 35% below #2; a drop of 30% ends the block")
    assert codes(size_block(ranked, 5, BlockKnobs(cut=0.5, gap=1.0))) == [BEST, CLOSE, CLOSE, CLOSE]


def test_two_memories_saying_the_same_thing_count_once_and_free_the_slot():
    ranked = [Entry("a", 1.0), Entry("a2", 0.99), Entry("b", 0.9)]
    similar = {frozenset(("a", "a2")): 0.985, frozenset(("a", "b")): 0.82, frozenset(("a2", "b")): 0.81}
    placements = size_block(ranked, 2, KNOBS, lambda x, y: similar[frozenset((x, y))])
    assert codes(placements) == [BEST, SAME_AS, CLOSE]
    assert placements[1].reason == "says the same as #1 (similarity 0.985 ≥ 0.97)"
    assert placements[1].params == {"position": 1, "similarity": 0.985, "threshold": 0.97}


def test_redundancy_needs_known_similarities_and_can_be_switched_off():
    ranked = [Entry("a", 1.0), Entry("a2", 0.99)]
    assert codes(size_block(ranked, 5, KNOBS, lambda x, y: None)) == [BEST, CLOSE]
    off = BlockKnobs(cut=0.5, redundancy=1.01)
    assert codes(size_block(ranked, 5, off, lambda x, y: 1.0)) == [BEST, CLOSE]


def test_a_cut_above_one_hands_over_the_best_alone():
    ranked = [Entry("a", 1.0), Entry("b", 1.0)]
    assert codes(size_block(ranked, 5, BlockKnobs(cut=1.01))) == [BEST, BELOW_CUT]


def test_no_candidates_no_block_and_nonpositive_scores_do_not_divide_by_zero():
    assert size_block([], 5, KNOBS) == []
    placements = size_block([Entry("a", 0.0), Entry("b", 0.0), Entry("c", -0.1)], 5, KNOBS)
    assert codes(placements) == [BEST, CLOSE, BELOW_CUT]


def test_a_placement_is_a_code_with_numbers_and_its_words_are_made_from_them():
    [best, below] = size_block([Entry("a", 1.0), Entry("b", 0.123456)], 5, KNOBS)
    data = below.to_dict()
    assert data == {
        "id": "b",
        "position": 2,
        "code": BELOW_CUT,
        "share": 0.1235,
        "params": {"cut": 0.5},
        "kept": False,
        "reason": "12% of the best score; the cut is 50%",
    }
    assert words(data["code"], data["share"], data["params"]) == data["reason"]
    assert best.to_dict()["kept"] is True


def test_shares_are_of_the_strongest_evidence_even_when_it_ranks_second():
    placements = size_block([Entry("a", 0.8), Entry("b", 1.0), Entry("c", 0.5)], 5, BlockKnobs(cut=0.7))
    assert codes(placements) == [BEST, CLOSE, BELOW_CUT]
    assert [round(p.share, 2) for p in placements] == [0.8, 1.0, 0.5]


def test_the_evidence_compared_leaves_out_the_ranking_bonuses():
    """The same fact in another language holds the query's words by meaning, not verbatim: the best
    one's whole-query and key bonuses order the two, but must not push the other below the cut."""
    query = heuristic.QueryForms.of("lucky number")
    weights = heuristic.Weights()
    verbatim = heuristic.score("en", 1.0, 1.0, heuristic.Fields("My lucky number is 88."), query, weights)
    translated = heuristic.score("zh", 0.6, 1.0, heuristic.Fields("我的幸运数字是 88"), query, weights)
    assert "query found in text" in verbatim.signals and verbatim.score > translated.score
    assert verbatim.evidence == pytest.approx(1.0 + 0.2) and translated.evidence == pytest.approx(0.6 + 0.2)
    entries = [Entry(s.id, s.evidence) for s in (verbatim, translated)]
    assert codes(size_block(entries, 5, BlockKnobs(cut=0.6))) == [BEST, CLOSE]
    by_score = [Entry(s.id, s.score) for s in (verbatim, translated)]
    assert codes(size_block(by_score, 5, BlockKnobs(cut=0.6))) == [BEST, BELOW_CUT]
