"""A scope's HNSW graph is shaped for its size: the configured M and ef_construction from
MEMORYUI_CHROMA_HNSW_BIG_FROM vectors on, chromadb's light 16/100 below; the size is the one the
scope is about to hold when its collection is created (the database's count for a rebuild or an
import), and a scope that outgrew a light graph asks for a rebuild, on the dashboard too.

What chromadb recorded is read back with a client of its own (test_vector_hnsw.py).
"""

from __future__ import annotations

import pytest

from memoryui.models import Memory
from searchindex import health
from searchindex import indexes as search_indexes
from searchindex.vector import SMALL_GRAPH, graph_shape
from tests.searchindex.hashed_vectors import SCOPE, memories
from tests.searchindex.test_vector_hnsw import hnsw_settings, recorded_hnsw


@pytest.fixture(autouse=True)
def _big_from_thirty(settings):
    """A big scope is one of 30 vectors or more; no scope is searched exactly."""
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    settings.MEMORYUI_CHROMA_HNSW_BIG_FROM = 30
    hnsw_settings(settings, m=32, ef_construction=200, ef_search=100)


def shape(recorded: dict) -> tuple[int, int]:
    return recorded["max_neighbors"], recorded["ef_construction"]


def test_the_configured_graph_is_a_big_scopes_and_the_small_one_never_exceeds_it(settings):
    assert graph_shape(29) == SMALL_GRAPH == {"max_neighbors": 16, "ef_construction": 100}
    assert graph_shape(30) == graph_shape(10**6) == {"max_neighbors": 32, "ef_construction": 200}

    hnsw_settings(settings, m=8, ef_construction=150, ef_search=100)
    assert graph_shape(5) == {"max_neighbors": 8, "ef_construction": 100}  # the smaller of each

    settings.MEMORYUI_CHROMA_HNSW_BIG_FROM = 0  # every scope big, whatever its size
    assert graph_shape(0) == {"max_neighbors": 8, "ef_construction": 150}


def test_a_scope_is_shaped_for_the_size_it_is_about_to_hold_when_its_collection_is_created(backend, hashed_index):
    index = hashed_index(**backend)
    asked = []

    def sizes(scopes):
        asked.append(sorted(scopes))
        return {"agent:big": 5000}  # the database holds 5,000 of agent:big's memories: big

    index.upsert(memories(3, scope="agent:big") + memories(3, scope="agent:small", start=10), sizes=sizes)
    index.upsert(memories(40, scope="agent:small", start=20), sizes=sizes)  # no collection created

    assert asked == [["agent:big", "agent:small"]], "sizes is asked only for the collections a write creates"
    assert shape(recorded_hnsw(backend, index, "agent:big")) == (32, 200)
    assert shape(recorded_hnsw(backend, index, "agent:small")) == (16, 100)
    # Without `sizes`, the write's own memories count: 30 of a new scope make it big.
    index.upsert(memories(30, scope="agent:bulk", start=100))
    assert shape(recorded_hnsw(backend, index, "agent:bulk")) == (32, 200)
    recorded = recorded_hnsw(backend, index, "agent:small")
    assert recorded["ef_search"] == 100 and recorded["space"] == "cosine"


def test_a_scope_that_outgrew_its_small_graph_asks_for_a_rebuild_and_one_that_shrank_keeps_its_big_one(
    tmp_path, hashed_index
):
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(5))  # agent:main starts small
    index.upsert(memories(35, scope="agent:ops", start=100))  # agent:ops starts big
    assert index.hnsw()["rebuild_needed"] == "" and index.hnsw()["matches"] is True

    index.upsert(memories(40, start=5))  # agent:main now holds 45 vectors in its small graph
    index.delete([item.id for item in memories(20, scope="agent:ops", start=100)])  # agent:ops: 15
    hnsw = index.hnsw()

    assert hnsw["rebuild_needed"] == (
        "built with M=16, ef_construction=100 (1 of 2 scopes); settings say M=32, ef_construction=200 "
        "for a scope of 30 vectors or more: rebuild to apply"
    )
    graphs = hnsw["collections"]
    assert (graphs[SCOPE]["vectors"], graphs[SCOPE]["shaped"], graphs[SCOPE]["matches"]) == (45, False, False)
    assert (graphs["agent:ops"]["vectors"], graphs["agent:ops"]["shaped"]) == (15, True)
    assert hnsw["configured"]["big_from"] == 30 and hnsw["configured"]["small"] == SMALL_GRAPH

    index.reset()  # what a rebuild does first, then every scope shaped for its size again
    index.upsert(memories(45))
    assert index.hnsw()["rebuild_needed"] == "" and shape(recorded_hnsw({"path": tmp_path / "chroma"}, index)) == (
        32,
        200,
    )


@pytest.mark.django_db
def test_a_rebuild_shapes_each_scope_for_its_memories_in_the_database(indexes, settings, make_memory, monkeypatch):
    monkeypatch.setattr(health, "REBUILD_CHUNK", 10)  # agent:main's first chunk holds 10 of its 31
    for n in range(31):
        make_memory(f"Build step {n} of the release runs on host build-{n:02d}.", kind="procedure", semantic=False)
    for n in range(4):
        make_memory(f"The ops agent {n} pages the on-call engineer.", kind="fact", scope="agent:ops", semantic=False)
    assert Memory.objects.active().filter(scope="agent:main").count() == 31

    assert health.rebuild() == {"vector": 35, "bm25": 35}

    index = search_indexes.get_index("vector")
    where = {"path": index.path}
    assert shape(recorded_hnsw(where, index, "agent:main")) == (32, 200)
    assert shape(recorded_hnsw(where, index, "agent:ops")) == (16, 100)
    assert index.counts() == {"agent:main": 31, "agent:ops": 4}


@pytest.mark.django_db
def test_the_dashboard_says_which_scopes_get_the_big_graph_and_which_outgrew_a_small_one(
    indexes, settings, write, alice_client
):
    settings.MEMORYUI_CHROMA_HNSW_BIG_FROM = 2
    write("Deploys go out on Fridays.", kind="procedure")
    write("Rollbacks need the release manager.", kind="procedure")  # agent:main: 2 in a small graph
    search_indexes.close_indexes()

    html = alice_client.get("/", headers={"HX-Request": "true", "HX-Target": "index-health"}).content.decode()

    row = html.split('data-index="vector"')[1].split("</tr>")[0]
    assert "HNSW M=32, ef_construction=200 from 2 vectors a scope (M=16, ef_construction=100 below)" in row
    assert "settings say M=32, ef_construction=200 for a scope of 2 vectors or more: rebuild to apply" in row
    graph = html.split('data-graph="agent:main"')[1].split("</tr>")[0]
    assert "M=16, ef_construction=100" in graph and "built for a smaller scope" in graph
