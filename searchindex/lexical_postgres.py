"""The BM25 index in PostgreSQL (MEMORYUI_LEXICAL=postgres): the same tokens and scoring as whoosh, in SQL.

Each active memory has a LexicalEntry row. Its `tokens` tsvector holds the distinct tokens
`searchindex.tokens.tokenize` emits for the memory (NFKC, case fold, jieba words and CJK bigrams,
the exact tokens of phones, hashes, e-mail and tool ids), made with `array_to_tsvector`, so no
text-search configuration re-parses or stems a token: it is the `simple` configuration's "no
dictionary" over our own pre-tokenized text, and `tool__name` or `a@b.example` stay whole. It
also holds one lexeme naming the memory's scope (`scope_lexeme`), which no query term can match.
Beside it, `lexemes` lists the same tokens with, at the same positions, each one's frequency in the text
(`text_frequencies`) and the BM25 score of its matches in the entity key and tags
(`field_scores`, which need no length normalisation).

The entry is written by `searchindex.outbox.write_in_step`, which the store calls through
`index_entries_due` inside the transaction that changed the memory: the lexical index is never
behind the database, a rollback takes the entry with it, and every web and worker host sees the
same one.

Scoring is whoosh's BM25F (searchindex.lexical): per field, frequency × field boost, K1 = 1.2,
length normalisation on the text only (by the length whoosh keeps, rounded up to one of
STORED_LENGTHS, over the average of the exact lengths, as whoosh does), summed over the query's
terms with the inverse document frequency log(N / (df + 1)) + 1, where df counts the memories
holding the term in any field.
Candidates are the memories holding one of the query's rarer terms and, when the search is scoped,
one of its scopes' lexemes, both matched in the GIN index, as in whoosh's common-terms query; the
common terms only add their score there. Each candidate is scored from its arrays (`array_position`
per query term: no unpacking, no grouping), and only the top k are sorted: by the score compared in
millionths, then by memory id, the order whoosh ranks in (`searchindex.lexical.compared_score`), so
both indexes return the same k of many tied memories. The same coverage signal (Hit.coverage) goes
to the answerability decision.

Statistics (N, the average text length, each term's document frequency) are read with every
search while the index holds fewer than STATS_EXACT_BELOW entries. Above that they are kept per
process (N and the average length for STATS_SECONDS, a term's frequency for FREQUENCY_SECONDS), N
is PostgreSQL's live-row count of the table, the average length a sample's, and the frequency of a
term PostgreSQL's own statistics list among the column's most common elements (ANALYZE's sample)
is taken from there instead of counted: counting a term held by thousands of memories costs more
than the search. The column keeps statistics on ten times PostgreSQL's default number of lexemes
(target 1000, memoryui migration 0020), so at 1M memories a term is counted only when fewer than
about 150 memories hold it. That moves scores by a hair (an estimate from a sample of 300,000 rows,
the same for every memory holding the term) and may put a term held by about COMMON_TERM_SHARE
of the memories on the other side of the common-term line than whoosh's exact count does.
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
from searchindex.documents import Hit, Hits, IndexedMemory, IndexUnavailable
from searchindex.lexical import (
    BM25_B,
    BM25_K1,
    FIELD_BOOSTS,
    MAX_QUERY_TERMS,
    PROBE_LEVEL,
    SCORE_STEPS,
    STORED_LENGTHS,
    TOKENIZER_VERSION,
    Narrowing,
    common_term_line,
    coverage_of,
    may_exceed_budget,
    narrowing,
    only_common,
    sample_level,
    selecting_terms,
    term_weight,
)
from searchindex.tokens import load_segmenter_for, tokenize

INDEX = "bm25"
TABLE = LexicalEntry._meta.db_table
STATS_EXACT_BELOW = 20_000
STATS_SECONDS = 30.0
# A term counted (up to the common-term line) reads a row per memory holding it: at 1M memories
# about 100 ms for a query's terms, which the search that found the count expired paid, every 30 s
# for each term in use (bench/scale.py: the mean "frequencies" part of a search was 8 ms). A term's
# share of a store that big moves slowly; N, re-read every STATS_SECONDS, carries the growth.
FREQUENCY_SECONDS = 600.0
STATS_SAMPLE = 20_000  # entries sampled (on average) for the average text length above the exact line
WRITE_BATCH = 500
# The entries' layout, part of their fingerprint, so verify reports entries of an older one as
# stale. 2: `tokens` also holds the scope's lexeme (memoryui migration 0013 brought 1 up to 2).
# 3: and the sample levels' (migration 0019).
LAYOUT = 3


def quoted(lexeme: str) -> str:
    """A lexeme as a tsvector / tsquery literal: quoted, its quotes and backslashes doubled."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def scope_lexeme(scope: str) -> str:
    """The lexeme naming an entry's scope in its tsvector. It starts with a space, which no token
    holds (the analyser splits on whitespace), so no query term ever matches it."""
    return f" scope:{scope}"


def sample_lexeme(level: int, scope: str | None = None) -> str:
    """The lexeme of a sample level (`searchindex.lexical.sample_level`), or of that level within a
    scope: an entry holds both for each level up to its own. A space first, as in `scope_lexeme`:
    no query term matches it. A scoped search asks for the scope's own sample: at 1M memories,
    intersecting a term with the sample of `agent:main` (25,000 entries at level 4) and not with
    the sample and the scope (400,000) cut the GIN index's part from about 9 ms to 2.5."""
    return f" sample:{level}" if scope is None else f" sample:{level} scope:{scope}"


def _sample_lexemes(memory_id: str, scope: str) -> list[str]:
    levels = range(1, sample_level(memory_id) + 1)
    return [sample_lexeme(level) for level in levels] + [sample_lexeme(level, scope) for level in levels]


def entry_of(item: IndexedMemory) -> tuple[list[str], list[float], list[float], int]:
    """The entry's lexemes, with each one's frequency in the text and the BM25 score of its matches
    in the entity key and tags; and the number of tokens in the text."""
    text_tokens = tokenize(item.text)
    counts: dict[str, dict[str, int]] = {}
    for field, tokens in (
        ("entity_key", tokenize(item.entity_key) if item.entity_key else []),
        ("tags", tokenize("\n".join(item.tags)) if item.tags else []),
        ("text", text_tokens),
    ):
        for token in tokens:
            in_fields = counts.setdefault(token, {})
            in_fields[field] = in_fields.get(field, 0) + 1
    lexemes = list(counts)
    text_frequencies = [counts[lexeme].get("text", 0) * FIELD_BOOSTS["text"] for lexeme in lexemes]
    field_scores = [
        sum(_saturated(counts[lexeme].get(field, 0) * FIELD_BOOSTS[field]) for field in ("entity_key", "tags"))
        for lexeme in lexemes
    ]
    return lexemes, text_frequencies, field_scores, len(text_tokens)


def _saturated(frequency: float) -> float:
    """BM25's term-frequency saturation without length normalisation (the key's and tags' B = 0)."""
    return frequency * (BM25_K1 + 1) / (frequency + BM25_K1) if frequency else 0.0


_LENGTHS = "'{" + ",".join(str(length) for length in STORED_LENGTHS) + "}'::int[]"
# The text length whoosh would keep for the entry: the first of STORED_LENGTHS at least as long
# (width_bucket counts the lengths below it, by binary search), the last one past the end.
_STORED_LENGTH = f"({_LENGTHS})[least(width_bucket(e.text_length - 1, {_LENGTHS}), {len(STORED_LENGTHS) - 1}) + 1]"


def _search_sql(terms: int) -> str:
    """The candidates the selecting tsquery finds, each scored from its arrays; the best k.

    They are ordered by the compared score, floor(score * 1e6 + 0.5) in float8 as
    `searchindex.lexical.compared_score` computes it, then by id: a uuid sorts byte by byte, as its
    text (the id whoosh stores and the fusion compares) sorts character by character.
    """
    positions = ", ".join(f"array_position(e.lexemes, %(term{n})s) AS p{n}" for n in range(terms))
    score = " + ".join(
        f"%(idf{n})s * coalesce(CASE WHEN c.text_frequencies[c.p{n}] > 0 THEN c.text_frequencies[c.p{n}] * "
        f"{BM25_K1 + 1}::float8 / (c.text_frequencies[c.p{n}] + c.norm) ELSE 0 END + c.field_scores[c.p{n}], 0)"
        for n in range(terms)
    )
    matched = ", ".join(f"c.p{n}" for n in range(terms))
    # Every constant is float8: a bare literal is numeric in PostgreSQL, and numeric arithmetic
    # on each candidate cost more than the rest of its scoring (3x the search time at 100k).
    norm = f"{BM25_K1}::float8 * ({1 - BM25_B}::float8 + {BM25_B}::float8 * {_STORED_LENGTH} / %(avg)s::float8)"
    compared = f"floor(({score}) * {SCORE_STEPS}::float8 + 0.5::float8)"
    # OFFSET 0 keeps the candidates a subquery of their own, so each array_position runs once.
    return f"""
        SELECT c.memory_id, {compared} AS compared, {matched}
        FROM (
            SELECT e.memory_id, e.text_frequencies, e.field_scores, {norm} AS norm, {positions}
            FROM {TABLE} e
            WHERE e.tokens @@ %(selecting)s::tsquery
            OFFSET 0
        ) AS c
        ORDER BY compared DESC, c.memory_id
        LIMIT %(k)s
    """


def selecting_query(terms: list[str], scopes: list[str] | None) -> str:
    """The tsquery of the candidates: any of these terms, and, when scoped, one of the scopes' lexemes.

    The scope is matched inside the GIN index, which intersects the terms' short posting lists
    with the scope's long one by skipping through it; a B-tree on the scope column would list
    every memory of a big scope first (400k rows of `agent:main` at 1M, for each search).
    """
    return _scoped(_any(terms), scopes)


def narrowed_query(terms: list[str], selecting: list[str], narrowed: Narrowing, scopes: list[str] | None) -> str:
    """The tsquery of the candidates a query ranks when narrowed (`narrowing`): the memories
    holding every present term (`terms`), in the sample or not, and with `every_term` unset the
    sample of those holding one of the selecting terms."""
    if narrowed.every_term:
        return _sampled(_every(terms), narrowed.level, scopes)
    return f"({_scoped(_every(terms), scopes)} | ({_sampled(_any(selecting), narrowed.level, scopes)}))"


def probe_query(selecting: list[str], scopes: list[str] | None) -> str:
    """The tsquery of a query's candidates in the sample of PROBE_LEVEL, whose count decides its narrowing."""
    return _sampled(_any(selecting), PROBE_LEVEL, scopes)


def _sampled(selecting: str, level: int, scopes: list[str] | None) -> str:
    """These memories in the sample of `level` (0: all of them), within the scopes."""
    if not level:
        return _scoped(selecting, scopes)
    if scopes is None:
        return f"{selecting} & {quoted(sample_lexeme(level))}"
    return f"{selecting} & (" + " | ".join(quoted(sample_lexeme(level, scope)) for scope in dict.fromkeys(scopes)) + ")"


def _every(terms: list[str]) -> str:
    return "(" + " & ".join(quoted(term) for term in terms) + ")"


def _any(terms: list[str]) -> str:
    return "(" + " | ".join(quoted(term) for term in terms) + ")"


def _scoped(selecting: str, scopes: list[str] | None) -> str:
    if scopes is None:
        return selecting
    return selecting + " & (" + " | ".join(quoted(scope_lexeme(scope)) for scope in dict.fromkeys(scopes)) + ")"


class _Statistics:
    """N, the average text length and document frequencies, cached per process above STATS_EXACT_BELOW."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._collection: tuple[float, int, float] | None = None  # read at, N, average text length
        self._frequencies: dict[str, tuple[float, int]] = {}  # term → (read at, df)
        self._common: tuple[float, dict[str, float]] | None = None  # read at, lexeme → share of rows

    def clear(self) -> None:
        with self._lock:
            self._collection, self._frequencies, self._common = None, {}, None

    def collection(self, cursor) -> tuple[int, float]:
        """N and the average text length: counted below STATS_EXACT_BELOW entries; above, N is
        PostgreSQL's live-row count of the table (its statistics, kept at every commit) and the
        average is a sample's. Counting 1M entries takes most of a second, which one search in
        every STATS_SECONDS would pay; a 1% error in N moves an idf by 0.01."""
        now = self._clock()
        with self._lock:
            cached = self._collection
        if cached and cached[1] >= STATS_EXACT_BELOW and now - cached[0] < STATS_SECONDS:
            return cached[1], cached[2]
        estimated = 0
        # A small index is counted with every search: its last count, not a statistics lookup
        # more per search, says when it has grown past the line.
        if cached is None or cached[1] >= STATS_EXACT_BELOW:
            cursor.execute(
                "SELECT n_live_tup FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = %s",
                [TABLE],
            )
            row = cursor.fetchone()
            estimated = int(row[0]) if row else 0
        if estimated < STATS_EXACT_BELOW:
            cursor.execute(f"SELECT count(*), coalesce(avg(text_length), 0) FROM {TABLE}")
            total, average = cursor.fetchone()
        else:
            total = estimated
            share = min(100.0, 100.0 * STATS_SAMPLE / estimated)  # percent of the table's pages
            cursor.execute(f"SELECT avg(text_length) FROM {TABLE} TABLESAMPLE SYSTEM (%s) REPEATABLE (0)", [share])
            average = cursor.fetchone()[0]
            if average is None:  # the sample drew no page holding a row
                cursor.execute(f"SELECT coalesce(avg(text_length), 0) FROM {TABLE}")
                average = cursor.fetchone()[0]
        with self._lock:
            self._collection = (now, total, float(average))
        return total, float(average)

    def frequencies(self, cursor, terms: list[str], total: int) -> dict[str, int]:
        """Each term's document frequency: counted below STATS_EXACT_BELOW entries; above, cached,
        taken from PostgreSQL's most-common-elements statistics when listed there, and otherwise
        counted up to the common-term line (past it a term is common whatever its exact count)."""
        if total < STATS_EXACT_BELOW:
            return self._count(cursor, terms, cap=None)
        now = self._clock()
        known: dict[str, int] = {}
        with self._lock:
            for term in terms:
                cached = self._frequencies.get(term)
                if cached and now - cached[0] < FREQUENCY_SECONDS:
                    known[term] = cached[1]
        wanted = [term for term in terms if term not in known]
        if not wanted:
            return known
        common = self._common_elements(cursor, now)
        found = {term: round(common[term] * total) for term in wanted if term in common}
        counted = [term for term in wanted if term not in found]
        if counted:
            found.update(self._count(cursor, counted, cap=common_term_line(total)))
        with self._lock:
            if len(self._frequencies) > 100_000:
                self._frequencies.clear()
            self._frequencies.update((term, (now, df)) for term, df in found.items())
        return known | found

    @staticmethod
    def _count(cursor, terms: list[str], *, cap: int | None) -> dict[str, int]:
        limit = f"LIMIT {int(cap)}" if cap else ""
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE tokens @@ q::tsquery {limit}) AS hit) "
            "FROM unnest(%s::text[]) AS q",
            [[quoted(term) for term in terms]],
        )
        return dict(zip(terms, (row[0] for row in cursor.fetchall()), strict=True))

    def _common_elements(self, cursor, now: float) -> dict[str, float]:
        """The tokens column's most common lexemes and the share of rows holding each (pg_stats, as of
        the table's last ANALYZE), read once per STATS_SECONDS."""
        with self._lock:
            if self._common is not None and now - self._common[0] < STATS_SECONDS:
                return self._common[1]
        cursor.execute(
            "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = %s AND attname = 'tokens'",
            [TABLE],
        )
        row = cursor.fetchone()
        common = dict(zip(row[0], row[1], strict=False)) if row and row[0] else {}
        with self._lock:
            self._common = (now, common)
        return common


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
            lexemes, text_frequencies, field_scores, length = entry_of(item)
            fingerprint = self.entry_fingerprint(item.content_hash)
            # The tsvector, which selects, holds the lexemes, the scope's and the sample levels';
            # the array, which scores, the lexemes alone.
            selecting = [
                *lexemes,
                scope_lexeme(item.scope),
                *_sample_lexemes(item.id, item.scope),
            ]
            rows.append(
                (
                    uuid.UUID(item.id),
                    item.scope,
                    fingerprint,
                    selecting,
                    lexemes,
                    text_frequencies,
                    field_scores,
                    length,
                )
            )
        sql = (
            f"INSERT INTO {TABLE} (memory_id, scope, fingerprint, tokens, lexemes, text_frequencies, field_scores, "
            "text_length) VALUES (%s, %s, %s, array_to_tsvector(%s::text[]), %s::text[], %s::float8[], "
            "%s::float8[], %s) ON CONFLICT (memory_id) DO UPDATE SET scope = EXCLUDED.scope, "
            "fingerprint = EXCLUDED.fingerprint, tokens = EXCLUDED.tokens, lexemes = EXCLUDED.lexemes, "
            "text_frequencies = EXCLUDED.text_frequencies, field_scores = EXCLUDED.field_scores, "
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
        return f"{content_hash}.t{TOKENIZER_VERSION}.l{LAYOUT}"

    # Reading

    def search(self, query: str, *, scopes: list[str] | None = None, k: int = 10) -> list[Hit]:
        """The k best entries for `query` by BM25F, within `scopes` (None: every scope), ranked as
        whoosh ranks them: by compared score, then by id. A hit's score is its compared score."""
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
            selecting, narrowed = self._selecting(cursor, rare, rest, frequencies, total, scopes, k)
            note = None if narrowed is None else narrowed.note(rare, common=only_common(rare, frequencies, total))
            parameters = {
                "avg": max(average, 1.0),
                "selecting": selecting,
                "k": k,
            }
            for n, term in enumerate(scored):
                parameters[f"term{n}"] = term
                parameters[f"idf{n}"] = _idf(total, frequencies[term])
            cursor.execute(_search_sql(len(scored)), parameters)
            rows = cursor.fetchall()
        coverage = coverage_of(query, terms, {term: term_weight(total, frequencies.get(term, 0)) for term in terms})
        return Hits(
            (
                Hit(
                    id=str(row[0]),
                    rank=rank,
                    score=row[1] / SCORE_STEPS,
                    coverage=coverage({term for term, position in zip(scored, row[2:], strict=True) if position}),
                )
                for rank, row in enumerate(rows, 1)
            ),
            note=note,
        )

    @staticmethod
    def _selecting(cursor, rare, rest, frequencies, total, scopes, k) -> tuple[str, Narrowing | None]:
        """The selecting tsquery: the rarer terms' (`rare`), or, for a query that selects more than
        the budget in its scopes, its narrowing, decided from its candidates in the sample of
        PROBE_LEVEL (counted, with those of them holding every present term, in one statement), and
        the narrowing. No probe when the rarer terms' frequencies cannot add up to the budget."""
        if not may_exceed_budget(rare, frequencies, total, k):
            return selecting_query(rare, scopes), None
        present = rare + rest
        cursor.execute(
            f"SELECT count(*), count(*) FILTER (WHERE e.tokens @@ %s::tsquery) FROM {TABLE} e "
            "WHERE e.tokens @@ %s::tsquery",
            [_every(present), probe_query(rare, scopes)],
        )
        probed, holding = cursor.fetchone()
        narrowed = narrowing(probed, holding, k)
        if narrowed is None:
            return selecting_query(rare, scopes), None
        return narrowed_query(present, rare, narrowed, scopes), narrowed

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
