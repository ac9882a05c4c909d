"""A query that selects more than the candidate budget ranks a narrowed set: of only common terms,
selected by its rarest; with rarer terms, by them.

Both BM25 indexes count the same memories and draw the same sample, so they return the same hits;
the hits are the exact ranking of the narrowed set; the memories holding every term are never
sampled out when there are fewer than k of them. The store here is small, so the test lowers the
common-term line and the budget (both module constants) to the store's size.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from searchindex import indexes as search_indexes
from searchindex import lexical
from searchindex.documents import IndexedMemory
from searchindex.fusion import RetrievalSettings
from searchindex.lexical import LexicalIndex, Narrowing, may_exceed_budget, narrowing, sample_level, selecting_terms
from searchindex.lexical_postgres import narrowed_query, probe_query, selecting_query
from searchindex.search import search
from searchindex.tokens import tokenize
from tests.postgres import needs_postgres

BUDGET = 40
K = 10


def key(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"budget/{name}"))


def memory(name: str, text: str, *, scope: str = "agent:main") -> IndexedMemory:
    return IndexedMemory(
        id=key(name), scope=scope, kind="fact", tier="working", pinned=False, text=text, content_hash=name
    )


def store() -> list[IndexedMemory]:
    """300 near-copies holding "release" and "checklist", 200 holding one of them, 3 short ones
    holding both twice and "onboarding", and the same template in another scope."""
    items = [memory(f"copy-{n}", f"Release checklist item {n:03d} was reviewed by the team.") for n in range(300)]
    items += [memory(f"release-{n}", f"Release train {n:03d} left on time.") for n in range(100)]
    items += [memory(f"checklist-{n}", f"Checklist {n:03d} for onboarding is done.") for n in range(100)]
    items += [memory(f"strong-{n}", f"Release checklist {n}: the release checklist for onboarding.") for n in range(3)]
    items += [
        memory(f"other-{n}", f"Release checklist item {n:03d} elsewhere.", scope="agent:other") for n in range(50)
    ]
    return items


@pytest.fixture
def small_lines(monkeypatch):
    """Terms in 10 memories or more are common, and 40 candidates are the budget."""
    monkeypatch.setattr(lexical, "COMMON_TERM_MIN_DOCS", 10)
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", BUDGET)


def expected(index, items: list[IndexedMemory], query: str, scopes: list[str], k: int) -> tuple[list[str], Narrowing]:
    """The narrowed hits by definition: the exact ranking (budget lifted), kept to the narrowed set."""
    terms = list(dict.fromkeys(tokenize(query)))
    tokens = {item.id: set(tokenize(item.text)) for item in items}
    # The selecting terms are the rarer ones in the whole index (of only common terms, the rarest);
    # the scopes then keep their memories.
    frequencies = {term: sum(term in held for held in tokens.values()) for term in terms}
    rare, rest = selecting_terms(terms, frequencies, len(items))
    in_scope = [item.id for item in items if scopes is None or item.scope in scopes]
    holding = {memory_id for memory_id in in_scope if set(rare + rest) <= tokens[memory_id]}
    selected = {memory_id for memory_id in in_scope if set(rare) & tokens[memory_id]}
    probed = {memory_id for memory_id in selected if sample_level(memory_id) >= lexical.PROBE_LEVEL}
    narrowed = narrowing(len(probed), len(probed & holding), k)
    assert narrowed is not None
    sampled = {memory_id for memory_id in in_scope if sample_level(memory_id) >= narrowed.level}
    allowed = holding & sampled if narrowed.every_term else holding | (selected & sampled)
    budget, lexical.CANDIDATE_BUDGET = lexical.CANDIDATE_BUDGET, 10**9
    exact = [hit.id for hit in index.search(query, scopes=scopes, k=len(items))]
    lexical.CANDIDATE_BUDGET = budget
    return [memory_id for memory_id in exact if memory_id in allowed][:k], narrowed


def test_a_memory_is_in_every_sample_level_up_to_the_leading_zero_bits_of_its_ids_md5():
    for name in ("a", "b", "m1", key("x"), key("y")):
        first = int(hashlib.md5(name.encode()).hexdigest()[:4], 16)
        assert sample_level(name) == 16 - first.bit_length()
    levels = [sample_level(key(f"spread-{n}")) for n in range(4000)]
    for level in (1, 2, 3):  # 1 in 2**level of the memories is in level `level`
        assert abs(sum(found >= level for found in levels) / len(levels) - 0.5**level) < 0.03


def test_a_query_is_narrowed_only_past_the_budget_and_to_at_most_the_budget(small_lines):
    # The counts are of the candidates in the sample of level 4: 1 in 16 of them.
    assert lexical.PROBE_LEVEL == 4
    assert narrowing(2, 2, K) is None  # about 32 candidates: within the budget of 40
    assert narrowing(3, 3, K) == Narrowing(every_term=True, level=1)  # about 48, all holding every term
    assert narrowing(20, 20, K) == Narrowing(every_term=True, level=3)  # 320 / 8 ≤ 40 < 320 / 4
    # Those holding every term fit (32); the others' sample fills the 8 the budget leaves: 288 / 64.
    assert narrowing(20, 2, K) == Narrowing(every_term=False, level=6)
    assert narrowing(20, 2, K).level > narrowing(20, 0, K).level == 3  # 320 / 8 with none holding every term
    for probed, holding in ((20, 2), (40, 1), (9, 2), (200, 0)):
        narrowed = narrowing(probed, holding, K)
        ranked = (holding << 4) + ((probed - holding) << 4 >> narrowed.level)
        assert ranked <= BUDGET, (probed, holding)
    assert narrowing(5, 5, 20) is None  # the budget is at least 4 k
    assert narrowing(6, 6, 20) == Narrowing(every_term=True, level=1)
    assert narrowing(10**9, 10**9, K).level == lexical.SAMPLE_LEVELS


@pytest.mark.parametrize(
    ("query", "every_term"),
    [("release checklist", True), ("checklist release onboarding", False), ("onboarding", True)],
)
def test_whoosh_ranks_the_narrowed_set_exactly(tmp_path, small_lines, query, every_term):
    items = store()
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(items)
    want, narrowed = expected(index, items, query, ["agent:main"], K)
    assert narrowed.every_term is every_term
    found = index.search(query, scopes=["agent:main"], k=K)
    hits = [hit.id for hit in found]
    assert hits == want and len(hits) == K
    assert found.note.startswith("BM25 ranked a sample: every term of the query is common")
    assert f"1 in {2**narrowed.level}" in found.note and f"{narrowed.selected:,} memories" in found.note
    lexical.CANDIDATE_BUDGET = 10**9
    assert index.search(query, scopes=["agent:main"], k=K).note is None  # the plain ranking says nothing
    index.close()


def test_fewer_than_k_memories_holding_every_term_are_all_ranked_whatever_their_sample(tmp_path, small_lines):
    items = store()
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(items)
    query = "release checklist onboarding"  # 103 memories hold "onboarding", 3 of them every term
    want, narrowed = expected(index, items, query, ["agent:main"], K)
    assert not narrowed.every_term and narrowed.level >= 1
    strong = {key(f"strong-{n}") for n in range(3)}
    assert any(sample_level(memory_id) < narrowed.level for memory_id in strong)  # not all in the sample
    hits = [hit.id for hit in index.search(query, scopes=["agent:main"], k=K)]
    assert hits == want and set(hits[:3]) == strong
    index.close()


def test_a_narrowed_tsquery_asks_for_every_term_or_the_selecting_ones_in_the_scopes_own_sample():
    assert narrowed_query(["a", "b"], ["a"], Narrowing(True, 0), ["s"]) == "('a' & 'b') & (' scope:s')"
    assert narrowed_query(["a", "b"], ["a"], Narrowing(True, 2), None) == "('a' & 'b') & ' sample:2'"
    assert narrowed_query(["a", "b"], ["a"], Narrowing(True, 2), ["s", "t"]) == (
        "('a' & 'b') & (' sample:2 scope:s' | ' sample:2 scope:t')"
    )
    assert narrowed_query(["a", "b", "c"], ["a", "b"], Narrowing(False, 3), ["s"]) == (
        "(('a' & 'b' & 'c') & (' scope:s') | (('a' | 'b') & (' sample:3 scope:s')))"
    )
    assert probe_query(["a"], ["s", "s"]) == "('a') & (' sample:4 scope:s')"
    assert probe_query(["a", "b"], None) == "('a' | 'b') & ' sample:4'"
    assert selecting_query(["a"], ["s"]) == "('a') & (' scope:s')"


RARER = "release train onboarding"  # "release" common; "train" and "onboarding" in 100 and 103 memories


@pytest.fixture
def rarer_terms_line(monkeypatch):
    """Terms in 200 memories or more are common: "train" and "onboarding" are rarer, and together
    they select 203 memories, past the budget of 40."""
    monkeypatch.setattr(lexical, "COMMON_TERM_MIN_DOCS", 200)
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", BUDGET)


def test_a_query_whose_rarer_terms_select_past_the_budget_ranks_a_sample_of_them(tmp_path, rarer_terms_line):
    items = store()
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(items)
    want, narrowed = expected(index, items, RARER, ["agent:main"], K)
    assert not narrowed.every_term and narrowed.level == 3  # 203 / 8 <= 40 < 203 / 4, about
    found = index.search(RARER, scopes=["agent:main"], k=K)
    assert [hit.id for hit in found] == want and len(want) == K
    assert found.note.startswith("BM25 ranked a sample: about ")
    assert "memories in the scopes hold one of its rarer terms ('train', 'onboard')" in found.note
    assert found.note.endswith("it ranked all those holding every term and 1 in 8 of the others")
    index.close()


def test_rarer_terms_that_cannot_add_up_to_the_budget_are_never_probed(tmp_path, rarer_terms_line, monkeypatch):
    items = store()
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(items)
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", 203)  # exactly what "train" and "onboarding" hold
    probed = []
    monkeypatch.setattr(lexical, "narrowing", lambda *args: probed.append(args))
    found = index.search(RARER, scopes=["agent:main"], k=K)
    assert found.note is None and probed == []
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", 202)
    index.search(RARER, scopes=["agent:main"], k=K)
    assert len(probed) == 1
    index.close()


def test_an_index_holding_no_more_memories_than_the_budget_is_never_probed(tmp_path, monkeypatch):
    # Both terms are in all 30 memories: their frequencies add up to 60, the index holds 30.
    items = [memory(f"pair-{n}", f"Alpha beta note {n:02d}.") for n in range(30)]
    index = LexicalIndex(tmp_path / "bm25")
    index.upsert(items)
    probed = []
    monkeypatch.setattr(lexical, "narrowing", lambda *args: probed.append(args))
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", 30)
    found = index.search("alpha beta", scopes=["agent:main"], k=5)
    assert found.note is None and probed == [] and len(found) == 5
    monkeypatch.setattr(lexical, "CANDIDATE_BUDGET", 29)
    index.search("alpha beta", scopes=["agent:main"], k=5)
    assert len(probed) == 1
    assert not may_exceed_budget(["alpha", "beta"], {"alpha": 30, "beta": 30}, 29, 5)
    assert may_exceed_budget(["alpha", "beta"], {"alpha": 30, "beta": 30}, 30, 5)
    index.close()


@needs_postgres
@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("release checklist", 10),
        ("checklist release onboarding", 10),
        ("onboarding", 10),
        ("release train", 10),
        (RARER, 200),
    ],
)
def test_postgres_narrows_as_whoosh_does(db, settings, tmp_path, small_lines, monkeypatch, query, line):
    monkeypatch.setattr(lexical, "COMMON_TERM_MIN_DOCS", line)
    items = store()
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    postgres = search_indexes.get_index("bm25")
    postgres.upsert(items)
    whoosh = LexicalIndex(tmp_path / "bm25")
    whoosh.upsert(items)
    for scopes in (["agent:main"], ["agent:main", "agent:other"], None):
        got = postgres.search(query, scopes=scopes, k=K)
        want = whoosh.search(query, scopes=scopes, k=K)
        assert [(hit.id, hit.score, round(hit.coverage, 6)) for hit in got] == [
            (hit.id, hit.score, round(hit.coverage, 6)) for hit in want
        ], (query, scopes)
        assert len(got) == K and got.note == want.note and got.note
    whoosh.close()
    search_indexes.close_indexes()


def test_a_search_says_when_its_bm25_hits_are_a_sample(db, indexes, small_lines):
    search_indexes.get_index("bm25").upsert(store())
    settings = RetrievalSettings(bm25_k=K)
    narrowed = search("release checklist", scopes=["agent:main"], retriever="bm25", settings=settings)
    [note] = [notice for notice in narrowed.notices if notice.startswith("BM25 ranked a sample")]
    assert "'checklist'" in note or "'releas'" in note  # the rarest term, as the index holds it
    plain = search("release train 007", scopes=["agent:main"], retriever="bm25", settings=settings)
    assert not any(notice.startswith("BM25") for notice in plain.notices)
