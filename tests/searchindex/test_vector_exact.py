"""Exact vector search of small scopes: a scope below MEMORYUI_VECTOR_EXACT_BELOW vectors is
searched by brute force over its matrix, read in the background, and never under a write mark the
collection no longer bears: writes by this process patch the matrix, any other writer's (another
process, another host of a chromadb server) make it stale until it is read again.

The vectors are HashEmbedder's (random directions), whose true neighbours numpy computes.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from searchindex import exact, vector
from searchindex.documents import IndexedMemory
from searchindex.exact import EXACT, ExactScopes, Matrix
from searchindex.vector import VectorIndex
from tests.searchindex.hashed_vectors import DIM, SCOPE, exact_top, memories, queries

ROOT = Path(__file__).resolve().parents[2]


def searched(index: VectorIndex, query, k: int = 10, scopes=(SCOPE,)) -> tuple[list[str], dict[str, str]]:
    methods: dict[str, str] = {}
    if isinstance(query, str):
        query = index.embedder.embed_query(query)
    hits = index.search_vector(query, scopes=list(scopes), k=k, methods=methods)
    return [hit.id for hit in hits], methods


def test_a_small_scope_is_searched_exactly_where_a_thin_graph_misses(settings, hashed_index, tmp_path, monkeypatch):
    settings.MEMORYUI_CHROMA_HNSW_M = 4
    settings.MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION = 10
    settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH = 10
    monkeypatch.setattr(vector, "CANDIDATES", 10)
    items = memories(3000)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)
    asked = queries(30, seed=5)

    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    by_graph = [searched(index, q)[0] for q in asked]
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 5000
    assert index.warm([SCOPE]) == {SCOPE: "exact"}
    by_matrix = [searched(index, q) for q in asked]

    expected = [exact_top(index, items, q, 10) for q in asked]
    assert by_graph != expected  # the thin graph misses true neighbours: what exact search is for
    assert [ids for ids, _ in by_matrix] == expected
    assert {method for _, methods in by_matrix for method in methods.values()} == {"exact"}


def test_the_first_search_uses_the_graph_and_the_matrix_is_read_for_the_next(settings, backend, hashed_index):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    items = memories(60)
    index = hashed_index(**backend)
    index.upsert(items)
    query = index.embedder.embed_query("memory number 7")

    first, first_methods = searched(index, query)
    assert EXACT.wait()
    second, second_methods = searched(index, query)

    assert first_methods == {SCOPE: "hnsw"} and second_methods == {SCOPE: "exact"}
    assert first == second == exact_top(index, items, query, 10)
    hits = index.search_vector(query, scopes=[SCOPE], k=3)
    assert hits[0].id == items[7].id and hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_a_scope_at_the_line_or_above_is_searched_by_its_graph_until_it_falls_below(
    settings, backend, hashed_index, monkeypatch
):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 40
    monkeypatch.setattr(exact, "MIN_GAP", 0.0)  # counted a moment ago: no pause before counting again
    monkeypatch.setattr(exact, "RELOAD_FACTOR", 0)
    items = memories(40)
    index = hashed_index(**backend)
    index.upsert(items)
    assert index.warm([SCOPE]) == {SCOPE: "hnsw"}
    assert searched(index, "memory number 3")[1] == {SCOPE: "hnsw"}

    index.delete([items[0].id], scopes={items[0].id: SCOPE})
    searched(index, "memory number 3")  # the mark changed: the scope is counted again
    assert EXACT.wait()
    ids, methods = searched(index, "memory number 3")
    assert methods == {SCOPE: "exact"} and ids[0] == items[3].id and items[0].id not in ids


def test_this_processs_writes_keep_its_matrix_current(settings, hashed_index, tmp_path):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    items = memories(30)
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(items)
    index.warm([SCOPE])

    added = memories(1, start=500)[0]
    index.upsert([added])
    ids, methods = searched(index, added.text)
    assert methods == {SCOPE: "exact"} and ids[0] == added.id

    changed = IndexedMemory(**{**items[4].__dict__, "text": "a changed text", "content_hash": "h-changed"})
    index.upsert([changed])
    ids, methods = searched(index, "a changed text", k=1)
    assert methods == {SCOPE: "exact"} and ids == [changed.id]
    assert (
        index.similarities(index.embedder.embed_query("memory number 4"), [changed.id], scopes=[SCOPE])[changed.id]
        < 0.99
    )

    index.delete([added.id, items[5].id], scopes={added.id: SCOPE, items[5].id: SCOPE})
    ids, methods = searched(index, added.text, k=40)
    assert methods == {SCOPE: "exact"} and added.id not in ids and items[5].id not in ids and len(ids) == 29
    # What the matrix holds is what chromadb holds.
    held = index.stored_vectors([item.id for item in items], scopes=[SCOPE])
    stored = index.vectors(SCOPE)
    assert held.keys() == stored.keys()
    assert all(np.allclose(held[pk], stored[pk], atol=1e-6) for pk in held)


def in_another_process(code: str, *args: str) -> str:
    """Run `code` in a Python process of its own; what it printed (it must exit with 0)."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


# Runs in another process: upsert one memory into the index at argv[1] (a path or a server URL).
OTHER_WRITER = """
import sys
from searchindex.documents import IndexedMemory
from searchindex.vector import VectorIndex
from tests.fakes import HashEmbedder
where = {"url": sys.argv[1]} if sys.argv[1].startswith("http") else {"path": sys.argv[1]}
index = VectorIndex(embedder=HashEmbedder(dim=int(sys.argv[2])), **where)
index.upsert([IndexedMemory(id=sys.argv[3], scope="agent:main", kind="fact", tier="working", pinned=False,
                            text=sys.argv[4], content_hash="h-" + sys.argv[3])])
index.close()
"""


def test_a_write_by_another_process_or_host_is_found_at_once(settings, backend, hashed_index, monkeypatch):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    monkeypatch.setattr(exact, "MIN_GAP", 0.0)  # read a moment ago: no pause before reading again
    monkeypatch.setattr(exact, "RELOAD_FACTOR", 0)
    items = memories(30)
    index = hashed_index(**backend)
    index.upsert(items)
    assert index.warm([SCOPE]) == {SCOPE: "exact"}
    where = backend.get("url") or str(backend["path"])
    newcomer = memories(1, start=900, word="newcomer")[0]

    in_another_process(OTHER_WRITER, where, str(DIM), newcomer.id, newcomer.text)

    ids, methods = searched(index, newcomer.text)
    assert methods == {SCOPE: "hnsw"} and ids[0] == newcomer.id  # the matrix is stale: not used
    assert EXACT.wait()
    ids, methods = searched(index, newcomer.text)
    assert methods == {SCOPE: "exact"} and ids[0] == newcomer.id


# Runs in another process: one search of the index at argv[1], then exit at once, while the
# background thread reads the scope's matrix.
SEARCH_AND_EXIT = """
import sys
from searchindex.vector import VectorIndex
from tests.fakes import HashEmbedder
index = VectorIndex(path=sys.argv[1], embedder=HashEmbedder(dim=int(sys.argv[2])))
print(index.search("memory number 5", scopes=["agent:main"], k=1)[0].id)
"""


def test_a_process_that_exits_while_its_matrix_is_being_read_exits_cleanly(settings, hashed_index, tmp_path):
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(4000))
    index.close()

    for _ in range(3):
        printed = in_another_process(SEARCH_AND_EXIT, str(tmp_path / "chroma"), str(DIM))
        assert printed.split() == [memories(1, start=5)[0].id]


def test_a_reset_drops_the_matrices_of_the_index(settings, hashed_index, tmp_path):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(10))
    index.warm()
    assert EXACT.held()["scopes"] == 1

    index.reset()

    assert EXACT.held()["scopes"] == 0
    assert searched(index, "memory number 1") == ([], {})


def test_exact_search_off_searches_every_scope_by_its_graph(settings, hashed_index, tmp_path):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    index = hashed_index(path=tmp_path / "chroma")
    index.upsert(memories(10) + memories(5, scope="agent:other", start=100))
    assert index.warm() == {SCOPE: "hnsw", "agent:other": "hnsw"}
    ids, methods = searched(index, "memory number 101", scopes=(SCOPE, "agent:other"))
    assert methods == {SCOPE: "hnsw", "agent:other": "hnsw"} and ids[0] == memories(1, start=101)[0].id
    assert EXACT.wait() and EXACT.held()["scopes"] == 0


# --- the matrices themselves -------------------------------------------------------------------


def unit_rows(count: int, seed: int = 1, dim: int = DIM) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_patched_matrix_replaces_appends_and_removes_rows_without_touching_the_old_one():
    rows = unit_rows(4)
    matrix = Matrix.build("m1", {str(n): rows[n] for n in range(4)}, DIM)
    fresh = unit_rows(2, seed=9)

    patched = matrix.patched("m2", ["1", "9"], fresh, ["0"])

    assert patched.mark == "m2" and patched.ids == ("1", "2", "3", "9")
    assert np.allclose(patched.stored(["1", "9"])["1"], fresh[0]) and np.allclose(patched.stored(["9"])["9"], fresh[1])
    assert np.allclose(patched.stored(["2"])["2"], rows[2])
    assert matrix.ids == ("0", "1", "2", "3") and np.allclose(matrix.stored(["1"])["1"], rows[1])
    distance, nearest = patched.nearest(fresh[1], 1)[0]
    assert nearest == "9" and distance == pytest.approx(0.0, abs=1e-6)


def test_the_nearest_rows_are_exact_and_ties_are_ordered_by_id():
    rows = unit_rows(200, seed=4)
    found = {f"{n:03d}": rows[n] for n in range(200)}
    found["dup"] = rows[17]
    matrix = Matrix.build(None, found, DIM)
    query = unit_rows(1, seed=8)[0] * 3.0  # not unit length: cosine all the same

    nearest = matrix.nearest(query, 5)

    expected = np.argsort(-(rows @ (query / 3.0)))[:5]
    assert [pk for _, pk in nearest if pk != "dup"][:4] == [f"{n:03d}" for n in expected][:4]
    if 17 in expected:
        at = [pk for _, pk in nearest].index("017")
        assert [pk for _, pk in nearest][at + 1] == "dup"


def test_matrices_beyond_the_memory_allowed_are_dropped_least_recently_used_first(settings):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 10_000
    settings.MEMORYUI_VECTOR_EXACT_MB = 1  # 8,192 vectors of 32 float32
    scopes = ExactScopes()

    def reader(mark):
        return lambda: (mark, Matrix.build(mark, {str(n): v for n, v in enumerate(unit_rows(3000))}, DIM))

    for key in ("a", "b"):
        scopes.read_now(key, reader(key))
    assert scopes.get("a", "a") is not None  # "a" used last: "b" is the least recent now
    scopes.read_now("c", reader("c"))

    assert scopes.get("b", "b") is None and scopes.get("a", "a") is not None and scopes.get("c", "c") is not None
    assert scopes.held() == {"scopes": 2, "vectors": 6000, "mb": 0.7}


def test_a_scope_is_read_again_only_after_a_pause_and_a_failed_read_is_retried_later(settings, monkeypatch, caplog):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 10_000
    scopes = ExactScopes()
    reads = []

    def read():
        reads.append(1)
        return "m1", Matrix.build("m1", {"x": unit_rows(1)[0]}, DIM)

    scopes.request("k", "m1", read)
    assert scopes.wait(10) and scopes.get("k", "m1") is not None
    scopes.request("k", "m2", read)  # written since, but read a moment ago: HNSW until the pause ends
    assert scopes.wait(10) and len(reads) == 1
    monkeypatch.setattr(exact.time, "monotonic", lambda: 10**9)
    scopes.request("k", "m2", read)
    assert scopes.wait(10) and len(reads) == 2

    def broken():
        raise OSError("disk gone")

    with caplog.at_level(logging.WARNING, logger="searchindex.exact"):
        scopes.read_now("bad", broken)
    assert "could not read" in caplog.text
    scopes.request("bad", None, read)
    assert scopes.wait(10) and len(reads) == 2  # retried only after FAILED_GAP


def test_a_scope_counted_above_the_line_is_not_counted_again_until_written():
    scopes = ExactScopes()
    counts = []

    def too_big():
        counts.append(1)
        return "m1", None

    scopes.read_now("k", too_big)
    scopes._not_before.clear()  # no pause: only the mark decides here
    scopes.request("k", "m1", too_big)
    assert scopes.wait(10) and counts == [1]
    scopes.request("k", "m2", too_big)
    assert scopes.wait(10) and counts == [1, 1]


def test_a_write_leaves_the_matrix_a_search_already_holds_untouched(settings, hashed_index, tmp_path):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    index = hashed_index(path=tmp_path / "chroma")
    items = memories(50)
    index.upsert(items)
    index.warm([SCOPE])
    collection = index._load_collections()[SCOPE]
    held = EXACT.get(index._exact_key(collection), index._mark(collection))
    before = held.vectors.copy()

    index.upsert(memories(5, start=50))

    assert np.array_equal(held.vectors, before) and len(held.ids) == 50  # the old matrix is untouched
    assert searched(index, "memory number 52", k=1) == ([memories(1, start=52)[0].id], {SCOPE: "exact"})


def test_a_scope_known_to_be_big_is_searched_by_its_graph_without_asking_for_its_mark(
    settings, backend, hashed_index, monkeypatch
):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 20
    index = hashed_index(**backend)
    index.upsert(memories(30) + memories(5, scope="agent:small", start=100))
    assert index.warm() == {SCOPE: "hnsw", "agent:small": "exact"}
    asked: list[set[str]] = []
    current_marks = index._current_marks
    monkeypatch.setattr(index, "_current_marks", lambda wanted: asked.append(set(wanted)) or current_marks(wanted))

    ids, methods = searched(index, "memory number 101", scopes=(SCOPE, "agent:small"))

    assert methods == {SCOPE: "hnsw", "agent:small": "exact"} and ids[0] == memories(1, start=101)[0].id
    assert asked == [{"agent:small"}]
    monkeypatch.setattr(exact.time, "monotonic", lambda: 10**9)  # long after it was counted
    searched(index, "memory number 3")
    assert asked[-1] == {SCOPE}
