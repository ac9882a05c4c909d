"""Fusion rules: RRF, the light rerank, the relevance floors and the settings that tune them.

Plain values only: no database, no index.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from recall.documents import Hit
from recall.fusion import (
    Candidate,
    CandidateInfo,
    RetrievalSettings,
    SettingsError,
    clamp_limit,
    fuse,
    rrf,
    top_matches,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
# Floors low enough that every hit below counts as a match unless a test says otherwise.
OPEN = RetrievalSettings(vector_floor=0.0, vector_margin=0.0, bm25_floor=0.0, bm25_coverage=0.0)
# Neutral rerank: every test memory looks the same to it unless a test says otherwise.
PLAIN = CandidateInfo(tier="working", pinned=False, importance=0.5, updated_at=NOW)


def hits(*pairs: tuple[str, float]) -> list[Hit]:
    """Hits ranked in the order given."""
    return [Hit(id=memory_id, rank=rank, score=score) for rank, (memory_id, score) in enumerate(pairs, start=1)]


def by_id(candidates: list[Candidate]) -> dict[str, Candidate]:
    return {c.id: c for c in candidates}


def test_rrf_sums_one_over_k_plus_rank_over_the_lists():
    vector = [Hit("a", 1, 0.9), Hit("b", 2, 0.8)]
    bm25 = [Hit("b", 1, 7.0), Hit("c", 3, 2.0)]

    scores = rrf(vector, bm25, k=60)

    assert scores == {
        "a": pytest.approx(1 / 61),  # 0.016393
        "b": pytest.approx(1 / 62 + 1 / 61),  # 0.032522
        "c": pytest.approx(1 / 63),  # 0.015873
    }


def test_rrf_counts_a_memory_listed_twice_in_one_list_once_at_its_best_rank():
    assert rrf([Hit("a", 3, 0.5), Hit("a", 1, 0.9)], k=10) == {"a": pytest.approx(1 / 11)}


def test_rrf_rejects_zero_based_ranks():
    with pytest.raises(ValueError, match="1-based"):
        rrf([Hit("a", 0, 0.5)], k=60)


def test_memory_found_by_both_retrievers_outranks_ones_found_by_only_one():
    vector = hits(("vector-only", 0.91), ("both", 0.90))
    bm25 = hits(("bm25-only", 9.0), ("both", 8.5))
    memories = dict.fromkeys(("vector-only", "both", "bm25-only"), PLAIN)

    ranked = fuse(vector, bm25, memories, OPEN, NOW)

    assert [c.id for c in ranked][0] == "both"
    assert ranked[0].vector_rank == 2 and ranked[0].bm25_rank == 2
    assert ranked[0].rrf_score == pytest.approx(2 / 62)


def test_vector_only_candidate_below_the_vector_floor_is_dropped_with_the_value_and_floor():
    settings = RetrievalSettings(vector_floor=0.83)

    [candidate] = fuse(hits(("m1", 0.78)), [], {"m1": PLAIN}, settings, NOW)

    assert not candidate.passes_floor
    assert candidate.dropped_by == ("vector similarity 0.78 < floor 0.83", "no BM25 match")
    assert candidate.floor_status == "vector similarity 0.78 < floor 0.83; no BM25 match"
    assert top_matches([candidate], 5) == []


def test_candidate_matched_by_bm25_passes_even_when_its_vector_similarity_is_below_the_floor():
    settings = RetrievalSettings(vector_floor=0.83, bm25_floor=1.0)

    [candidate] = fuse(hits(("m1", 0.78)), hits(("m1", 4.2)), {"m1": PLAIN}, settings, NOW)

    assert candidate.passes_floor
    assert candidate.floor_status == "passed"
    assert candidate.matched_by == ("bm25",)


def test_weak_bm25_only_candidate_names_the_bm25_floor():
    settings = RetrievalSettings(bm25_floor=1.5)

    [candidate] = fuse([], hits(("m1", 0.4)), {"m1": PLAIN}, settings, NOW)

    assert candidate.dropped_by == ("no vector match", "BM25 score 0.40 < floor 1.50")


def test_floor_reason_prints_enough_decimals_to_tell_value_from_floor():
    [candidate] = fuse(hits(("m1", 0.8291)), [], {"m1": PLAIN}, RetrievalSettings(vector_floor=0.83), NOW)

    assert candidate.dropped_by[0] == "vector similarity 0.829 < floor 0.830"


def test_fused_floor_drops_a_deep_single_list_match_and_says_so():
    settings = RetrievalSettings(vector_floor=0.0, fused_floor=0.8)  # 0.8 of a first place
    vector = [Hit("top", 1, 0.9), Hit("deep", 40, 0.88)]

    ranked = by_id(fuse(vector, [], {"top": PLAIN, "deep": PLAIN}, settings, NOW))

    assert ranked["top"].passes_floor
    assert ranked["deep"].dropped_by == ("fused score 0.61 < floor 0.80 RRF units",)


def test_pinned_core_memory_wins_a_near_tie():
    settings = RetrievalSettings(vector_floor=0.0)
    vector = hits(("plain", 0.90), ("pinned-core", 0.89))
    memories = {
        "plain": CandidateInfo(tier="working", importance=0.6, updated_at=NOW - timedelta(days=10)),
        "pinned-core": CandidateInfo(tier="core", pinned=True, importance=0.9, updated_at=NOW - timedelta(days=10)),
    }

    ranked = fuse(vector, [], memories, settings, NOW)

    assert [c.id for c in ranked] == ["pinned-core", "plain"]
    assert ranked[0].adjustments["pinned"] > 0 and ranked[0].adjustments["tier"] > 0


def test_pinned_core_memory_does_not_beat_a_match_both_retrievers_found():
    strong = CandidateInfo(tier="peripheral", importance=0.0, updated_at=NOW - timedelta(days=3650))
    favoured = CandidateInfo(tier="core", pinned=True, importance=1.0, updated_at=NOW)
    vector = [Hit("favoured", 1, 0.95), Hit("strong", 30, 0.88)]
    bm25 = [Hit("strong", 30, 1.2)]  # even deep in both lists

    ranked = fuse(vector, bm25, {"strong": strong, "favoured": favoured}, OPEN, NOW)

    assert [c.id for c in ranked] == ["strong", "favoured"]


def test_pinned_core_memory_does_not_beat_a_much_higher_ranked_match_of_the_same_retriever():
    weakest = CandidateInfo(tier="peripheral", importance=0.0, updated_at=NOW - timedelta(days=3650))
    favoured = CandidateInfo(tier="core", pinned=True, importance=1.0, updated_at=NOW)
    vector = [Hit("first", 1, 0.95), Hit("twentieth", 20, 0.86)]

    ranked = fuse(vector, [], {"first": weakest, "twentieth": favoured}, OPEN, NOW)

    assert [c.id for c in ranked] == ["first", "twentieth"]
    spread = sum(ranked[1].adjustments.values()) - sum(ranked[0].adjustments.values())
    assert spread == pytest.approx(OPEN.rerank_spread() * OPEN.rrf_unit)


def test_default_rerank_cannot_lift_a_fifth_place_over_a_first_place_of_the_same_list():
    settings = RetrievalSettings()
    gap_in_units = (1 / (settings.rrf_k + 1) - 1 / (settings.rrf_k + 5)) / settings.rrf_unit
    assert settings.rerank_spread() < gap_in_units


def test_recency_halves_every_half_life():
    settings = RetrievalSettings(recency_half_life_days=30)
    memories = {
        "new": CandidateInfo(tier="working", updated_at=NOW),
        "month": CandidateInfo(tier="working", updated_at=NOW - timedelta(days=30)),
        "two-months": CandidateInfo(tier="working", updated_at=NOW - timedelta(days=60)),
    }
    vector = hits(("new", 0.9), ("month", 0.9), ("two-months", 0.9))

    recency = {c.id: c.adjustments["recency"] for c in fuse(vector, [], memories, settings, NOW)}

    full = settings.recency_weight * settings.rrf_unit
    assert recency == {
        "new": pytest.approx(full),
        "month": pytest.approx(full / 2),
        "two-months": pytest.approx(full / 4),
    }


def test_recency_uses_updated_at_before_created_at_and_pinned_memories_never_decay():
    old = NOW - timedelta(days=300)
    memories = {
        "edited": CandidateInfo(tier="working", created_at=old, updated_at=NOW),
        "pinned": CandidateInfo(tier="core", pinned=True, created_at=old, updated_at=old),
        "undated": CandidateInfo(tier="working"),
    }
    vector = hits(("edited", 0.9), ("pinned", 0.9), ("undated", 0.9))

    recency = {c.id: c.adjustments["recency"] for c in fuse(vector, [], memories, OPEN, NOW)}

    full = OPEN.recency_weight * OPEN.rrf_unit
    assert recency == {"edited": pytest.approx(full), "pinned": pytest.approx(full), "undated": 0.0}


def test_candidate_records_every_adjustment_and_the_final_score():
    info = CandidateInfo(tier="core", pinned=True, importance=0.9, updated_at=NOW)

    [candidate] = fuse(hits(("m1", 0.9)), hits(("m1", 3.0)), {"m1": info}, OPEN, NOW)

    assert set(candidate.adjustments) == {"tier", "pinned", "importance", "recency"}
    assert candidate.score == pytest.approx(candidate.rrf_score + sum(candidate.adjustments.values()))
    assert candidate.matched_by == ("vector", "bm25")
    assert json.loads(json.dumps(candidate.to_dict()))["bm25_score"] == 3.0


def test_hits_for_memories_no_longer_in_the_database_are_left_out():
    ranked = fuse(hits(("gone", 0.99), ("kept", 0.9)), [], {"kept": PLAIN}, OPEN, NOW)

    assert [c.id for c in ranked] == ["kept"]


def test_ordering_is_deterministic_with_ties_broken_by_id():
    vector = [Hit("m3", 1, 0.9), Hit("m1", 2, 0.9), Hit("m5", 3, 0.9)]
    bm25 = [Hit("m4", 1, 5.0), Hit("m2", 2, 5.0), Hit("m6", 3, 5.0)]
    memories = {f"m{i}": PLAIN for i in range(1, 7)}

    first = [c.id for c in fuse(vector, bm25, memories, OPEN, NOW)]
    shuffled = random.Random(7).sample(vector, len(vector))
    second = [c.id for c in fuse(bm25, shuffled, memories, OPEN, NOW)]

    assert first == ["m3", "m4", "m1", "m2", "m5", "m6"]
    assert second == first


def test_top_matches_skips_dropped_candidates_and_clamps_the_limit():
    settings = RetrievalSettings(vector_floor=0.85)
    vector = hits(*[(f"m{i:02}", 0.95 - i * 0.005) for i in range(30)])
    memories = {f"m{i:02}": PLAIN for i in range(30)}

    ranked = fuse(vector, [], memories, settings, NOW)

    assert [c.id for c in top_matches(ranked, 3)] == ["m00", "m01", "m02"]
    assert len(top_matches(ranked, 100)) == 20  # m00..m19 clear the floor (0.95 - 19 * 0.005 = 0.855)
    assert top_matches(ranked, 100)[-1].id == "m19"


def test_clamp_limit_defaults_to_five_and_says_when_it_clamped():
    assert clamp_limit(None) == (5, None)
    assert clamp_limit(7) == (7, None)
    value, note = clamp_limit(50)
    assert value == 20 and "50" in note and "20" in note
    value, note = clamp_limit(0)
    assert value == 1 and "0" in note and "1..20" in note


def test_unknown_tier_is_refused():
    with pytest.raises(ValueError, match="unknown tier 'hot'"):
        CandidateInfo(tier="hot")


def test_settings_round_trip_through_json():
    settings = RetrievalSettings(vector_k=30, rrf_k=20, limit=8, vector_floor=0.87, recency_half_life_days=14)

    restored = RetrievalSettings.from_dict(json.loads(json.dumps(settings.to_dict())))

    assert restored == settings


def test_settings_from_a_partial_dict_keep_the_defaults():
    settings = RetrievalSettings.from_dict({"bm25_floor": 2.5, "limit": 3.0})

    assert settings.bm25_floor == 2.5 and settings.limit == 3
    assert settings.rrf_k == 60 and settings.vector_k == 50


def test_settings_reject_unknown_knobs_by_name():
    with pytest.raises(SettingsError) as exc:
        RetrievalSettings.from_dict({"vector_flor": 0.8})

    assert "vector_flor" in exc.value.errors
    assert "not a retrieval knob" in str(exc.value)


@pytest.mark.parametrize(
    ("knob", "value", "message"),
    [
        ("limit", 50, "between 1 and 20"),
        ("rrf_k", 0, "between 1 and 1000"),
        ("vector_floor", 1.5, "between -1 and 1"),
        ("bm25_floor", -1, "between 0 and 1000"),
        ("recency_half_life_days", 0, "between 0.1 and 3650"),
        ("vector_k", 2.5, "whole number"),
        ("pinned_bonus", True, "must be a number"),
        ("importance_weight", "high", "must be a number"),
    ],
)
def test_settings_reject_bad_values_naming_the_knob(knob, value, message):
    with pytest.raises(SettingsError) as exc:
        RetrievalSettings.from_dict({knob: value})

    assert list(exc.value.errors) == [knob]
    assert message in exc.value.errors[knob][0]
    assert str(exc.value).startswith(f"{knob}: ")


def test_settings_refuse_a_rerank_strong_enough_to_outweigh_retrieval():
    with pytest.raises(SettingsError) as exc:
        RetrievalSettings(tier_core_bonus=0.25, tier_peripheral_bonus=-0.25, pinned_bonus=0.1)

    assert "pinned_bonus" in exc.value.errors["rerank"][0]


def test_settings_from_something_that_is_not_an_object_is_an_error():
    with pytest.raises(SettingsError, match="must be a JSON object"):
        RetrievalSettings.from_dict([("limit", 3)])
