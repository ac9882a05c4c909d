"""The vector index's HNSW graphs: the settings shape each new collection, ef_search reaches live
collections (embedded and on a chromadb server), a graph of another shape asks for a rebuild, bad
values stop the start, and a search asks for more candidates than k and keeps the exact best k.

The vectors are HashEmbedder's: random directions with no meaning, whose true nearest neighbours
numpy computes by brute force. What chromadb recorded is read back with a client of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from searchindex import indexes as search_indexes
from searchindex import vector
from searchindex.vector import VectorIndex
from tests.searchindex.hashed_vectors import SCOPE, exact_top, memories, queries

ROOT = Path(__file__).resolve().parents[2]


def hnsw_settings(settings, m: int, ef_construction: int, ef_search: int) -> None:
    settings.MEMORYUI_CHROMA_HNSW_M = m
    settings.MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION = ef_construction
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = ef_search


@pytest.fixture(autouse=True)
def _graph_search_only(settings):
    """These tests are about the HNSW graphs: no scope is searched exactly (test_vector_exact.py),
    and every scope gets the configured graph whatever its size (test_vector_graph_shape.py)."""
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    settings.MEMORYUI_CHROMA_HNSW_BIG_FROM = 0


def recorded_collection(where: dict, index: VectorIndex, scope: str = SCOPE):
    """The scope's collection as chromadb keeps it, read by a client of our own."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if "url" in where:
        host, port = where["url"].removeprefix("http://").split(":")
        client = chromadb.HttpClient(host=host, port=int(port), settings=chroma_settings)
    else:
        client = chromadb.PersistentClient(path=str(where["path"]), settings=chroma_settings)
    return client.get_collection(index.scope_collection_name(scope), embedding_function=None)


def recorded_hnsw(where: dict, index: VectorIndex, scope: str = SCOPE) -> dict:
    """The HNSW configuration chromadb keeps for the scope's collection."""
    return recorded_collection(where, index, scope).configuration_json["hnsw"]


def test_a_new_collection_is_built_with_the_configured_hnsw_settings(settings, backend, hashed_index):
    hnsw_settings(settings, m=24, ef_construction=120, ef_search=80)
    index = hashed_index(**backend)
    index.upsert(memories(3))

    recorded = recorded_hnsw(backend, index)

    assert (recorded["max_neighbors"], recorded["ef_construction"], recorded["ef_search"]) == (24, 120, 80)
    assert recorded["space"] == "cosine"
    assert index.hnsw()["matches"] is True and index.hnsw()["rebuild_needed"] == ""


def test_a_changed_ef_search_is_set_on_the_live_collection_when_the_index_is_opened(settings, backend, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    built = hashed_index(**backend)
    built.upsert(memories(5))
    built.close()

    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 250
    index = hashed_index(**backend)
    hits = index.search("memory number 2", scopes=[SCOPE], k=1)

    assert [hit.id for hit in hits] == [memories(5)[2].id]
    assert recorded_hnsw(backend, index)["ef_search"] == 250
    graph = index.hnsw()["collections"][SCOPE]
    assert (graph["ef_search"], graph["max_neighbors"], graph["matches"]) == (250, 16, True)


def test_the_embedded_index_searches_with_a_new_ef_search_in_the_same_process(
    settings, tmp_path, hashed_index, monkeypatch
):
    """chromadb keeps a loaded graph's ef_search for the life of the process: the index reloads it."""
    monkeypatch.setattr(vector, "CANDIDATES", 1)  # k alone: the graph's ef_search decides the search
    items = memories(1500)
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    narrow = hashed_index(path=tmp_path / "chroma")
    narrow.upsert(items)
    probes = queries(40)

    def recall(index: VectorIndex) -> float:
        found = 0
        for query in probes:
            hits = index.search_vector(query, scopes=[SCOPE], k=10)
            found += len({hit.id for hit in hits} & set(exact_top(index, items, query, 10)))
        return found / (10 * len(probes))

    before = recall(narrow)
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 1500
    wide = hashed_index(path=tmp_path / "chroma")  # same directory, same process, graph already loaded

    after, other_handle = recall(wide), recall(narrow)
    print(f"recall@10 with ef_search 10: {before:.3f}, 1500: {after:.3f}, {other_handle:.3f}")
    assert before < 0.9, "the narrow graph should miss neighbours, or this test shows nothing"
    assert after >= 0.98 and other_handle >= 0.98  # the other handle of this process reloaded too


def test_a_graph_built_with_other_m_and_ef_construction_asks_for_a_rebuild(settings, tmp_path, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    old = hashed_index(path=tmp_path / "chroma")
    old.upsert(memories(4) + memories(2, scope="agent:ops", start=10))
    old.close()

    hnsw_settings(settings, m=32, ef_construction=200, ef_search=100)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(1, scope="agent:new", start=20))  # a new scope gets the new shape
    info = index.info()

    assert info["hnsw"]["matches"] is False
    assert info["hnsw"]["rebuild_needed"] == (
        "built with M=16, ef_construction=100 (2 of 3 scopes); settings say M=32, ef_construction=200: rebuild to apply"
    )
    graphs = info["hnsw"]["collections"]
    assert graphs[SCOPE]["max_neighbors"] == 16 and graphs[SCOPE]["matches"] is False
    assert graphs["agent:new"]["max_neighbors"] == 32 and graphs["agent:new"]["matches"] is True
    assert info["hnsw"]["configured"]["max_neighbors"] == 32 and info["scopes"] == 3

    index.reset()  # what `reindex --full` does first
    index.upsert(memories(4))
    assert (
        index.info()["hnsw"]["rebuild_needed"] == ""
        and recorded_hnsw({"path": tmp_path / "chroma"}, index)["max_neighbors"] == 32
    )


def test_every_collection_built_the_old_way_is_named_without_a_count(settings, tmp_path, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    hashed_index(path=tmp_path / "chroma").upsert(memories(2))
    hnsw_settings(settings, m=48, ef_construction=400, ef_search=100)

    assert hashed_index(path=tmp_path / "chroma").hnsw()["rebuild_needed"] == (
        "built with M=16, ef_construction=100; settings say M=48, ef_construction=400: rebuild to apply"
    )


def test_a_search_asks_for_more_candidates_than_k_and_keeps_the_exact_top_k(settings, tmp_path, hashed_index):
    """A poor graph (M=4, ef 10) holding fewer memories than CANDIDATES: asked for k alone, chromadb
    misses neighbours; asked for CANDIDATES, it looks at every node, so the top k is exact."""
    assert vector.CANDIDATES >= 40
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    items = memories(40)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)
    probes = queries(60)
    collection = index._load_collections()[SCOPE]

    missed_by_k_alone = 0
    for query in probes:
        exact = exact_top(index, items, query, 5)
        alone = collection.query(query_embeddings=[query], n_results=5, include=["distances"])["ids"][0]
        missed_by_k_alone += alone != exact
        assert [hit.id for hit in index.search_vector(query, scopes=[SCOPE], k=5)] == exact

    assert missed_by_k_alone > 0, "the graph should miss neighbours when asked for k alone"


def test_a_search_over_several_scopes_keeps_the_best_k_of_all(settings, tmp_path, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    items = memories(30) + memories(30, scope="agent:ops", start=100)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)

    for query in queries(10, seed=5):
        hits = index.search_vector(query, scopes=None, k=8)
        assert [hit.id for hit in hits] == exact_top(index, items, query, 8)
        assert [hit.rank for hit in hits] == list(range(1, 9))


@pytest.mark.django_db
def test_the_dashboard_shows_the_hnsw_settings_and_asks_for_a_rebuild_when_the_graph_differs(
    indexes, settings, write, alice_client
):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 5000
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    write("Deploys go out on Fridays.", kind="procedure")
    hnsw_settings(settings, m=32, ef_construction=200, ef_search=120)
    search_indexes.close_indexes()

    html = alice_client.get("/", headers={"HX-Request": "true", "HX-Target": "index-health"}).content.decode()

    row = html.split('data-index="vector"')[1].split("</tr>")[0]
    assert f"HNSW M=32, ef_construction=200, ef_search=120, {vector.CANDIDATES} candidates" in row
    assert "built with M=16, ef_construction=100; settings say M=32, ef_construction=200: rebuild to apply" in row
    assert "exact search below 5000 vectors a scope (" in row

    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    html = alice_client.get("/", headers={"HX-Request": "true", "HX-Target": "index-health"}).content.decode()
    assert "exact search off" in html.split('data-index="vector"')[1].split("</tr>")[0]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMORYUI_CHROMA_HNSW_M", "abc"),
        ("MEMORYUI_CHROMA_HNSW_M", "2"),
        ("MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION", "5000"),
        ("MEMORYUI_CHROMA_HNSW_EF_SEARCH", "0"),
    ],
)
def test_an_hnsw_setting_out_of_range_stops_the_start_naming_the_variable(name, value, tmp_path):
    check = settings_in_subprocess(tmp_path, {name: value}, "import config.settings")
    assert check.returncode != 0
    assert "ImproperlyConfigured" in check.stderr and f"{name}={value!r}" in check.stderr
    assert "a whole number from" in check.stderr


def test_hnsw_settings_come_from_the_environment_with_defaults(settings, tmp_path):
    show = (
        "from config import settings as s; "
        "print(s.MEMORYUI_CHROMA_HNSW_M, s.MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION, s.MEMORYUI_CHROMA_HNSW_EF_SEARCH)"
    )
    given = settings_in_subprocess(tmp_path, {"MEMORYUI_CHROMA_HNSW_M": " 48 "}, show)
    default = settings_in_subprocess(tmp_path, {}, show)

    defaults = [
        str(settings.CHROMA_HNSW_DEFAULT_M),
        str(settings.CHROMA_HNSW_DEFAULT_EF_CONSTRUCTION),
        str(settings.CHROMA_HNSW_DEFAULT_EF_SEARCH),
    ]
    assert given.returncode == 0, given.stderr
    assert given.stdout.split() == ["48", *defaults[1:]]
    assert default.stdout.split() == defaults


def settings_in_subprocess(tmp_path: Path, env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    """Settings are read once per process: load them in one with exactly this environment."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_CHROMA_HNSW_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**inherited, "MEMORYUI_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
