"""Measured ef_search (searchindex/tuning.py): a scope's graph is measured against exact search with
the queries it was asked (or, too seldom asked, its own vectors as queries), and given the narrowest
ef_search of the ladder that reaches the target.

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


def small_graph(settings, tmp_path, hashed_index):
    """400 memories in a graph too small to find all their neighbours: the index, their unit
    vectors as stored, their ids."""
    items = memories(400)
    hnsw_settings(settings, m=4, ef_construction=10, ef_search=10)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)
    stored = index.embedder.embed_passages([item.text for item in items])
    return index, stored / np.linalg.norm(stored, axis=1, keepdims=True), [item.id for item in items]


def test_the_measured_recall_is_the_graphs_against_brute_force(settings, tmp_path, hashed_index):
    """Every vector sampled: the measure equals a leave-one-out recall worked out here by numpy."""
    index, stored, ids = small_graph(settings, tmp_path, hashed_index)

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


@pytest.mark.django_db  # the queries each scope was asked are read from the store (none here)
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


class _QueryEmbedder:
    """Each text a seeded random direction in the shaped graph's 16 dimensions."""

    def embed_queries(self, texts):
        rows = np.stack([np.random.default_rng(len(t) * 7919 + sum(map(ord, t))).standard_normal(16) for t in texts])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


class _ShapedGraph:
    """A scope whose graph search finds `found_at[n]` of each vector's true 10 nearest neighbours
    when asked for n (n - 1 for one of its own vectors, which is among them): what tuning.measure
    reads of a VectorIndex, over a numpy matrix."""

    embedder = _QueryEmbedder()

    def __init__(self, found_at: dict[int, int], size: int = 300, ef_search: int = 10):
        rows = np.random.default_rng(5).standard_normal((size, 16)).astype(np.float32)
        self.rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        self.ids = [f"m{n}" for n in range(size)]
        self.found_at, self.ef_search = found_at, ef_search
        self.asked: list[int] = []

    def graph(self, scope):
        return {"vectors": len(self.ids), "ef_search": self.ef_search}

    def vector_pages(self, scope, *, offset=0, limit=None, page=None):
        stop = len(self.ids) if limit is None else min(len(self.ids), offset + limit)
        yield self.ids[offset:stop], self.rows[offset:stop]

    def graph_neighbours(self, scope, vector, n):
        self.asked.append(n)
        similarities = self.rows @ vector
        order = np.argsort(-similarities)
        own = similarities[order[0]] > 0.9999  # one of the scope's vectors: itself first
        found = self.found_at[n - 1] if own else self.found_at[n]
        missed = set(order[int(own) : int(own) + 10 - found].tolist())
        return [(1.0 - float(similarities[i]), self.ids[i]) for i in order if i not in missed][:n]


# The recall each width of _ShapedGraph({10: 6, 20: 8, 30: 9, 50: 9, 70: 9}) gives: flat from 30.
PLATEAU_STEPS = [(10, 0.6), (20, 0.8), (30, 0.9), (50, 0.9), (70, 0.9)]


def test_out_of_reach_the_scope_gets_one_step_past_where_the_recall_stops_growing(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    assert tuning.ladder() == [10, 20, 30, 50, 70]
    graph = _ShapedGraph({10: 6, 20: 8, 30: 9, 50: 9, 70: 9})

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=40, apply=False)

    assert [(step.ef_search, step.recall) for step in measured.steps] == PLATEAU_STEPS
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


QUESTIONS = [f"what did we decide about topic {n}?" for n in range(80)]


def test_asked_queries_measure_the_graph_and_take_where_their_recall_stops_growing(settings):
    """Real queries are what searches are: no step past their plateau, and no vector left out."""
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    graph = _ShapedGraph({10: 6, 20: 8, 30: 9, 50: 9, 70: 9})

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=60, apply=False, queries=QUESTIONS)

    assert measured.probes == "queries" and measured.samples == 60
    assert [(step.ef_search, step.recall) for step in measured.steps] == PLATEAU_STEPS
    assert not measured.reached and (measured.ef_search, measured.recall) == (30, 0.9)
    assert set(graph.asked) == {10, 20, 30, 50, 70}  # each width, not one more for a vector itself


def test_too_few_asked_queries_measure_with_the_scopes_own_vectors(settings):
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    graph = _ShapedGraph({10: 6, 20: 8, 30: 9, 50: 9, 70: 9})
    few = QUESTIONS[: tuning.MIN_QUERIES - 1] * 3  # repeated: distinct ones count

    measured = tuning.measure(graph, SCOPE, target=0.97, samples=300, apply=False, queries=few)

    assert measured.probes == "vectors" and measured.samples == 300  # every vector of the scope
    assert measured.ef_search == 50 and measured.recall == pytest.approx(0.9, abs=0.001)  # one step past the plateau


def test_the_measured_recall_of_asked_queries_is_the_graphs_against_brute_force(settings, tmp_path, hashed_index):
    index, stored, ids = small_graph(settings, tmp_path, hashed_index)
    texts = [f"query {n}" for n in range(60)]

    measured = tuning.measure(index, SCOPE, target=1.0, samples=400, apply=False, queries=texts)

    probes = index.embedder.embed_queries(texts)
    expected = []
    for probe in probes:
        truth = {ids[j] for j in np.argsort(-(stored @ probe), kind="stable")[:10]}
        found = [other for _, other in index.graph_neighbours(SCOPE, probe, 10)]
        expected.append(len(truth & set(found)) / 10)
    assert measured.probes == "queries" and measured.samples == 60
    assert measured.steps[0].recall == pytest.approx(float(np.mean(expected)), abs=0.005)
    assert measured.steps[0].recall < 1.0
