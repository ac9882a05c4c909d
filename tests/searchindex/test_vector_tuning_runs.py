"""Measuring vector recall as users run it: `reindex --tune`, after a rebuild, the daily task (only
the scopes due), each recorded as an index check; the ef_search it sets reaches the collection."""

from __future__ import annotations

import io
import json

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from memoryui.models import IndexCheck
from recall.models import RecallTrace
from searchindex import health, tuning
from searchindex import indexes as search_indexes
from searchindex.tasks import tune_vector_search

pytestmark = pytest.mark.django_db

TOPICS = ["deploys", "backups", "the cafeteria", "code review", "on-call", "the VPN", "holidays", "laptops"]


@pytest.fixture
def store(indexes, settings, make_memory, django_capture_on_commit_callbacks):
    """24 memories in agent:main and 3 in agent:small; every scope of 12 vectors or more is measured."""
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 12
    settings.MEMORYUI_VECTOR_RECALL_TARGET = 0.97
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(24):
            make_memory(f"Note {n} about {TOPICS[n % len(TOPICS)]}: rule number {n * 7}.", kind="fact")
        for n in range(3):
            make_memory(f"Small scope note {n}.", kind="fact", scope="agent:small")


def test_reindex_tune_measures_each_big_scope_and_records_the_check(store):
    out = io.StringIO()
    call_command("reindex", "--tune", stdout=out)

    text = out.getvalue()
    assert text.startswith("agent:main: 24 vectors, 24 of its own vectors as queries; recall@10 ef ")
    assert f"ef_search {django_settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH} (target 0.97 reached)" in text
    assert "agent:small" not in text
    check = IndexCheck.objects.get(action="tune")
    assert check.ok is True and check.actor == "cli:reindex" and list(check.result["tuned"]) == ["agent:main"]
    assert check.result["tuned"]["agent:main"]["recall"] == 1.0  # 24 vectors: the graph finds them all
    assert health.summary(check) == (
        f"agent:main: ef_search {django_settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH}, recall@10 1.000"
    )


def test_reindex_tune_takes_a_scope_by_name_whatever_its_size_and_prints_json(store, settings):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 100  # every scope is searched exactly: none is due
    out = io.StringIO()
    call_command("reindex", "--tune", stdout=out)
    assert out.getvalue().startswith("no scope is big enough to measure")

    out = io.StringIO()
    call_command("reindex", "--tune", "--scope", "agent:main", "--json", stdout=out)

    measured = json.loads(out.getvalue())["tuned"]["agent:main"]
    assert (measured["vectors"], measured["samples"], measured["reached"]) == (24, 24, True)


def test_reindex_tune_refuses_what_does_not_go_with_it(store, settings):
    with pytest.raises(CommandError, match="--scope goes with --tune"):
        call_command("reindex", "--scope", "agent:main")
    with pytest.raises(CommandError, match="without --verify, --full or --tune"):
        call_command("reindex", "--tune", "--background")
    settings.MEMORYUI_VECTOR_RECALL_TARGET = None
    with pytest.raises(CommandError, match="MEMORYUI_VECTOR_RECALL_TARGET is off"):
        call_command("reindex", "--tune")
    assert not IndexCheck.objects.filter(action="tune").exists()


def test_a_rebuild_measures_the_scopes_it_rebuilt(store):
    check = health.run("rebuild", actor="test")

    assert check.result["rebuilt"]["vector"] == 27
    assert list(check.result["tuned"]) == ["agent:main"]
    assert health.summary(check).endswith(
        f"agent:main: ef_search {django_settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH}, recall@10 1.000"
    )
    assert health.last_tuned()["agent:main"]["at"] == check.finished_at


def test_the_daily_task_measures_only_the_scopes_due(store, make_memory, django_capture_on_commit_callbacks):
    first = tune_vector_search(actor="beat")
    assert list(first["tuned"]) == ["agent:main"]

    assert tune_vector_search(actor="beat") == {}  # nothing grew: no check recorded
    assert IndexCheck.objects.filter(action="tune").count() == 1

    with django_capture_on_commit_callbacks(execute=True):  # 24 -> 29: grown by more than a fifth
        for n in range(5):
            make_memory(f"Later note {n} about printers.", kind="fact")
    again = tune_vector_search(actor="beat")
    assert again["tuned"]["agent:main"]["vectors"] == 29
    assert IndexCheck.objects.filter(action="tune").count() == 2
    assert "tune-vector-search" in django_settings.CELERY_BEAT_SCHEDULE


def test_a_target_out_of_reach_gives_a_step_past_where_the_recall_stops_growing_and_says_so(
    store, settings, monkeypatch
):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH, settings.MEMORYUI_VECTOR_RECALL_TARGET = 10, None
    search_indexes.close_indexes()
    search_indexes.get_index("vector").count()  # opened with measuring off: the collection gets ef_search 10
    settings.MEMORYUI_VECTOR_RECALL_TARGET = 0.97
    monkeypatch.setattr(tuning, "_recall", lambda top, best, kth: 0.5)  # a graph whose recall never grows

    check = health.run("tune", actor="test", scopes=["agent:main"])

    measured = check.result["tuned"]["agent:main"]
    assert check.ok is False and measured["reached"] is False
    assert [step["ef_search"] for step in measured["steps"]] == tuning.ladder()  # every width tried
    # Flat from the narrowest on: the step past it.
    assert measured["ef_search"] == tuning.ladder()[1] == 20 and measured["recall"] == 0.5
    graph = search_indexes.get_index("vector").hnsw()["collections"]["agent:main"]
    assert graph["ef_search"] == 20 and graph["matches"] is True
    assert health.summary(check) == "agent:main: ef_search 20, recall@10 0.500 (below the target 0.97)"

    out = io.StringIO()
    call_command("reindex", "--tune", "--scope", "agent:main", stdout=out)
    # Again from 20, flat: the step past it.
    assert "ef_search 30 (target 0.97 not reached; one step past where the recall stops growing)" in out.getvalue()


def test_a_scope_asked_enough_queries_is_measured_with_them(store):
    for n in range(tuning.MIN_QUERIES):
        RecallTrace.objects.create(
            source="mcp", actor="token:agent", scope="agent:main", query=f"what about {TOPICS[n % 8]}, case {n}?",
            limit=5, profile_name="default", mode="heuristic", knobs={}, result={},
        )  # fmt: skip
    out = io.StringIO()
    call_command("reindex", "--tune", "--json", stdout=out)

    measured = json.loads(out.getvalue())["tuned"]["agent:main"]
    assert (measured["probes"], measured["samples"], measured["vectors"]) == ("queries", tuning.MIN_QUERIES, 24)
    assert measured["recall"] == 1.0  # 24 vectors: the graph finds them all
    out = io.StringIO()
    call_command("reindex", "--tune", "--scope", "agent:main", stdout=out)
    assert out.getvalue().startswith(
        f"agent:main: 24 vectors, {tuning.MIN_QUERIES} queries it was asked; recall@10 ef "
    )
