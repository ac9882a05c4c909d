"""Equal BM25 scores rank alike in whoosh, in PostgreSQL and in the fusion: compared score, then id.

A store holds many memories that score exactly alike for a query (one template, one length). Which
k of them come back must not depend on the engine or on the order they were written in.
"""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from searchindex import indexes as search_indexes
from searchindex.documents import IndexedMemory
from searchindex.fusion import CandidateInfo, RetrievalSettings, fuse
from searchindex.lexical import SCORE_STEPS, STORED_LENGTHS, LexicalIndex, compared_score
from searchindex.tokens import tokenize
from tests.postgres import needs_postgres

QUERY = "release checklist"
# More tied memories than a whoosh posting block holds (128): whoosh's own collector skips the
# blocks that can only tie with its k-th hit.
TIED = 300


def key(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ties/{name}"))


def memory(name: str, text: str, *, scope: str = "agent:main") -> IndexedMemory:
    return IndexedMemory(
        id=key(name), scope=scope, kind="fact", tier="working", pinned=False, text=text, content_hash=name
    )


def tied_store() -> tuple[IndexedMemory, list[IndexedMemory], IndexedMemory]:
    """One memory that scores above the rest, TIED that score alike, and one like them in another scope."""
    strongest = memory("strongest", "Release checklist: the release checklist is signed.")
    tied = [memory(f"tied-{n}", f"Release checklist item {n:03d} was reviewed by the team.") for n in range(TIED)]
    elsewhere = memory("elsewhere", "Release checklist item 999 was reviewed by the team.", scope="agent:other")
    return strongest, tied, elsewhere


def write(index) -> list[str]:
    """Write the store highest id first, in three batches (three whoosh segments), so the lowest ids
    are written last; the ids the search must return: the strongest, then the tied ones by id."""
    strongest, tied, elsewhere = tied_store()
    newest_first = sorted([*tied, elsewhere], key=lambda item: item.id, reverse=True)
    index.upsert([strongest])
    third = len(newest_first) // 3
    for batch in (newest_first[:third], newest_first[third : 2 * third], newest_first[2 * third :]):
        index.upsert(batch)
    return [strongest.id, *sorted(item.id for item in tied)]


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


def test_a_score_is_compared_in_millionths_so_float_noise_between_engines_is_no_order():
    assert compared_score(7.318_204_1) == compared_score(7.318_204_1 + 1e-12) == compared_score(7.318_204_1 - 1e-12)
    assert compared_score(7.318_204) < compared_score(7.318_205)
    assert compared_score(7.318_204_4) == 7_318_204 and compared_score(7.318_204_6) == 7_318_205


@pytest.mark.parametrize("k", [1, 5, 50, TIED + 5])
def test_whoosh_returns_the_lowest_ids_of_many_tied_memories(tmp_path, k):
    index = LexicalIndex(tmp_path / "bm25")
    expected = write(index)
    hits = index.search(QUERY, scopes=["agent:main"], k=k)
    assert ids(hits) == expected[:k]
    assert [hit.rank for hit in hits] == list(range(1, len(hits) + 1))
    if k > 1:
        assert hits[0].score > hits[1].score and len({hit.score for hit in hits[1:]}) == 1
    index.close()


def test_the_order_of_ties_survives_merging_segments_and_deleting_the_first_ones(tmp_path):
    index = LexicalIndex(tmp_path / "bm25")
    expected = write(index)
    index.optimize()
    assert ids(index.search(QUERY, scopes=["agent:main"], k=20)) == expected[:20]
    index.delete(expected[1:4])
    assert ids(index.search(QUERY, scopes=["agent:main"], k=20)) == [expected[0], *expected[4:23]]
    index.close()


def test_unscoped_search_orders_the_other_scopes_ties_by_id_too(tmp_path):
    index = LexicalIndex(tmp_path / "bm25")
    strongest, tied, elsewhere = tied_store()
    write(index)
    everything = [strongest.id, *sorted([elsewhere.id, *(item.id for item in tied)])]
    assert ids(index.search(QUERY, scopes=None, k=30)) == everything[:30]
    index.close()


def test_the_fusion_keeps_the_lexical_order_of_tied_hits(tmp_path):
    index = LexicalIndex(tmp_path / "bm25")
    write(index)
    hits = index.search(QUERY, scopes=["agent:main"], k=40)
    memories = {hit.id: CandidateInfo(tier="working") for hit in hits}
    for fusion in ("cc", "rrf"):
        fused = fuse([], hits, memories, RetrievalSettings(fusion=fusion), timezone.now())
        assert [candidate.id for candidate in fused] == ids(hits), fusion
    index.close()


# --- on PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def postgres_index(db, settings):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    yield search_indexes.get_index("bm25")
    search_indexes.close_indexes()


@needs_postgres
@pytest.mark.parametrize("k", [1, 5, 50, TIED + 5])
def test_postgres_and_whoosh_return_the_same_tied_memories_in_the_same_order(postgres_index, tmp_path, k):
    whoosh = LexicalIndex(tmp_path / "bm25")
    expected = write(whoosh)
    assert write(postgres_index) == expected
    from_whoosh = whoosh.search(QUERY, scopes=["agent:main"], k=k)
    from_postgres = postgres_index.search(QUERY, scopes=["agent:main"], k=k)
    assert ids(from_postgres) == ids(from_whoosh) == expected[:k]
    assert [hit.score for hit in from_postgres] == [hit.score for hit in from_whoosh]
    assert all((hit.score * SCORE_STEPS).is_integer() for hit in from_postgres)
    whoosh.close()


@needs_postgres
def test_postgres_orders_the_ties_of_every_scope_by_id_as_whoosh_does(postgres_index, tmp_path):
    whoosh = LexicalIndex(tmp_path / "bm25")
    write(whoosh)
    write(postgres_index)
    assert ids(postgres_index.search(QUERY, scopes=None, k=30)) == ids(whoosh.search(QUERY, scopes=None, k=30))
    whoosh.close()


FILLERS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "island", "jungle", "kettle")


def text_of_length(tokens: int) -> str:
    """A text about the release checklist that `tokenize` makes exactly `tokens` tokens of."""
    words = ["Release", "checklist"]
    for filler in FILLERS:
        if len(tokenize(" ".join(words))) == tokens:
            break
        words.append(filler)
    text = " ".join(words)
    assert len(tokenize(text)) == tokens
    return text


@needs_postgres
def test_postgres_scores_by_the_text_length_whoosh_keeps(postgres_index, tmp_path):
    # whoosh keeps a length of 11 tokens as 12: the two memories tie there, so they tie here too,
    # and the lower id comes first in both (with exact lengths the shorter one would rank first).
    assert 11 not in STORED_LENGTHS and 12 in STORED_LENGTHS
    twelve = IndexedMemory(
        id="00000000-0000-4000-8000-000000000001", scope="agent:main", kind="fact", tier="working",
        pinned=False, text=text_of_length(12), content_hash="twelve",
    )  # fmt: skip
    eleven = IndexedMemory(
        **{**twelve.__dict__, "id": "00000000-0000-4000-8000-000000000002", "text": text_of_length(11)}
    )
    whoosh = LexicalIndex(tmp_path / "bm25")
    for index in (whoosh, postgres_index):
        index.upsert([eleven, twelve])
    from_whoosh = whoosh.search(QUERY, scopes=["agent:main"], k=2)
    from_postgres = postgres_index.search(QUERY, scopes=["agent:main"], k=2)
    assert ids(from_postgres) == ids(from_whoosh) == [twelve.id, eleven.id]
    assert [hit.score for hit in from_postgres] == [hit.score for hit in from_whoosh]
    assert from_postgres[0].score == from_postgres[1].score
    whoosh.close()
