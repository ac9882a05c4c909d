"""The BM25 index: exact tokens found, any script searchable, scopes kept apart, no write ever lost."""

from __future__ import annotations

import multiprocessing
import shutil
import threading

import pytest
from whoosh import index as whoosh_index

from searchindex import lexical
from searchindex.documents import IndexedMemory, IndexUnavailable
from searchindex.lexical import LexicalIndex
from searchindex.tokens import tokenize

COMMIT = "3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345"


def memory(id: str, text: str, *, scope: str = "agent:main", **fields) -> IndexedMemory:
    fields.setdefault("content_hash", f"hash-{id}")
    return IndexedMemory(id=id, scope=scope, kind="fact", tier="core", pinned=False, text=text, **fields)


STORE = [
    memory("phone", "The user's phone number is 18600000000."),
    memory("desk", "The front desk answers on 010 8888 7777 during office hours."),
    memory("commit", f"Deploys are pinned to commit {COMMIT} after the rollback."),
    memory("other-commit", "Commit a1b2c3d4e5f60718293a4b5c6d7e8f901234567 reverted the cache change."),
    memory("name", "The user's name is Zhang Wei.", entity_key="user.name"),
    memory("answers", "The user prefers short answers."),
    memory("email", "Send the weekly report to alice.smith@example.com on Fridays."),
    memory("billing", "Billing questions go to bob@example.org."),
    memory("lucky", "我的幸运数字是88 66 99"),
    memory("gpus-zh", "用户在IDC里运行1000张RTX 4070显卡"),
    memory("gpus-en", "The user runs 1000 RTX 4070s in an IDC."),
    memory("tokyo", "東京の天気は晴れ、明日は雨の予報"),
    memory("seoul", "서울 날씨는 맑음"),
    memory("tool", "mcp__ata__article-list-query takes a page size of at most 50.", tags=("tool", "ata")),
    memory("co-author", "Never add Co-Authored-By to commits."),
]


@pytest.fixture
def index(tmp_path) -> LexicalIndex:
    return LexicalIndex(tmp_path / "bm25")


@pytest.fixture
def store(index) -> LexicalIndex:
    index.upsert(STORE)
    return index


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("18600000000", "phone"),
        ("186 0000 0000", "phone"),
        (COMMIT, "commit"),
        (COMMIT[:7], "commit"),
        ("Zhang Wei", "name"),
        ("alice.smith@example.com", "email"),
        ("article-list-query", "tool"),
    ],
)
def test_exact_tokens_rank_first(store, query, expected):
    hits = store.search(query, scopes=["agent:main"], k=5)
    assert ids(hits)[:1] == [expected]
    assert [hit.rank for hit in hits] == list(range(1, len(hits) + 1))
    assert all(hit.score > 0 for hit in hits)


def test_a_phone_number_or_hash_matches_only_its_memory(store):
    assert ids(store.search("18600000000", scopes=None, k=10)) == ["phone"]
    assert ids(store.search(COMMIT, scopes=None, k=10)) == ["commit"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [("幸运数字", "lucky"), ("显卡", "gpus-zh"), ("天気", "tokyo"), ("東京", "tokyo"), ("날씨", "seoul")],
)
def test_chinese_japanese_and_korean_queries_hit(store, query, expected):
    assert ids(store.search(query, scopes=["agent:main"], k=5))[:1] == [expected]


def test_full_width_latin_query_finds_the_ascii_text(store):
    assert set(ids(store.search("ＲＴＸ４０７０", scopes=None, k=2))) == {"gpus-zh", "gpus-en"}


def test_a_single_cjk_character_finds_nothing(store):
    assert store.search("天", scopes=None, k=5) == []
    assert store.search("数", scopes=None, k=5) == []


@pytest.mark.parametrize("query", ["", "   ", "the of and to", "?!", "天"])
def test_an_empty_or_stop_word_query_returns_nothing(store, query):
    assert store.search(query, scopes=None, k=5) == []


def test_search_stays_within_the_given_scopes(index):
    index.upsert([memory("main", "deploy on fridays"), memory("other", "deploy on fridays", scope="agent:other")])
    assert ids(index.search("deploy", scopes=["agent:main"], k=5)) == ["main"]
    assert ids(index.search("deploy", scopes=["agent:other"], k=5)) == ["other"]
    assert set(ids(index.search("deploy", scopes=["agent:main", "agent:other"], k=5))) == {"main", "other"}
    assert set(ids(index.search("deploy", scopes=None, k=5))) == {"main", "other"}
    assert index.search("deploy", scopes=[], k=5) == []
    assert index.search("deploy", scopes=["agent:nobody"], k=5) == []
    assert len(index.search("deploy", scopes=None, k=1)) == 1


def test_an_entity_key_match_outranks_a_tag_match_which_outranks_a_body_match(index):
    index.upsert(
        [
            memory("body", "kubernetes cluster notes here"),
            memory("tag", "cluster notes here", tags=("kubernetes",)),
            memory("key", "cluster notes here", entity_key="kubernetes"),
        ]
    )
    assert ids(index.search("kubernetes", scopes=None, k=5)) == ["key", "tag", "body"]


@pytest.mark.parametrize(
    "query",
    [
        "AND",
        "OR NOT",
        "(",
        ")",
        '"',
        "*",
        "?",
        "~",
        "^",
        ":",
        "-",
        "id:*",
        "text:[a TO z]",
        'foo AND (bar OR "baz',
        "a*b?c~2^3",
    ],
)
def test_query_syntax_in_user_text_is_plain_text(store, query):
    assert isinstance(store.search(query, scopes=None, k=5), list)


def test_operators_in_user_text_neither_negate_nor_widen(store):
    assert ids(store.search("NOT 18600000000", scopes=None, k=5))[:1] == ["phone"]
    assert ids(store.search("-18600000000", scopes=None, k=5)) == ["phone"]
    assert ids(store.search("text:18600000000", scopes=None, k=5))[:1] == ["phone"]
    assert store.search("*", scopes=None, k=5) == []


def test_upsert_replaces_an_entry_and_delete_removes_it(index):
    index.upsert([memory("m1", "the deploy window is friday", content_hash="v1")])
    index.upsert([memory("m1", "the deploy window is monday", content_hash="v2")])
    assert index.count() == 1
    assert index.entries() == {"m1": index.entry_fingerprint("v2")}
    assert index.search("friday", scopes=None, k=5) == []
    assert ids(index.search("monday", scopes=None, k=5)) == ["m1"]
    index.delete(["m1", "never-indexed"])
    assert index.count() == 0
    assert index.search("monday", scopes=None, k=5) == []


def test_the_last_version_wins_within_one_batch(index):
    index.upsert([memory("m1", "alpha", content_hash="v1"), memory("m1", "beta", content_hash="v2")])
    assert index.entries() == {"m1": index.entry_fingerprint("v2")}
    assert index.search("alpha", scopes=None, k=5) == []


def test_entries_count_and_info_describe_the_index(store):
    assert store.entries() == {item.id: store.entry_fingerprint(item.content_hash) for item in STORE}
    assert store.count() == len(STORE)
    info = store.info()
    assert info["index"] == "bm25"
    assert info["documents"] == len(STORE)
    assert info["scoring"] == "BM25F"
    store.reset()
    assert store.count() == 0
    assert store.entries() == {}
    assert not list(store.path.glob("*.seg"))  # the old segments are gone, not just unlisted


def test_a_batch_is_one_commit(index):
    index.upsert([memory("m0", "first")])
    generation = index.info()["generation"]
    index.upsert([memory(f"m{n}", f"note {n}") for n in range(1, 30)])
    index.delete(["m1", "m2", "m3"])
    assert index.info()["generation"] == generation + 2
    assert index.count() == 27


def _write_batches(path: str, prefix: str, batches: int, size: int, start) -> None:
    """Upsert `batches` commits of `size` memories each once every writer is ready."""
    index = LexicalIndex(path)
    start.wait()
    for batch in range(batches):
        index.upsert([memory(f"{prefix}-{batch}-{n}", f"{prefix} batch {batch} item {n}") for n in range(size)])


def test_concurrent_threads_and_processes_lose_no_update(tmp_path):
    path = str(tmp_path / "bm25")
    LexicalIndex(path).count()  # created once up front; creation races are covered elsewhere
    context = multiprocessing.get_context("spawn")
    writers = {
        "proc-a": "process",
        "proc-b": "process",
        "thread-a": "thread",
        "thread-b": "thread",
        "thread-c": "thread",
    }
    batches, size = 12, 10
    start = context.Barrier(len(writers), timeout=60)
    processes = [
        context.Process(target=_write_batches, args=(path, prefix, batches, size, start))
        for prefix, kind in writers.items()
        if kind == "process"
    ]
    errors = []

    def thread_writer(prefix: str) -> None:
        try:
            _write_batches(path, prefix, batches, size, start)
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=thread_writer, args=(p,)) for p, kind in writers.items() if kind == "thread"]
    for worker in processes + threads:
        worker.start()
    for worker in processes + threads:
        worker.join(timeout=90)
    assert errors == []
    assert [process.exitcode for process in processes] == [0, 0]
    expected = {f"{prefix}-{batch}-{n}" for prefix in writers for batch in range(batches) for n in range(size)}
    assert set(LexicalIndex(path).entries()) == expected


def test_a_writer_held_past_the_deadline_raises_instead_of_dropping_the_update(tmp_path):
    index = LexicalIndex(tmp_path / "bm25", lock_timeout=0.3)
    index.upsert([memory("m1", "first")])
    foreign_writer = whoosh_index.open_dir(str(tmp_path / "bm25")).writer()  # as another process would hold it
    try:
        with pytest.raises(IndexUnavailable) as raised:
            index.upsert([memory("m2", "second")])
        assert raised.value.index == "bm25"
    finally:
        foreign_writer.cancel()
    index.upsert([memory("m2", "second")])
    assert set(index.entries()) == {"m1", "m2"}


def test_a_writer_released_before_the_deadline_is_waited_for(tmp_path):
    index = LexicalIndex(tmp_path / "bm25", lock_timeout=10)
    index.count()
    foreign_writer = whoosh_index.open_dir(str(tmp_path / "bm25")).writer()
    threading.Timer(0.3, foreign_writer.cancel).start()
    index.upsert([memory("m1", "first")])
    assert index.entries() == {"m1": index.entry_fingerprint("hash-m1")}


def test_deleting_the_directory_under_an_open_index_recreates_it_empty(tmp_path, caplog):
    # The directory is derived data: it comes back empty, and the caller rebuilds it from the database.
    path = tmp_path / "bm25"
    index = LexicalIndex(path)
    index.upsert([memory("m1", "deploy on fridays")])
    shutil.rmtree(path)
    assert index.count() == 0
    assert index.search("deploy", scopes=None, k=5) == []
    assert path.is_dir()
    assert "vanished" in caplog.text
    index.upsert([memory("m2", "deploy on mondays")])
    assert LexicalIndex(path).entries() == {"m2": LexicalIndex.entry_fingerprint("hash-m2")}


def test_a_corrupt_index_is_unavailable_until_reset(tmp_path):
    path = tmp_path / "bm25"
    LexicalIndex(path).upsert([memory("m1", "deploy on fridays")])
    for toc in path.glob("_MAIN_*.toc"):
        toc.write_bytes(b"not a whoosh table of contents")
    index = LexicalIndex(path)
    with pytest.raises(IndexUnavailable):
        index.count()
    with pytest.raises(IndexUnavailable):
        index.search("deploy", scopes=None, k=5)
    index.reset()
    assert index.count() == 0
    index.upsert([memory("m2", "deploy on mondays")])
    assert ids(index.search("deploy", scopes=None, k=5)) == ["m2"]


def test_an_index_path_that_is_not_a_directory_is_unavailable_not_a_crash(tmp_path):
    path = tmp_path / "file"
    path.write_text("not an index")
    with pytest.raises(IndexUnavailable, match="cannot read"):
        LexicalIndex(path / "bm25").search("anything", scopes=None, k=5)


def test_optimize_merges_the_segments_and_keeps_every_entry(index):
    for n in range(4):
        index.upsert([memory(f"m{n}", f"deploy window number {n}")])
    assert len(index._index()._segments()) > 1
    before = index.entries()
    index.optimize()
    assert len(index._index()._segments()) == 1
    assert index.entries() == before
    assert ids(index.search("deploy window", scopes=None, k=10)) != []


def test_fill_builds_in_one_segment_the_index_chunked_upserts_and_optimize_build(tmp_path):
    chunked, filled = LexicalIndex(tmp_path / "chunked"), LexicalIndex(tmp_path / "filled")
    items = [*STORE, *(memory(f"m{n}", f"deploy window {n} on host {n % 3}", tags=("ops",)) for n in range(30))]
    for start in range(0, len(items), 7):
        chunked.upsert(items[start : start + 7])
    chunked.optimize()
    filled.fill(items)
    assert len(filled._index()._segments()) == 1 and filled.entries() == chunked.entries()
    # Written once, the text's total length is exact, as PostgreSQL's average reads it; whoosh's
    # merges add up each entry's length as it stores it (rounded), a hair off.
    exact = sum(len(tokenize(item.text)) for item in items)
    assert filled._index().reader().field_length("text") == exact
    for query in ("deploy window 7", "host 2 ops", "phone number", COMMIT[:10], "用户"):
        found, built = filled.search(query, scopes=None, k=50), chunked.search(query, scopes=None, k=50)
        assert [hit.id for hit in found] == [hit.id for hit in built] != [], query
        assert [hit.score for hit in found] == pytest.approx([hit.score for hit in built], rel=0.01), query
    with pytest.raises(ValueError, match="empty index"):
        filled.fill([memory("late", "one more")])
    with pytest.raises(ValueError, match="each memory once"):
        LexicalIndex(tmp_path / "twice").fill([memory("a", "one"), memory("a", "two")])
    assert filled.count() == len(items)


def test_a_replacing_fill_reads_a_stream_and_searches_see_the_old_entries_until_its_commit(tmp_path):
    path = tmp_path / "bm25"
    index = LexicalIndex(path)
    index.upsert(STORE[:4])
    index.upsert(STORE[4:])
    seen_while_filling = []

    def stream():
        for n in range(20):
            if n == 10:  # half written: another reader still finds the old entries, only them
                seen_while_filling.append(ids(LexicalIndex(path).search("phone number", scopes=None, k=5)))
            yield memory(f"new-{n}", f"the new phone number {n}")

    assert index.fill(stream(), replace=True) == 20
    assert seen_while_filling == [["phone"]]
    assert len(index._index()._segments()) == 1
    assert set(index.entries()) == {f"new-{n}" for n in range(20)}
    assert ids(index.search("18600000000", scopes=None, k=5)) == []
    assert "new-7" in ids(LexicalIndex(path).search("phone number 7", scopes=None, k=5))


def test_a_fill_that_meets_an_id_twice_writes_nothing(tmp_path):
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(STORE)
    before = index.entries()
    twice = (memory(name, "a replacement text") for name in ("x", "y", "x"))
    with pytest.raises(ValueError, match="x came twice"):
        index.fill(twice, replace=True)
    assert index.entries() == before
    assert ids(index.search("18600000000", scopes=None, k=5)) == ["phone"]


@pytest.fixture
def common_from_three(monkeypatch):
    """Terms held by 3 or more memories count as common (in production: 1% and at least 1000 memories)."""
    monkeypatch.setattr(lexical, "COMMON_TERM_MIN_DOCS", 3)
    monkeypatch.setattr(lexical, "COMMON_TERM_SHARE", 0.0)


def test_common_terms_score_only_where_a_rarer_term_matched(index, common_from_three):
    index.upsert(
        [memory(f"deploy-{n}", f"deploy notes {n}") for n in range(4)]
        + [memory("window", "deploy window is friday"), memory("other", "the window cleaner comes friday")]
    )
    hits = index.search("deploy window", scopes=None, k=10)
    # "deploy" is held by five memories: it no longer selects on its own, so the four memories
    # that hold only "deploy" are not candidates; where "window" matched, "deploy" still scores.
    assert ids(hits) == ["window", "other"]
    assert hits[0].score > hits[1].score
    assert hits[0].coverage == pytest.approx(1.0)
    assert hits[1].coverage < 1.0


def test_a_query_of_common_terms_only_still_finds_them(index, common_from_three):
    index.upsert([memory(f"deploy-{n}", f"deploy notes {n}") for n in range(4)] + [memory("x", "unrelated")])
    assert sorted(ids(index.search("deploy notes", scopes=None, k=10))) == [f"deploy-{n}" for n in range(4)]


def test_a_query_of_common_terms_is_selected_by_its_rarest_one(index, common_from_three):
    index.upsert(
        [memory(f"deploy-{n}", f"deploy notes {n}") for n in range(4)]
        + [memory(f"notes-{n}", f"meeting notes {n}") for n in range(3)]
    )
    # "notes" is in 7 memories, "deploy" in 4: both common; "deploy" selects, "notes" adds its score.
    found = ids(index.search("deploy notes quantum", scopes=None, k=10))
    assert sorted(found) == [f"deploy-{n}" for n in range(4)]


def test_small_stores_have_no_common_terms(index):
    index.upsert([memory(f"deploy-{n}", f"deploy notes {n}") for n in range(4)] + [memory("w", "window")])
    found = sorted(ids(index.search("deploy window", scopes=None, k=10)))
    assert found == ["deploy-0", "deploy-1", "deploy-2", "deploy-3", "w"]


def test_a_compound_query_is_fully_covered_by_a_memory_that_writes_its_parts_apart(index):
    index.upsert([memory("apart", "The fleet runs RTX 4070 cards"), memory("half", "The RTX line is popular")])

    hits = {hit.id: hit for hit in index.search("ＲＴＸ４０７０", scopes=None, k=10)}

    assert hits["apart"].coverage == pytest.approx(1.0)  # rtx4070 is held through rtx + 4070
    assert hits["half"].coverage < 0.5
