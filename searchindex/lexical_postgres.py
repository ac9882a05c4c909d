"""The BM25 index in PostgreSQL (MEMORYUI_LEXICAL=postgres): the same tokens and scoring as whoosh, in SQL.

Each active memory has a LexicalEntry row whose `tokens` tsvector holds exactly what
`searchindex.tokens.tokenize` emits for it (NFKC, case fold, jieba words and CJK bigrams, the
exact tokens of phones, hashes, e-mail and tool ids). The tsvector is written as a literal, so
no text-search configuration re-parses or stems a token: it is the `simple` configuration's
"no dictionary" over our own pre-tokenized text, and `tool__name` or `a@b.example` stay whole.
The text's tokens carry weight D, the entity key's A and the tags' B; positions count each
token, so a lexeme's positions of one weight are its frequency in that field.

The entry is written by `write_in_step`, which the store calls through `index_entries_due`
inside the transaction that changed the memory: the lexical index is never behind the
database, a rollback takes the entry with it, and every web and worker host sees the same one.

Scoring is whoosh's BM25F (searchindex.lexical): per field, frequency × field boost, K1 = 1.2,
length normalisation on the text only, summed over the query's terms with the inverse document
frequency log(N / (df + 1)) + 1, where df counts the memories holding the term in any field.
Candidates are the memories holding one of the query's rarer terms (GIN index), as in whoosh's
common-terms query; the common terms only add their score there. The same coverage signal
(Hit.coverage) goes to the answerability decision.

Statistics (N, the average text length, each term's document frequency) are read with every
search while the index holds fewer than STATS_EXACT_BELOW entries; above that they are kept
for STATS_SECONDS per process, which moves scores by a hair while a bulk write runs and saves
a count over the table per search.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Iterable
from contextlib import contextmanager

from django.db import DatabaseError, connection, transaction

from memoryui.models import LexicalEntry
from searchindex.documents import Hit, IndexedMemory, IndexUnavailable
from searchindex.lexical import (
    BM25_B,
    BM25_K1,
    FIELD_BOOSTS,
    MAX_QUERY_TERMS,
    TOKENIZER_VERSION,
    coverage,
    selecting_terms,
    term_weight,
)
from searchindex.tokens import load_segmenter_for, tokenize

INDEX = "bm25"
TABLE = LexicalEntry._meta.db_table
STATS_EXACT_BELOW = 20_000
STATS_SECONDS = 30.0
WRITE_BATCH = 500

# tsvector limits: a lexeme keeps at most 256 positions, and positions stop at 16,383.
_MAX_POSITIONS = 256
_MAX_POSITION = 16383
_WEIGHT_OF_FIELD = {"text": "D", "entity_key": "A", "tags": "B"}

_SEARCH_SQL = f"""
WITH query(term, idf) AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]))
SELECT e.memory_id,
       sum(query.idf * (
           CASE WHEN f.text > 0
                THEN f.text * {BM25_K1 + 1} / (f.text + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * e.text_length / %(avg)s))
                ELSE 0 END
         + CASE WHEN f.entity_key > 0 THEN f.entity_key * {BM25_K1 + 1} / (f.entity_key + {BM25_K1}) ELSE 0 END
         + CASE WHEN f.tags > 0 THEN f.tags * {BM25_K1 + 1} / (f.tags + {BM25_K1}) ELSE 0 END
       )) AS score,
       array_agg(m.lexeme) AS matched
FROM {TABLE} e
CROSS JOIN LATERAL unnest(e.tokens) AS m(lexeme, positions, weights)
JOIN query ON query.term = m.lexeme
CROSS JOIN LATERAL (SELECT
    coalesce(cardinality(array_positions(m.weights, 'D')), 0) * {FIELD_BOOSTS["text"]}::float8 AS text,
    coalesce(cardinality(array_positions(m.weights, 'A')), 0) * {FIELD_BOOSTS["entity_key"]}::float8 AS entity_key,
    coalesce(cardinality(array_positions(m.weights, 'B')), 0) * {FIELD_BOOSTS["tags"]}::float8 AS tags
) AS f
WHERE e.tokens @@ %(selecting)s::tsquery {{scope_filter}}
GROUP BY e.memory_id
ORDER BY score DESC, e.memory_id
LIMIT %(k)s
"""


def quoted(lexeme: str) -> str:
    """A lexeme as a tsvector / tsquery literal: quoted, its quotes and backslashes doubled."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(item: IndexedMemory) -> tuple[str, int]:
    """The entry's tsvector literal and the number of tokens in its text.

    The key and tags come first, so a text longer than the last position (16,383 tokens) loses
    frequencies at its end, never the key's weight.
    """
    positions: dict[str, list[str]] = {}
    position = 0

    def add(tokens: list[str], weight: str) -> None:
        nonlocal position
        for token in tokens:
            position = min(position + 1, _MAX_POSITION)
            kept = positions.setdefault(token, [])
            if len(kept) < _MAX_POSITIONS:
                kept.append(f"{position}{'' if weight == 'D' else weight}")

    if item.entity_key:
        add(tokenize(item.entity_key), _WEIGHT_OF_FIELD["entity_key"])
    if item.tags:
        add(tokenize("\n".join(item.tags)), _WEIGHT_OF_FIELD["tags"])
    text_tokens = tokenize(item.text)
    add(text_tokens, _WEIGHT_OF_FIELD["text"])
    literal = " ".join(f"{quoted(lexeme)}:{','.join(at)}" for lexeme, at in positions.items())
    return literal, len(text_tokens)


class _Statistics:
    """N, the average text length and document frequencies, cached per process above STATS_EXACT_BELOW."""

    def __init__(self):
        self._lock = threading.Lock()
        self._collection: tuple[float, int, float] | None = None  # read at, N, average text length
        self._frequencies: dict[str, tuple[float, int]] = {}  # term → (read at, df)

    def clear(self) -> None:
        with self._lock:
            self._collection, self._frequencies = None, {}

    def collection(self, cursor) -> tuple[int, float]:
        now = time.monotonic()
        with self._lock:
            cached = self._collection
        if cached and cached[1] >= STATS_EXACT_BELOW and now - cached[0] < STATS_SECONDS:
            return cached[1], cached[2]
        cursor.execute(f"SELECT count(*), coalesce(avg(text_length), 0) FROM {TABLE}")
        total, average = cursor.fetchone()
        with self._lock:
            self._collection = (now, total, float(average))
        return total, float(average)

    def frequencies(self, cursor, terms: list[str], total: int) -> dict[str, int]:
        now = time.monotonic()
        known: dict[str, int] = {}
        if total >= STATS_EXACT_BELOW:
            with self._lock:
                for term in terms:
                    cached = self._frequencies.get(term)
                    if cached and now - cached[0] < STATS_SECONDS:
                        known[term] = cached[1]
        wanted = [term for term in terms if term not in known]
        if wanted:
            cursor.execute(
                f"SELECT (SELECT count(*) FROM {TABLE} WHERE tokens @@ q::tsquery) FROM unnest(%s::text[]) AS q",
                [[quoted(term) for term in wanted]],
            )
            counted = dict(zip(wanted, (row[0] for row in cursor.fetchall()), strict=True))
            known.update(counted)
            if total >= STATS_EXACT_BELOW:
                with self._lock:
                    if len(self._frequencies) > 100_000:
                        self._frequencies.clear()
                    self._frequencies.update((term, (now, df)) for term, df in counted.items())
        return known


class PostgresLexicalIndex:
    """BM25F search over active memories in the LexicalEntry table (PostgreSQL only)."""

    location = f"PostgreSQL table {TABLE}"

    def __init__(self):
        self._statistics = _Statistics()

    def __repr__(self) -> str:
        return "PostgresLexicalIndex()"

    # Writing (in the caller's transaction: inside a memory's write, it is that write's)

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace these memories' entries."""
        latest = list({item.id: item for item in items}.values())
        if not latest:
            return
        load_segmenter_for(item.text for item in latest)
        rows = []
        for item in latest:
            literal, length = tsvector_of(item)
            rows.append((uuid.UUID(item.id), item.scope, self.entry_fingerprint(item.content_hash), literal, length))
        sql = (
            f"INSERT INTO {TABLE} (memory_id, scope, fingerprint, tokens, text_length) "
            "VALUES (%s, %s, %s, %s::tsvector, %s) ON CONFLICT (memory_id) DO UPDATE SET "
            "scope = EXCLUDED.scope, fingerprint = EXCLUDED.fingerprint, tokens = EXCLUDED.tokens, "
            "text_length = EXCLUDED.text_length"
        )
        with transaction.atomic(), connection.cursor() as cursor:
            for start in range(0, len(rows), WRITE_BATCH):
                cursor.executemany(sql, rows[start : start + WRITE_BATCH])

    def delete(self, ids: Iterable[str]) -> None:
        """Remove these ids' entries (unknown ids are ignored)."""
        ids = [uuid.UUID(str(pk)) for pk in dict.fromkeys(ids)]
        if ids:
            LexicalEntry.objects.filter(memory_id__in=ids).delete()

    def optimize(self) -> None:
        """Refresh PostgreSQL's planner statistics and this process's BM25 statistics (after a rebuild)."""
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")
        self._statistics.clear()

    def reset(self) -> None:
        """Start over with an empty index."""
        LexicalEntry.objects.all().delete()
        self._statistics.clear()

    @staticmethod
    def entry_fingerprint(content_hash: str) -> str:
        """What an up-to-date entry of a memory with this content hash stores."""
        return f"{content_hash}.t{TOKENIZER_VERSION}"

    # Reading

    def search(self, query: str, *, scopes: list[str] | None = None, k: int = 10) -> list[Hit]:
        """The k best entries for `query` by BM25F, within `scopes` (None: every scope)."""
        if k <= 0 or (scopes is not None and not scopes):
            return []
        terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]
        if not terms:
            return []
        with self._database_errors("search"), connection.cursor() as cursor:
            total, average = self._statistics.collection(cursor)
            frequencies = self._statistics.frequencies(cursor, terms, total)
            rare, rest = selecting_terms(terms, frequencies, total)
            if not rare:
                return []
            scored = rare + rest
            parameters = {
                "terms": scored,
                "idf": [_idf(total, frequencies[term]) for term in scored],
                "avg": max(average, 1.0),
                "selecting": " | ".join(quoted(term) for term in rare),
                "k": k,
            }
            scope_filter = ""
            if scopes is not None:
                scope_filter = "AND e.scope = ANY(%(scopes)s)"
                parameters["scopes"] = list(dict.fromkeys(scopes))
            cursor.execute(_SEARCH_SQL.format(scope_filter=scope_filter), parameters)
            rows = cursor.fetchall()
        weights = {term: term_weight(total, frequencies.get(term, 0)) for term in terms}
        return [
            Hit(
                id=str(memory_id), rank=rank, score=float(score), coverage=coverage(query, terms, weights, set(matched))
            )
            for rank, (memory_id, score, matched) in enumerate(rows, 1)
        ]

    def entries(self) -> dict[str, str]:
        """Every indexed id with the fingerprint it was indexed at."""
        with self._database_errors("read"):
            return {
                str(pk): fingerprint
                for pk, fingerprint in LexicalEntry.objects.values_list("memory_id", "fingerprint").iterator(
                    chunk_size=5000
                )
            }

    def count(self) -> int:
        with self._database_errors("count"):
            return LexicalEntry.objects.count()

    def info(self) -> dict:
        with self._database_errors("read"), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*), pg_total_relation_size('{TABLE}') FROM {TABLE}")
            documents, size = cursor.fetchone()
        return {
            "index": INDEX,
            "path": self.location,
            "documents": documents,
            "size_bytes": size,
            "scoring": "BM25F",
            "field_boosts": dict(FIELD_BOOSTS),
        }

    def close(self) -> None:
        self._statistics.clear()

    @staticmethod
    @contextmanager
    def _database_errors(action: str):
        """A failed read surfaces as IndexUnavailable (writes fail with the transaction they are in)."""
        try:
            yield
        except DatabaseError as exc:
            raise IndexUnavailable(INDEX, f"{action} failed on {TABLE}: {exc}") from exc


def _idf(total: int, frequency: int) -> float:
    """whoosh's inverse document frequency, which its BM25F multiplies each field's score by."""
    return math.log(max(total, 1) / (frequency + 1)) + 1.0
