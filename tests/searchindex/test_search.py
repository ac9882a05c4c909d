"""Hybrid search through the real indexes: the service, `/api/search/` and `manage.py search`."""

from __future__ import annotations

import io
import json
import socket
import threading
import uuid
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from memoryui.models import ApiToken, Memory
from searchindex import indexes as search_indexes
from searchindex.exact import EXACT
from searchindex.fusion import RetrievalSettings
from searchindex.search import MAX_QUERY_CHARS, RESULT_FIELDS, Rows, search
from searchindex.vector import VectorIndex

pytestmark = pytest.mark.django_db

MAIN = [
    ("The user's phone number is 18600000000.", {"kind": "entity", "entity_key": "phone:18600000000"}),
    ("QA test phone 18600000001 belongs to the test rig, not the user.", {"kind": "fact"}),
    ("Remember: my lucky number is 88, use it for demo seeds.", {"kind": "remember"}),
    ("Commit 9f2c4e1a7b3d5f60812c9e4a6b0d3f7e2c1a5b98 fixed the cursor pagination bug.", {"kind": "project_state"}),
    ("Prefers concise answers: get to the point and do not summarize at the end.", {"kind": "preference"}),
    ("用户喜欢简洁的回答，不要长篇大论。", {"kind": "preference"}),
    ("发版流程：先跑测试，再手动检查界面，然后打标签推送。", {"kind": "procedure"}),
    ("ミナトの担当者は佐藤さんです。", {"kind": "relationship"}),
    ("서울 사무실 임대는 2027년 3월에 만료됩니다.", {"kind": "fact"}),
    ("The GPU fleet in the Dongguan IDC runs RTX4070 cards.", {"kind": "fact"}),
    ("Releases go out on Thursdays after 14:00; nothing ships on Fridays.", {"kind": "procedure"}),
    ("Warning: article-list-query returns 500 when page > 10; use the cursor instead.", {"kind": "fact"}),
    ("Staging runs on k3s with three nodes.", {"kind": "fact"}),
]
OTHER = [("The user's phone number is 18600000000 in the other agent too.", {"kind": "fact", "scope": "agent:other"})]


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    """A small agent:main store (and one agent:other memory), indexed for real."""
    memories = {}
    for text, fields in MAIN + OTHER:
        memories[text] = write(text, **fields)
    return memories


def texts(result) -> list[str]:
    return [found.memory.text for found in result.results]


def memory_with(store: dict[str, Memory], words: str) -> Memory:
    [memory] = [m for text, m in store.items() if words in text and m.scope == "agent:main"]
    return memory


# --- what search finds -----------------------------------------------------------------------


def test_exact_tokens_find_their_memory_and_not_the_near_duplicate(store):
    result = search("18600000000", scopes=["agent:main"])
    assert texts(result)[0] == "The user's phone number is 18600000000."
    assert all("18600000001" not in text for text in texts(result))
    [commit] = search("9f2c4e1a7b3d5f60812c9e4a6b0d3f7e2c1a5b98", scopes=["agent:main"]).results
    assert commit.memory.text.startswith("Commit 9f2c4e1")
    assert search("9f2c4e1", scopes=["agent:main"]).results[0].memory == commit.memory  # the short hash


def test_full_width_latin_and_digits_match_after_nfkc(store):
    assert texts(search("ＲＴＸ４０７０", scopes=["agent:main"]))[0].startswith("The GPU fleet")
    assert texts(search("１８６００００００００", scopes=["agent:main"]))[0].startswith("The user's phone")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("发版流程", "发版流程：先跑测试"),
        ("ミナトの担当者", "ミナトの担当者は佐藤さんです。"),
        ("서울 사무실 임대", "서울 사무실 임대는"),
    ],
)
def test_chinese_japanese_and_korean_queries_hit(store, query, expected):
    assert texts(search(query, scopes=["agent:main"]))[0].startswith(expected)


def test_a_chinese_fact_name_finds_the_english_memory_stating_it(store):
    result = search("幸运数字", scopes=["agent:main"])
    assert "Remember: my lucky number is 88, use it for demo seeds." in texts(result)
    [found] = [f for f in result.results if "lucky number" in f.memory.text]
    assert found.candidate.bm25_coverage == 1.0  # the concept answers every word of the query


def test_unanswerable_queries_return_nothing_and_the_near_misses_name_the_floor(store):
    for query in ("quantum entanglement", "的", "蛋糕怎么做", "how to knit a scarf"):
        result = search(query, scopes=["agent:main"])
        assert result.results == [], query
    result = search("quantum entanglement", scopes=["agent:main"])
    assert not result.answer.answered and result.answer.reason
    assert result.below_floor, "the ranking is still there, under the floor line"
    reasons = " ".join(reason for found in result.below_floor for reason in found.candidate.reasons)
    assert "over the anchor" in reasons and "weak" not in result.answer.reason.split("(")[0]
    assert "vector_check" in result.timings_ms or all(f.candidate.vector_rank for f in result.candidates)


def test_only_an_unanswered_query_reads_the_similarity_outside_the_top_k(store, settings, monkeypatch):
    # Searched by the HNSW graph (a scope past the exact line): the stored vectors of the BM25
    # candidates outside the vector top k are read once, after the ranking left the query
    # unanswered, and judge it again; an answered query reads none.
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    knobs = RetrievalSettings(vector_k=1)
    reads = []
    similarities = VectorIndex.similarities

    def read(index, vector, ids, *, scopes):
        reads.append((threading.current_thread().name, sorted(ids)))
        return similarities(index, vector, ids, scopes=scopes)

    monkeypatch.setattr(VectorIndex, "similarities", read)
    result = search("quantum cursor staging thursdays cards", scopes=["agent:main"], settings=knobs)
    assert result.vector_searched == {"agent:main": "hnsw"} and not result.answer.answered
    [(thread, asked)] = reads
    assert thread == threading.main_thread().name and "vector_check" in result.timings_ms
    checked = {
        f.candidate.id: f.candidate.checked_similarity for f in result.candidates if f.candidate.vector_rank is None
    }
    assert len(checked) >= 2 and set(checked) <= set(asked) and None not in checked.values()

    reads.clear()
    answered = search("phone number 18600000000", scopes=["agent:main"], settings=knobs)
    assert answered.answer.answered and answered.results
    assert any(f.candidate.vector_rank is None for f in answered.candidates), "BM25 found some outside the top k"
    assert reads == [] and "vector_check" not in answered.timings_ms


def test_the_rows_a_search_loads_are_the_orm_values_of_its_active_memories_in_its_scopes(store):
    # On PostgreSQL one statement reads them (timestamps as text, JSON through the field's
    # converter); whatever the database, each value is the one the ORM reads.
    lucky, phone = memory_with(store, "lucky number"), memory_with(store, "phone number")
    Memory.objects.filter(pk=lucky.pk).update(
        metadata={"source_file": "MEMORY.md", "note": "<b>ü & 中文</b>", "n": [1, 2.5]},
        updated_at=datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC),
    )
    Memory.objects.filter(pk=phone.pk).update(updated_at=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))
    gone = memory_with(store, "Staging runs")
    Memory.objects.filter(pk=gone.pk).update(status=Memory.Status.TOMBSTONED)
    other = Memory.objects.get(scope="agent:other")
    ids = [str(m.pk) for m in store.values()]
    fields = (*RESULT_FIELDS, "metadata")

    rows = Rows.active([*ids, str(uuid.uuid4()), "not-a-memory-id", ids[0].upper()], ["agent:main"], fields)

    orm = Memory.objects.filter(status=Memory.Status.ACTIVE, scope="agent:main")
    expected = {str(row[0]): row for row in orm.values_list(*rows.fields)}
    assert set(rows) == set(expected) and len(rows) == len(MAIN) - 1
    assert str(gone.pk) not in rows and str(other.pk) not in rows
    for pk in expected:
        assert tuple(rows.value(pk, name) for name in rows.fields) == expected[pk], pk
    assert rows.value(str(lucky.pk), "metadata")["note"] == "<b>ü & 中文</b>"
    assert rows.value(str(lucky.pk), "updated_at") == datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    assert rows[str(phone.pk)].updated_at == datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert set(Rows.active(ids, None, fields)) == set(expected) | {str(other.pk)}
    assert list(Rows.active([], ["agent:main"], fields)) == []


def test_without_the_floor_search_returns_the_raw_ranking(store):
    floored = search("quantum entanglement", scopes=["agent:main"], limit=3)
    raw = search("quantum entanglement", scopes=["agent:main"], limit=3, floor=False)

    assert floored.results == [] and not raw.answer.answered
    assert [f.memory.pk for f in raw.results] == [f.memory.pk for f in floored.below_floor[:3]]
    assert raw.to_dict()["floor"] is False and len(raw.results) == 3


def test_search_stays_inside_the_scope(store):
    main = search("phone number 18600000000", scopes=["agent:main"], limit=20)
    assert {found.memory.scope for found in main.candidates} == {"agent:main"}
    other = search("phone number 18600000000", scopes=["agent:other"], limit=20)
    assert texts(other) == ["The user's phone number is 18600000000 in the other agent too."]


def test_a_tombstoned_memory_is_not_found_and_a_restored_one_is(store, django_capture_on_commit_callbacks):
    memory = memory_with(store, "Commit 9f2c4e1")
    with django_capture_on_commit_callbacks(execute=True):
        memory.tombstone("obsolete", actor="test")
    assert search("9f2c4e1a7b3d5f60812c9e4a6b0d3f7e2c1a5b98", scopes=["agent:main"]).results == []
    with django_capture_on_commit_callbacks(execute=True):
        memory.restore(actor="test")
    assert texts(search("9f2c4e1a7b3d5f60812c9e4a6b0d3f7e2c1a5b98", scopes=["agent:main"]))[0] == memory.text


def test_a_stale_index_entry_never_shows_a_memory_the_database_no_longer_has_active(store):
    memory = memory_with(store, "Commit 9f2c4e1")
    Memory.objects.filter(pk=memory.pk).update(status=Memory.Status.TOMBSTONED)  # index not told
    result = search("9f2c4e1a7b3d5f60812c9e4a6b0d3f7e2c1a5b98", scopes=["agent:main"])
    assert str(memory.pk) in search_indexes.get_index("bm25").entries()
    assert result.results == [] and memory.pk not in {found.memory.pk for found in result.candidates}


def test_every_result_explains_its_ranks_scores_and_adjustments(store):
    [top, *_] = search("lucky number", scopes=["agent:main"]).results
    hit = top.to_dict()
    assert hit["bm25_rank"] == 1 and hit["bm25_score"] > 0 and hit["bm25_coverage"] == 1.0
    assert hit["vector_rank"] >= 1 and 0 < hit["vector_similarity"] <= 1
    assert set(hit["adjustments"]) == {"tier", "pinned", "importance", "recency"}
    assert hit["fused"] == pytest.approx(sum(hit["contributions"].values()), abs=1e-5)
    assert hit["score"] == pytest.approx(hit["fused"] + sum(hit["adjustments"].values()), abs=1e-5)
    assert hit["contributions"]["vector"] > 0 and hit["contributions"]["bm25"] > 0
    assert hit["label"] == "strong" and any("coverage" in reason for reason in hit["reasons"])
    assert hit["vector_margin"] == pytest.approx(hit["vector_similarity"] - hit["vector_anchor"], abs=1e-3)


def test_a_result_holds_its_memory_as_the_database_has_it_and_reads_the_rest_when_asked(
    store, django_assert_num_queries
):
    memory = memory_with(store, "lucky number")
    Memory.objects.filter(pk=memory.pk).update(importance=0.93, metadata={"source_file": "MEMORY.md"})
    result = search("lucky number", scopes=["agent:main"], extra_fields=("metadata",))
    [found] = [f for f in result.candidates if f.candidate.id == str(memory.pk)]
    with django_assert_num_queries(0):  # what the search loaded
        assert (found.memory.pk, found.memory.text, found.memory.importance) == (memory.pk, memory.text, 0.93)
        assert found.memory.metadata == {"source_file": "MEMORY.md"} and found.memory.scope == "agent:main"
        assert found.memory.created_at == memory.created_at and found.memory is found.memory
    assert "confidence" in found.memory.get_deferred_fields()
    with django_assert_num_queries(1):  # a field the search did not load is read on demand
        assert found.memory.confidence == memory.confidence
    # The rerank read the same row: the importance adjustment is the one of 0.93.
    settings = result.settings
    expected = settings.importance_weight * 0.93 * settings.fusion_unit
    assert found.candidate.adjustments["importance"] == pytest.approx(expected)


def test_each_retriever_can_answer_alone(store):
    bm25 = search("18600000000", scopes=["agent:main"], retriever="bm25")
    assert all(f.candidate.vector_rank is None for f in bm25.candidates)
    vector = search("18600000000", scopes=["agent:main"], retriever="vector")
    assert all(f.candidate.bm25_rank is None for f in vector.candidates)
    assert "query_embedding" in vector.timings_ms and "bm25_search" not in vector.timings_ms


def test_a_hybrid_search_asks_both_indexes_at_once(store, monkeypatch):
    # Each stage waits for the other at a barrier: asked one after the other, the first would
    # wait alone until the barrier breaks, and the search would fail.
    meeting = threading.Barrier(2, timeout=20)
    threads = {}
    vector_index, bm25_index = search_indexes.get_index("vector"), search_indexes.get_index("bm25")
    search_vector, bm25_search = vector_index.search_vector, bm25_index.search

    def vector_side(*args, **kwargs):
        threads["vector"] = threading.get_ident()
        meeting.wait()
        return search_vector(*args, **kwargs)

    def bm25_side(*args, **kwargs):
        threads["bm25"] = threading.get_ident()
        meeting.wait()
        return bm25_search(*args, **kwargs)

    monkeypatch.setattr(vector_index, "search_vector", vector_side)
    monkeypatch.setattr(bm25_index, "search", bm25_side)
    result = search("my lucky number", scopes=["agent:main"])

    assert texts(result)[0].startswith("Remember: my lucky number is 88")
    assert threads["bm25"] == threading.get_ident() != threads["vector"]
    assert {"query_embedding", "vector_search", "bm25_search"} <= result.timings_ms.keys()


def test_a_query_embedded_beforehand_is_not_embedded_again(store, monkeypatch):
    embedder = search_indexes.get_index("vector").embedder
    vector = embedder.embed_query("which day do releases go out")
    expected = search("which day do releases go out", scopes=["agent:main"])

    def refuse(*args, **kwargs):
        raise AssertionError("the query was embedded again")

    monkeypatch.setattr(embedder, "embed_query", refuse)
    given = search("which day do releases go out", scopes=["agent:main"], query_vector=vector)

    assert texts(given) == texts(expected) and texts(given)[0].startswith("Releases go out on Thursdays")
    assert [f.candidate.vector_score for f in given.results] == pytest.approx(
        [f.candidate.vector_score for f in expected.results], abs=1e-6
    )


def test_long_queries_are_truncated_and_limits_clamped_and_both_are_said(store):
    result = search("lucky number " * 1000, scopes=["agent:main"], limit=99)
    assert len(result.query) == MAX_QUERY_CHARS
    assert f"query truncated from {len(('lucky number ' * 1000).strip())} to 1000 characters" in result.notices
    assert result.limit == 20 and "limit 99 lowered to 20 (allowed 1..20)" in result.notices
    assert search("lucky", scopes=["agent:main"], limit=0).limit == 1


def test_search_answers_from_bm25_alone_when_the_vector_server_is_down(store, settings):
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"
    search_indexes.close_indexes()
    result = search("18600000000", scopes=["agent:main"])
    assert texts(result)[0] == "The user's phone number is 18600000000."
    assert "vector" in result.degraded
    assert any(notice.startswith("vector index unavailable, answered from BM25 alone") for notice in result.notices)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- /api/search/ ----------------------------------------------------------------------------


def test_api_search_answers_with_explained_results(store, alice_client):
    response = alice_client.get("/api/search/", {"q": "18600000000", "scope": "main"})
    assert response.status_code == 200
    body = response.json()
    assert body["scopes"] == ["agent:main"] and body["retriever"] == "hybrid" and body["limit"] == 5
    first = body["results"][0]
    assert first["text"] == "The user's phone number is 18600000000."
    for key in ("id", "kind", "tier", "score", "label", "reasons", "vector_rank", "bm25_rank", "contributions"):
        assert key in first
    assert first["label"] == "strong" and body["answer"]["answered"] is True
    assert body["fusion"]["function"] == "cc" and set(body["fusion"]["weights"]) == {"vector", "bm25"}
    assert set(body["thresholds"]) >= {"strong_margin", "strong_coverage", "weak_margin", "weak_coverage"}


def test_api_search_says_how_each_scopes_vectors_were_searched(store, alice_client, settings):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 1000
    EXACT.clear()  # the writes' duplicate checks searched, and had the matrix read: start without it
    first = alice_client.get("/api/search/", {"q": "lucky number", "scope": "main"}).json()
    assert search_indexes.get_index("vector").warm(["agent:main"]) == {"agent:main": "exact"}
    second = alice_client.get("/api/search/", {"q": "lucky number", "scope": "main"}).json()

    assert first["vector_searched"] == {"agent:main": "hnsw"} and second["vector_searched"] == {"agent:main": "exact"}
    assert [hit["id"] for hit in first["results"]] == [hit["id"] for hit in second["results"]]
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 0
    assert alice_client.get("/api/search/", {"q": "lucky number"}).json()["vector_searched"] == {
        "agent:main": "hnsw",
        "agent:other": "hnsw",
    }


def test_api_search_floor_off_returns_the_ranking_of_an_unanswered_query(store, alice_client):
    silent = alice_client.get("/api/search/", {"q": "quantum entanglement", "scope": "main"}).json()
    raw = alice_client.get("/api/search/", {"q": "quantum entanglement", "scope": "main", "floor": "off"}).json()
    bad = alice_client.get("/api/search/", {"q": "quantum entanglement", "floor": "maybe"})

    assert silent["results"] == [] and silent["answer"]["answered"] is False and silent["below_floor"]
    assert len(raw["results"]) == 5 and raw["floor"] is False
    assert [r["id"] for r in raw["results"]] == [r["id"] for r in silent["below_floor"][:5]]
    assert bad.status_code == 400 and "floor" in bad.json()["error"]["details"]


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_api_search_refuses_an_empty_query_naming_the_field(store, alice_client, query):
    response = alice_client.get("/api/search/", {"q": query})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and "empty" in error["details"]["q"][0]


def test_api_search_missing_query_and_bad_parameters_are_400_with_every_field(store, alice_client):
    response = alice_client.get("/api/search/", {"limit": "many", "retriever": "magic"})
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert set(details) == {"q", "limit", "retriever"}


def test_api_search_states_truncation_and_clamping(store, alice_client):
    response = alice_client.get("/api/search/", {"q": "x" * 10_000, "limit": "0"})
    assert response.status_code == 200
    notices = response.json()["notices"]
    assert "query truncated from 10000 to 1000 characters" in notices
    assert "limit 0 raised to 1 (allowed 1..20)" in notices


def test_api_search_with_a_scoped_token_never_sees_other_scopes(store, client, django_user_model):
    owner = django_user_model.objects.create_user("ops")
    _, key = ApiToken.issue(user=owner, name="other only", scopes=["agent:other"])
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    everything = client.get("/api/search/", {"q": "18600000000"}, **auth).json()
    assert [hit["scope"] for hit in everything["results"]] == ["agent:other"]
    asked_main = client.get("/api/search/", {"q": "18600000000", "scope": "agent:main"}, **auth).json()
    assert asked_main["results"] == [] and asked_main["scopes"] == []


def test_api_search_without_credentials_is_401_json(client):
    response = client.get("/api/search/", {"q": "anything"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


def test_api_search_degrades_to_bm25_and_is_503_only_when_no_index_answers(store, alice_client, settings):
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"
    search_indexes.close_indexes()
    degraded = alice_client.get("/api/search/", {"q": "18600000000"})
    assert degraded.status_code == 200 and "vector" in degraded.json()["degraded"]
    down = alice_client.get("/api/search/", {"q": "18600000000", "retriever": "vector"})
    assert down.status_code == 503
    error = down.json()["error"]
    assert error["code"] == "backend_unavailable" and error["details"]["backend"] == "vector index"


# --- manage.py search ------------------------------------------------------------------------


def run_search(*args) -> tuple[dict, int]:
    out = io.StringIO()
    try:
        call_command("search", *args, "--json", stdout=out)
        status = 0
    except CommandError:
        status = 1
    return json.loads(out.getvalue()), status


def test_search_command_prints_the_contract_keys(store):
    document, status = run_search("lucky number", "--scope", "main", "--retriever", "bm25", "--limit", "3")
    assert status == 0 and document["retriever"] == "bm25" and document["limit"] == 3
    hit, *others = document["results"]
    assert {"id", "text", "kind", "tier", "score", "vector_rank", "bm25_rank"} <= set(hit)
    assert hit["text"].startswith("Remember: my lucky number is 88") and hit["label"] == "strong"
    assert all(other["label"] == "weak" for other in others)


def test_search_command_clamps_the_limit_and_fails_cleanly_on_an_empty_query(store):
    document, status = run_search("phone", "--scope", "main", "--limit", "50")
    assert status == 0 and "limit 50 lowered to 20 (allowed 1..20)" in document["notices"]
    document, status = run_search("   ", "--scope", "main")
    assert status == 1 and document["error"].startswith("query: The query is empty")


def test_search_command_without_json_shows_the_decision_and_the_floor_line(store):
    out = io.StringIO()
    call_command("search", "quantum entanglement", "--scope", "main", stdout=out)
    text = out.getvalue()
    assert "not answered:" in text and "---- below the floor" in text and "below floor: margin" in text

    raw = io.StringIO()
    call_command("search", "quantum entanglement", "--scope", "main", "--no-floor", "--limit", "2", stdout=raw)
    lines = raw.getvalue().splitlines()
    assert "raw ranking (--no-floor)" in lines[1] and sum(line[:3].strip().endswith(".") for line in lines) == 2
