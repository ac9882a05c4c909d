"""The BM25 index in PostgreSQL: whoosh's tokens and ranking, written in the memory's own transaction.

The tsvector literal is checked on any database; the rest needs PostgreSQL and runs in the
PostgreSQL pass of the suite (where it is also the configured BM25 index of every other test).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memoryui.models import LexicalEntry
from searchindex import health, lexical_postgres
from searchindex import indexes as search_indexes
from searchindex.documents import IndexedMemory
from searchindex.lexical import BM25_K1 as K1
from searchindex.lexical import LexicalIndex
from searchindex.lexical_postgres import PostgresLexicalIndex, entry_of, quoted, scope_lexeme, selecting_query
from tests.postgres import needs_postgres
from tests.searchindex.test_lexical_index import STORE


def test_an_entry_lists_each_token_once_with_its_text_frequency_and_its_key_and_tag_score():
    item = IndexedMemory(
        id=str(uuid.uuid4()), scope="agent:main", kind="fact", tier="core", pinned=False,
        text="Bob's phone is 18600000000; call Bob after 6.", content_hash="h",
        entity_key="phone:18600000000", tags=("contact",),
    )  # fmt: skip
    lexemes, text_frequencies, field_scores, length = entry_of(item)
    entry = {lexeme: (tf, score) for lexeme, tf, score in zip(lexemes, text_frequencies, field_scores, strict=True)}
    assert len(lexemes) == len(set(lexemes))
    key_match = 2.5 * (K1 + 1) / (2.5 + K1)  # one occurrence in the key, boosted 2.5, saturated
    assert entry["bob"] == (2.0, 0.0)  # twice in the text, not in the key or tags
    assert entry["18600000000"] == (1.0, pytest.approx(key_match))  # in the text and in the key
    assert entry["phone:18600000000"] == (0.0, pytest.approx(key_match))  # in the key only
    assert entry["contact"] == (0.0, pytest.approx(1.5 * (K1 + 1) / (1.5 + K1)))  # a tag, boosted 1.5
    assert length == len(lexical_postgres.tokenize(item.text))


def test_quotes_and_backslashes_are_doubled_inside_a_lexeme():
    assert quoted("it's") == "'it''s'"
    assert quoted("a\\b") == "'a\\\\b'"


def test_postgres_lexical_needs_a_postgresql_database(tmp_path):
    env = {"MEMORYUI_LEXICAL": "postgres", "DATABASE_URL": "", "MEMORYUI_DATA_DIR": str(tmp_path), "PATH": ""}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode != 0 and "MEMORYUI_LEXICAL=postgres needs a PostgreSQL DATABASE_URL" in done.stderr


# --- on PostgreSQL -------------------------------------------------------------------------------


def key(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def as_uuid(item: IndexedMemory) -> IndexedMemory:
    return IndexedMemory(**{**item.__dict__, "id": key(item.id)})


def memory_in(scope: str, name: str, text: str) -> IndexedMemory:
    return IndexedMemory(
        id=key(name), scope=scope, kind="fact", tier="core", pinned=False, text=text, content_hash=name
    )


@pytest.fixture
def postgres_index(db, settings):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    index = search_indexes.get_index("bm25")
    index.upsert([as_uuid(item) for item in STORE])
    yield index
    search_indexes.close_indexes()


QUERIES = [
    "18600000000",
    "alice.smith@example.com",
    "mcp__ata__article-list-query",
    "RTX4070 显卡",
    "幸运数字",
    "東京の天気",
    "서울 날씨",
    "Co-Authored-By commits",
    "what is the user's name",
    "user prefers answers",
    "commit 3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345",
]


@needs_postgres
@pytest.mark.parametrize("query", QUERIES)
def test_postgres_ranks_as_whoosh_does_on_the_same_entries(postgres_index, tmp_path, query):
    whoosh = LexicalIndex(tmp_path / "bm25")
    whoosh.upsert([as_uuid(item) for item in STORE])
    expected = whoosh.search(query, scopes=["agent:main"], k=5)
    got = postgres_index.search(query, scopes=["agent:main"], k=5)
    assert expected, query
    assert [hit.id for hit in got][:1] == [hit.id for hit in expected][:1]
    assert {hit.id for hit in got} == {hit.id for hit in expected}
    assert {hit.id: round(hit.coverage, 3) for hit in got} == {hit.id: round(hit.coverage, 3) for hit in expected}
    whoosh.close()


@needs_postgres
def test_scopes_are_filtered_in_sql_and_nothing_matches_nothing(postgres_index):
    postgres_index.upsert([memory_in("agent:other", "other", "The user's phone number is 18600000000.")])
    assert [hit.id for hit in postgres_index.search("18600000000", scopes=["agent:other"])] == [key("other")]
    assert key("other") not in [hit.id for hit in postgres_index.search("18600000000", scopes=["agent:main"])]
    assert len(postgres_index.search("18600000000", scopes=None)) == 2
    assert postgres_index.search("quantum entanglement", scopes=["agent:main"]) == []
    assert postgres_index.search("18600000000", scopes=[]) == []


def test_the_selecting_query_asks_for_a_term_and_one_of_the_scopes():
    assert selecting_query(["bob", "it's"], None) == "('bob' | 'it''s')"
    assert selecting_query(["bob"], ["agent:main", "user:42", "agent:main"]) == (
        "('bob') & (' scope:agent:main' | ' scope:user:42')"
    )
    # The analyser splits on whitespace: no query token can be a scope's lexeme.
    assert scope_lexeme("agent:main") not in lexical_postgres.tokenize("scope:agent:main  scope agent:main")


@needs_postgres
def test_the_scope_is_matched_in_the_gin_index_and_follows_a_memory_that_moves(postgres_index):
    moving = memory_in("agent:other", "moving", "The staging database password rotates every Monday.")
    postgres_index.upsert([moving])
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN SELECT 1 FROM {lexical_postgres.TABLE} WHERE tokens @@ %s::tsquery",
            [selecting_query(["rotates"], ["agent:other"])],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "lexical_scope" not in plan  # the B-tree on the scope column plays no part
    assert [hit.id for hit in postgres_index.search("rotates", scopes=["agent:other"])] == [key("moving")]
    postgres_index.upsert([IndexedMemory(**{**moving.__dict__, "scope": "agent:main"})])
    assert postgres_index.search("rotates", scopes=["agent:other"]) == []
    assert [hit.id for hit in postgres_index.search("rotates", scopes=["agent:main"])] == [key("moving")]
    assert postgres_index.search("scope:agent:main", scopes=None) == []


@needs_postgres
def test_entries_of_earlier_layouts_are_brought_up_by_the_migrations(db, settings, make_memory):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    memories = [make_memory(f"Deploys go out on Fridays, batch {n}.", kind="fact") for n in range(40)]
    index = search_indexes.get_index("bm25")
    written = _entries()
    # About half the entries hold a sample level or more: the migration computes them as upsert does.
    assert sum(" sample:1" in tokens for tokens, _fingerprint in written.values()) >= 10
    scope_lexemes = importlib.import_module("memoryui.migrations.0013_lexical_entry_scope_lexeme")
    sample_levels = importlib.import_module("memoryui.migrations.0019_lexical_entry_sample_levels")
    with connection.schema_editor() as editor:  # back to layout 1: no scope lexeme, no sample level
        sample_levels.remove_sample_levels(None, editor)
        scope_lexemes.remove_scope_lexemes(None, editor)
    assert not any(" sample:" in tokens for tokens, _fingerprint in _entries().values())
    assert index.search("fridays", scopes=["agent:main"]) == []
    assert sorted(health.verify(indexes=("bm25",))[0].stale) == sorted(str(memory.pk) for memory in memories)
    with connection.schema_editor() as editor:  # in order, each twice: the second time changes nothing
        scope_lexemes.add_scope_lexemes(None, editor)
        scope_lexemes.add_scope_lexemes(None, editor)
        sample_levels.add_sample_levels(None, editor)
        sample_levels.add_sample_levels(None, editor)
    assert _entries() == written
    assert len(index.search("fridays", scopes=["agent:main"], k=50)) == len(memories)
    assert health.verify(indexes=("bm25",))[0].ok
    search_indexes.close_indexes()


def _entries() -> dict[str, tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT memory_id::text, tokens::text, fingerprint FROM {lexical_postgres.TABLE}")
        return {memory_id: (tokens, fingerprint) for memory_id, tokens, fingerprint in cursor.fetchall()}


@needs_postgres
def test_common_terms_only_score_where_a_rarer_term_matched(postgres_index, monkeypatch):
    monkeypatch.setattr(lexical_postgres, "selecting_terms", _every_term_but_user_selects)
    hits = postgres_index.search("user phone", scopes=["agent:main"], k=10)
    assert [hit.id for hit in hits] == [key("phone")]  # "user" alone selects nothing


def _every_term_but_user_selects(terms, frequencies, total):
    present = [term for term in terms if frequencies.get(term)]
    return [term for term in present if term != "user"], [term for term in present if term == "user"]


@needs_postgres
def test_a_write_indexes_in_its_own_transaction_and_a_rollback_takes_the_entry_along(db, settings, make_memory):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    with transaction.atomic():
        kept = make_memory("Deploys go out on Fridays.", kind="fact")
        assert LexicalEntry.objects.filter(memory_id=kept.pk).exists()  # before the commit
        try:
            with transaction.atomic():
                undone = make_memory("The backup cron runs at noon.", kind="fact")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert not LexicalEntry.objects.filter(memory_id=undone.pk).exists()
    assert [hit.id for hit in search_indexes.get_index("bm25").search("fridays", scopes=["agent:main"])] == [
        str(kept.pk)
    ]
    kept.tombstone(reason="wrong", actor="user:alice")
    assert not LexicalEntry.objects.filter(memory_id=kept.pk).exists()
    search_indexes.close_indexes()


@needs_postgres
def test_verify_finds_missing_stale_and_orphaned_entries_and_repair_fixes_them(db, settings, make_memory):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    missing = make_memory("Deploys go out on Fridays.", kind="fact")
    stale = make_memory("Escalate outages to the on-call lead.", kind="procedure")
    LexicalEntry.objects.filter(memory_id=missing.pk).delete()
    LexicalEntry.objects.filter(memory_id=stale.pk).update(fingerprint="outdated")
    orphan = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {lexical_postgres.TABLE} (memory_id, scope, fingerprint, tokens, lexemes, text_frequencies, "
            "field_scores, text_length) VALUES (%s, 'agent:main', 'x', 'ghost'::tsvector, '{ghost}', '{1}', '{0}', 1)",
            [orphan],
        )
    (diff,) = health.verify(indexes=("bm25",))
    assert (diff.missing, diff.stale, diff.orphaned) == ([str(missing.pk)], [str(stale.pk)], [str(orphan)])
    health.repair([diff])
    assert health.verify(indexes=("bm25",))[0].ok
    assert isinstance(search_indexes.get_index("bm25"), PostgresLexicalIndex)
    assert health.status().indexes[1].info["where"] == f"PostgreSQL table {lexical_postgres.TABLE}"
    search_indexes.close_indexes()


@needs_postgres
def test_above_the_exact_line_statistics_are_cached_and_common_terms_read_from_pg_stats(postgres_index, monkeypatch):
    exact = {query: postgres_index.search(query, scopes=["agent:main"], k=5) for query in QUERIES}
    postgres_index.optimize()  # ANALYZE: pg_stats lists the column's most common lexemes
    monkeypatch.setattr(lexical_postgres, "STATS_EXACT_BELOW", 1)
    with connection.cursor() as cursor:
        common = postgres_index._statistics._common_elements(cursor, now=0.0)
    holding_user = sum("user" in lexical_postgres.tokenize(item.text) for item in STORE)
    assert holding_user > 1 and common["user"] == pytest.approx(holding_user / len(STORE), abs=0.01)
    for query, hits in exact.items():
        assert [(h.id, round(h.score, 6)) for h in postgres_index.search(query, scopes=["agent:main"], k=5)] == [
            (h.id, round(h.score, 6)) for h in hits
        ], query
    # Cached: a memory written now does not move the statistics until they are read again.
    postgres_index.upsert([as_uuid(IndexedMemory(**{**STORE[0].__dict__, "id": "again"}))])
    assert postgres_index._statistics.collection(connection.cursor())[0] == len(STORE)


@needs_postgres
def test_postgres_keeps_statistics_on_ten_times_more_lexemes_of_the_tokens_than_its_default(db):
    # A term pg_stats lists is not counted with the search (memoryui migration 0020).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attstattarget FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'tokens'",
            [lexical_postgres.TABLE],
        )
        assert cursor.fetchone()[0] == 1000
        cursor.execute("SHOW default_statistics_target")
        assert int(cursor.fetchone()[0]) * 10 <= 1000


@needs_postgres
def test_above_the_exact_line_a_terms_count_is_kept_longer_than_n(postgres_index, monkeypatch):
    monkeypatch.setattr(lexical_postgres, "STATS_EXACT_BELOW", 1)
    statistics, clock = postgres_index._statistics, [0.0]
    statistics._clock = lambda: clock[0]
    statistics.clear()

    def user_count() -> int:
        with connection.cursor() as cursor:
            return statistics.frequencies(cursor, ["user"], total=len(STORE))["user"]

    counted = user_count()
    assert counted == sum("user" in lexical_postgres.tokenize(item.text) for item in STORE)
    postgres_index.upsert([memory_in("agent:main", f"more-{n}", f"The user asked again ({n}).") for n in range(3)])
    clock[0] += lexical_postgres.STATS_SECONDS + 1
    assert user_count() == counted  # N would be read again by now; the term's count is kept
    clock[0] += lexical_postgres.FREQUENCY_SECONDS
    assert user_count() == counted + 3


@needs_postgres
@pytest.mark.django_db(transaction=True)
def test_above_the_exact_line_n_is_the_live_row_count_and_the_average_length_a_sample(settings, monkeypatch):
    settings.MEMORYUI_LEXICAL = "postgres"
    search_indexes.close_indexes()
    index = search_indexes.get_index("bm25")
    index.upsert([as_uuid(item) for item in STORE])  # committed: PostgreSQL's statistics count it
    exact = {query: index.search(query, scopes=["agent:main"], k=5) for query in QUERIES}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), avg(text_length) FROM {lexical_postgres.TABLE}")
        total, average = cursor.fetchone()
        cursor.execute("SELECT pg_stat_force_next_flush()")
        live, deadline = None, time.monotonic() + 30
        while live != total and time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = %s", [lexical_postgres.TABLE])
            live = cursor.fetchone()[0]
            time.sleep(0.1)
        assert live == total
        monkeypatch.setattr(lexical_postgres, "STATS_EXACT_BELOW", 1)
        monkeypatch.setattr(lexical_postgres, "STATS_SAMPLE", 10 * total)  # the sample is every page
    index._statistics.clear()
    with CaptureQueriesContext(connection) as statements, connection.cursor() as cursor:
        assert index._statistics.collection(cursor) == (total, pytest.approx(float(average)))
    assert "TABLESAMPLE" in statements[-1]["sql"]
    assert not any("count(*)" in statement["sql"] for statement in statements)  # nothing counted
    for query, hits in exact.items():
        assert [(h.id, round(h.score, 6)) for h in index.search(query, scopes=["agent:main"], k=5)] == [
            (h.id, round(h.score, 6)) for h in hits
        ], query
    search_indexes.close_indexes()
