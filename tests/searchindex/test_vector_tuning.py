"""Measured ef_search (searchindex/tuning.py): a scope's graph is measured against exact search with
its own vectors as queries, and given the narrowest ef_search of the ladder that reaches the target.

The vectors are HashEmbedder's: random directions with no meaning, whose true nearest neighbours
numpy computes by brute force. A graph of M 4 and ef_construction 10 misses many of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from searchindex import tuning, vector
from searchindex.vector import VectorIndex
from tests.searchindex.hashed_vectors import SCOPE, exact_top, memories, queries
from tests.searchindex.test_vector_hnsw import hnsw_settings, recorded_hnsw


@pytest.fixture(autouse=True)
def _graph_search_only(settings):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    settings.MEMORYUI_VECTOR_RECALL_TARGET = 0.97


def search_recall(index: VectorIndex, items, probes, k: int = 10) -> float:
    """recall@k of the index's own search (what a query gets) against brute force."""
    found = 0
    for query in probes:
        hits = index.search_vector(query, scopes=[SCOPE], k=k)
        found += len({hit.id for hit in hits} & set(exact_top(index, items, query, k)))
    return found / (k * len(probes))


def test_the_ladder_starts_at_the_configured_ef_search_and_stops_at_the_widest(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 300
    assert tuning.ladder() == [300, 450, 690, 1020, 1500, 2000]
    assert tuning.ladder(1500) == [1500, 2000]
    assert tuning.ladder(40)[0] == 40 and tuning.ladder(40) == sorted(set(tuning.ladder(40)))


def test_asking_the_graph_for_ef_neighbours_is_the_search_that_ef_search_ef_makes(settings, tmp_path, hashed_index):
    """What the measure and the search rely on: n results keep max(ef_search, n) candidates."""
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    # 2,000: chromadb saves the graph every 1,000 additions and adds the ones after again each
    # time it loads the collection, which may link them otherwise: the two searches below are on
    # two loads (a new ef_search reloads), so no entry may be left to add again.
    hashed_index(path=tmp_path / "chroma").upsert(memories(2000))
    probes = queries(30)
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 80
    wide = hashed_index(path=tmp_path / "chroma")
    wide_by_setting = [[pk for _, pk in wide.graph_neighbours(SCOPE, q, 10)] for q in probes]

    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH, settings.MEMORYUI_VECTOR_RECALL_TARGET = 10, None  # lowered
    narrow = hashed_index(path=tmp_path / "chroma")
    wide_by_asking = [[pk for _, pk in narrow.graph_neighbours(SCOPE, q, 80)[:10]] for q in probes]
    narrowest = [[pk for _, pk in narrow.graph_neighbours(SCOPE, q, 10)] for q in probes]

    assert recorded_hnsw({"path": tmp_path / "chroma"}, narrow)["ef_search"] == 10
    assert wide_by_setting == wide_by_asking
    assert narrowest != wide_by_asking, "ef_search 10 and 80 should differ on this graph, or this shows nothing"


def test_a_poor_graph_is_given_the_narrowest_wider_ef_search_that_reaches_the_target(
    settings, backend, hashed_index, request
):
    items = memories(3000)
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=40)
    index = hashed_index(**backend)
    index.upsert(items)
    probes = queries(40)
    before = search_recall(index, items, probes)

    measured = tuning.measure(index, SCOPE, target=0.75, samples=120)

    assert measured.vectors == 3000 and measured.samples == 120
    efs = [step.ef_search for step in measured.steps]
    assert efs == tuning.ladder()[: len(efs)] and len(efs) > 1
    assert measured.reached and measured.recall >= 0.75 and measured.ef_search == efs[-1]
    assert all(step.recall < 0.75 for step in measured.steps[:-1])  # the narrowest that reaches it
    assert measured.steps[0].recall < measured.steps[-1].recall
    assert recorded_hnsw(backend, index)["ef_search"] == measured.ef_search
    if "url" in backend:  # a chromadb server applies it when it next loads the graph
        request.getfixturevalue("chroma_server").restart()
    other = hashed_index(**backend)  # another process, or host, opening the index
    graph = other.hnsw()["collections"][SCOPE]
    assert graph["ef_search"] == measured.ef_search and graph["matches"] is True
    after = search_recall(other, items, probes)
    print(f"search recall@10: ef_search 40 {before:.3f}, {measured.ef_search} {after:.3f}")
    assert after > before + 0.1


def test_the_measured_recall_is_the_graphs_against_brute_force(settings, tmp_path, hashed_index):
    """Every vector sampled: the measure equals a leave-one-out recall worked out here by numpy."""
    items = memories(400)
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)
    stored = index.embedder.embed_passages([item.text for item in items])
    stored = stored / np.linalg.norm(stored, axis=1, keepdims=True)
    ids = [item.id for item in items]

    measured = tuning.measure(index, SCOPE, target=1.0, samples=400, apply=False)

    similarities = stored @ stored.T
    np.fill_diagonal(similarities, -np.inf)
    expected = []
    for n, pk in enumerate(ids):
        truth = {ids[j] for j in np.argsort(-similarities[n], kind="stable")[:10]}
        found = [other for _, other in index.graph_neighbours(SCOPE, stored[n], 11) if other != pk][:10]
        expected.append(len(truth & set(found)) / 10)
    assert measured.steps[0].ef_search == 10
    assert measured.steps[0].recall == pytest.approx(float(np.mean(expected)), abs=0.005)
    assert measured.steps[0].recall < 1.0
    assert recorded_hnsw({"path": tmp_path / "chroma"}, index)["ef_search"] == 10  # apply=False


def test_a_graph_that_finds_everything_keeps_the_configured_ef_search(settings, tmp_path, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(300))

    measured = tuning.measure(index, SCOPE, target=0.97, samples=50)

    assert [step.ef_search for step in measured.steps] == [100]
    assert measured.recall == 1.0 and measured.ef_search == 100 and measured.reached


def test_a_target_out_of_reach_gives_the_widest_ef_search_while_the_recall_still_grows(
    settings, tmp_path, hashed_index
):
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(3000))
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10

    measured = tuning.measure(index, SCOPE, target=1.0, samples=40)

    assert not measured.reached
    assert all(a.recall < b.recall for a, b in zip(measured.steps, measured.steps[1:], strict=False))
    assert measured.ef_search == tuning.ladder()[-1] == measured.steps[-1].ef_search


def test_a_second_measure_starts_from_the_ef_search_the_first_gave(settings, tmp_path, hashed_index):
    """A width narrower than the collection's ef_search is not measured: that would lower it for
    every search meanwhile. The ladder goes on from there."""
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=40)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(3000))
    first = tuning.measure(index, SCOPE, target=0.75, samples=60)
    assert first.ef_search > 40

    again = tuning.measure(index, SCOPE, target=0.75, samples=60)

    assert again.steps[0].ef_search == first.ef_search
    assert [step.ef_search for step in again.steps] == [e for e in tuning.ladder() if e >= first.ef_search][
        : len(again.steps)
    ]


def test_opening_the_index_keeps_a_measured_ef_search_unless_measuring_is_off(settings, backend, hashed_index):
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    index = hashed_index(**backend)
    index.upsert(memories(20))
    index.set_ef_search(SCOPE, 500)
    index.upsert(memories(5, start=100))  # a write keeps it
    index.close()

    kept = hashed_index(**backend)
    graph = kept.hnsw()["collections"][SCOPE]
    assert (graph["ef_search"], graph["matches"], graph["vectors"]) == (500, True, 25)
    kept.close()

    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 800  # the configured one is the least a scope gets
    raised = hashed_index(**backend)
    assert raised.hnsw()["collections"][SCOPE]["ef_search"] == 800
    raised.set_ef_search(SCOPE, 500)
    raised.close()

    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 100
    settings.MEMORYUI_VECTOR_RECALL_TARGET = None  # off: every collection at the configured one
    fixed = hashed_index(**backend)
    assert recorded_hnsw(backend, fixed)["ef_search"] == 500  # until the index is opened
    assert fixed.hnsw()["collections"][SCOPE]["ef_search"] == 100
    assert recorded_hnsw(backend, fixed)["ef_search"] == 100


def test_scopes_due_are_those_past_the_line_never_measured_or_grown_by_a_fifth(settings):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    counts = {"agent:small": 999, "agent:new": 1000, "agent:same": 5000, "agent:grown": 6000, "agent:shrunk": 3900}
    last = {"agent:same": 4500, "agent:grown": 5000, "agent:shrunk": 5000, "agent:small": 10}

    assert tuning.due(counts, last) == ["agent:grown", "agent:new", "agent:shrunk"]


def test_tune_measures_every_scope_past_the_line_and_nothing_when_measuring_is_off(settings, tmp_path, hashed_index):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 100
    hnsw_settings(settings, m=16, ef_construction=100, ef_search=100)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(150) + memories(99, scope="agent:small", start=1000))

    done = tuning.tune(index, samples=20)

    assert list(done) == [SCOPE] and done[SCOPE]["vectors"] == 150 and done[SCOPE]["samples"] == 20
    assert tuning.tune(index, ["agent:small"], samples=20)["agent:small"]["vectors"] == 99  # asked for by name
    settings.MEMORYUI_VECTOR_RECALL_TARGET = None
    assert tuning.tune(index) == {}


def test_a_scope_too_small_to_measure_is_left_out(settings, tmp_path, hashed_index):
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(5))

    assert tuning.measure(index, SCOPE, target=0.97) is None
    assert tuning.measure(index, "agent:nowhere", target=0.97) is None
    assert vector.CANDIDATES > tuning.K


class _ShapedGraph:
    """A scope whose graph search finds `found_at[n]` of each vector's true 10 nearest neighbours
    when asked for n: what tuning.measure reads of a VectorIndex, over a numpy matrix."""

    def __init__(self, found_at: dict[int, int], size: int = 300, ef_search: int = 10):
        rows = np.random.default_rng(5).standard_normal((size, 16)).astype(np.float32)
        self.rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        self.ids = [f"m{n}" for n in range(size)]
        self.found_at, self.ef_search = found_at, ef_search

    def graph(self, scope):
        return {"vectors": len(self.ids), "ef_search": self.ef_search}

    def vector_pages(self, scope, *, offset=0, limit=None, page=None):
        stop = len(self.ids) if limit is None else min(len(self.ids), offset + limit)
        yield self.ids[offset:stop], self.rows[offset:stop]

    def graph_neighbours(self, scope, vector, n):
        order = np.argsort(-(self.rows @ vector))
        missed = set(order[1 : 1 + 10 - self.found_at[n - 1]].tolist())  # after the vector itself
        return [(1.0 - float(self.rows[i] @ vector), self.ids[i]) for i in order if i not in missed][:n]


def test_out_of_reach_the_scope_gets_one_step_past_where_the_recall_stops_growing(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    assert tuning.ladder() == [10, 20, 30, 50, 70]
    graph = _ShapedGraph({10: 6, 20: 8, 30: 9, 50: 9, 70: 9})

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=40, apply=False)

    assert [(step.ef_search, step.recall) for step in measured.steps] == [
        (10, 0.6),
        (20, 0.8),
        (30, 0.9),
        (50, 0.9),
        (70, 0.9),
    ]
    # The measure's recall stops growing at 30; real queries gain up to a step later.
    assert not measured.reached and (measured.ef_search, measured.recall) == (50, 0.9)


def test_out_of_reach_a_recall_growing_to_the_widest_step_gets_the_widest(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    graph = _ShapedGraph({10: 5, 20: 6, 30: 7, 50: 8, 70: 9})

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=40, apply=False)

    assert not measured.reached and (measured.ef_search, measured.recall) == (70, 0.9)


def test_a_reached_target_takes_the_first_step_that_reaches_it_with_no_step_past(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    graph = _ShapedGraph({10: 6, 20: 10, 30: 10, 50: 10, 70: 10})

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=40, apply=False)

    assert measured.reached and (measured.ef_search, measured.recall) == (20, 1.0)
    assert [step.ef_search for step in measured.steps] == [10, 20]
