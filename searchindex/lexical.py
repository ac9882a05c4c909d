"""The BM25 index: exact tokens and text in any script, found by whoosh with BM25F scoring.

Tokenization is `searchindex.tokens.tokenize`, for indexing and queries alike.

The whoosh directory is derived data (the database is the source of truth): a missing or
emptied directory is recreated empty on the next use, also under an open `LexicalIndex`, and
the caller rebuilds it; one that cannot be read raises `IndexUnavailable`, and `reset()`
starts it over. Whoosh allows one writer at a time: writes are serialized per directory
inside the process and wait (with backoff, bounded by `lock_timeout`) for writers in other
processes; an update is applied or `IndexUnavailable` is raised, never dropped silently.

Both BM25 indexes (this one and `searchindex.lexical_postgres`) rank the same way: by the score
compared in millionths (`compared_score`), then by memory id, ascending, as the fusion breaks its
own ties. A store holds many memories that score exactly alike (one template, one length), so the
order of equal scores decides which of them make the top k; whoosh alone would keep the ones it
happened to write first. The id is the tie-break rather than recency: it is in every entry
already, so the order needs no new field, no layout change and no rebuild of either index, and
the rerank after fusion weighs recency anyway (`searchindex.fusion`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from heapq import heappush, heapreplace
from pathlib import Path

from django.conf import settings
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential_jitter
from whoosh import collectors, scoring, writing
from whoosh import index as whoosh_index
from whoosh.analysis import Token, Tokenizer
from whoosh.fields import ID, KEYWORD, STORED, TEXT, Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import StructFile
from whoosh.query import And, AndMaybe, DefaultOr, Term
from whoosh.util.numeric import byte_to_length

from searchindex.documents import Hit, Hits, IndexedMemory, IndexUnavailable
from searchindex.tokens import concept_phrases, load_segmenter_for, normalize, tokenize

logger = logging.getLogger(__name__)

INDEX = "bm25"
# Bumped whenever `tokenize` changes what it emits: entries indexed by an older tokenizer then
# show up as stale in `reindex --verify`, and `reindex` re-tokenizes them.
TOKENIZER_VERSION = 4
# The whoosh entries' layout, part of their fingerprint, so verify reports entries of an older one
# as stale and `reindex` rewrites them. 2: each entry lists its sample levels (`sample_level`).
LAYOUT = 2
MAX_QUERY_TERMS = 256
# Common terms (after Elasticsearch's "common terms" query): a query term found in at least this
# share of the memories, and in at least COMMON_TERM_MIN_DOCS of them, does not select candidates
# on its own; it adds its score (and counts for coverage) only in the memories that hold one of
# the query's rarer terms, so its long posting list is skipped through instead of scored whole.
# A query made only of common terms is selected by its rarest one. At 100k memories, queries of
# common CJK bigrams ("黄勇的手机号", "用户喜欢什么样的回答") read 3,000-7,000 postings a term
# and set the p95 of BM25. The minimum keeps stores under ~1,000 memories a term exactly as they
# were: there, every posting list is short anyway.
COMMON_TERM_SHARE = 0.01
COMMON_TERM_MIN_DOCS = 1000
# The candidate budget (after the "match phase" limit of engines such as Vespa): a query's
# candidates are the memories holding one of its rarer terms (or, of only common terms, its
# rarest), and in a big store thousands of memories hold them. At 1M memories `幸运数字是多少`
# selects 14,000 in `agent:main`, near-copies of one template that score alike, and the typical
# query 2,000-4,000, whose scoring (about 6 µs a candidate in PostgreSQL) set the p95 of the BM25
# stage (bench/scale.py). When a query selects more than CANDIDATE_BUDGET memories in its scopes, it
# ranks fewer (`narrowing`): the memories holding every one of its terms and a fixed sample of the
# others; or, when those holding every term are themselves more than the budget (the conjunction a
# common-terms query of Elasticsearch runs), a sample of them. How many it selects is counted in
# the sample of level PROBE_LEVEL (1 in 16), which costs a sixteenth of counting them all:
# PostgreSQL reads a row to count it; and not at all when the selecting terms' document
# frequencies add up to the budget or less. Both BM25 indexes count the same sample and draw the
# same memories, so they still return the same hits. A store of no more memories than the budget
# is ranked exactly, as before. 1,500, not 2,000: with the others' sample fitted to what the
# memories holding every term leave, a narrowed query ranks about 1,500 or fewer (at 1M p95 1,500
# candidates and at most 1,692, the count being a sample's, against 2,800 before), which took a
# whole search's p95 from 33-35 ms to 26-28 (the two budgets interleaved query by query over warm
# caches, two query mixes); its top 10 keeps all of the exact top 10's score
# (bench/bm25_budget.py: 0.78 of its ids, 2,000: 0.83, the dropped ones near-copies scoring alike).
CANDIDATE_BUDGET = 1500
# How finely the sample is cut: level j holds the memories whose id hashes to j leading zero bits,
# 1 in 2**j of them; 16 levels thin a scope of 130M candidates to the budget.
SAMPLE_LEVELS = 16
PROBE_LEVEL = 4
# Field weights: a match in the entity key (a name, a tool, a setting) says most, tags next.
FIELD_BOOSTS = {"text": 1.0, "tags": 1.5, "entity_key": 2.5}
# No length normalization for the key and tags: whoosh averages a field's length over every
# document, most of which have no key or tags, so a memory that has one would look three times
# "too long" and lose to a passing mention in another memory's body.
BM25_K1, BM25_B = 1.2, 0.75
WEIGHTING = scoring.BM25F(B=BM25_B, K1=BM25_K1, entity_key_B=0.0, tags_B=0.0)
# Scores are compared in millionths of a BM25 point. whoosh and PostgreSQL add a score's parts in
# different orders, so the same score may come out of the two 1e-12 apart, which must not order two
# memories. A matching memory scores from about 0.05 to a few dozen, so a millionth keeps four
# significant digits or more: scores closer than that are equal for the ranking. Two scores that
# round apart only because they straddle a half millionth (about once in a million pairs) are the
# one disagreement left.
SCORE_STEPS = 1_000_000
# whoosh keeps each memory's text length in one byte: the token count rounded up to the next of
# these 256 lengths (exact up to 10, then about 8% apart), and BM25 normalises by that. PostgreSQL
# scores with the same lengths (`lexical_postgres`), or memories of 11 and 12 tokens would tie in
# one index and not in the other.
STORED_LENGTHS = tuple(byte_to_length(code) for code in range(256))

_tokenize = tokenize  # MemoryTokenizer's `tokenize` argument (whoosh's name) hides the function


class MemoryTokenizer(Tokenizer):
    """`tokenize` as a whoosh analyzer; index and query go through the same function.

    Character offsets are not tracked (the text is normalized first); the fields don't store them.
    """

    def __call__(
        self,
        value,
        positions=False,
        chars=False,
        keeporiginal=False,
        removestops=True,
        start_pos=0,
        start_char=0,
        tokenize=True,
        mode="",
        **kwargs,
    ):
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        texts = _tokenize(value) if tokenize else [normalize(value)]
        for pos, text in enumerate(texts):
            token.text = text
            token.boost = 1.0
            token.stopped = False
            if keeporiginal:
                token.original = text
            if positions:
                token.pos = start_pos + pos
            if chars:
                token.startchar = token.endchar = start_char
            yield token


def _schema() -> Schema:
    analyzer = MemoryTokenizer()
    return Schema(
        id=ID(stored=True, unique=True),
        scope=ID(stored=True),
        kind=ID(stored=True),
        tier=ID(stored=True),
        content_hash=STORED(),
        text=TEXT(analyzer=analyzer, phrase=False, field_boost=FIELD_BOOSTS["text"]),
        entity_key=TEXT(analyzer=analyzer, phrase=False, field_boost=FIELD_BOOSTS["entity_key"]),
        tags=TEXT(analyzer=analyzer, phrase=False, field_boost=FIELD_BOOSTS["tags"]),
        # The sample levels holding the memory ("1 2 3"): never searched for text, never scored.
        sample=KEYWORD(),
    )


SCHEMA = _schema()

# --- the index ----------------------------------------------------------------------------------

_WRITER_LOCK = "MAIN_WRITELOCK"  # the lock file whoosh's writer takes; creating and resetting take it too
_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()


def _term_statistics(searcher, terms: list[str]) -> tuple[dict[str, float], dict[str, int]]:
    """Each query term's inverse document frequency and document frequency over the whole index, any field.

    A term no memory holds gets the highest weight: a query about something the store never
    mentions ("quantum entanglement") then has most of its weight unmatched.
    """
    total = searcher.doc_count_all()
    weights, frequencies = {}, {}
    for term in terms:
        frequency = max(searcher.doc_frequency(field, term) for field in FIELD_BOOSTS)
        weights[term] = term_weight(total, frequency)
        frequencies[term] = frequency
    return weights, frequencies


def term_weight(total: int, frequency: int) -> float:
    """A query term's weight in the coverage signal: its BM25 inverse document frequency."""
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def common_term_line(total: int) -> int:
    """The document frequency from which a term is common in an index of `total` memories."""
    return math.ceil(max(COMMON_TERM_MIN_DOCS, COMMON_TERM_SHARE * total))


def selecting_terms(terms: list[str], frequencies: dict[str, int], total: int) -> tuple[list[str], list[str]]:
    """The query's present terms split into those that select candidates and the common rest.

    A term in at least COMMON_TERM_SHARE of the memories (and COMMON_TERM_MIN_DOCS of them) only
    scores where a rarer term matched; a query of only common terms is selected by its rarest one.
    """
    present = [term for term in terms if frequencies.get(term, 0) > 0]
    if not present:
        return [], []
    common_from = common_term_line(total)
    rare = [term for term in present if frequencies[term] < common_from]
    if not rare:
        rare = [min(present, key=lambda term: frequencies[term])]
    return rare, [term for term in present if term not in rare]


def only_common(selecting: list[str], frequencies: dict[str, int], total: int) -> bool:
    """Whether a query's selecting terms (`selecting_terms`) are its rarest common one: it has no
    rarer term."""
    return len(selecting) == 1 and frequencies[selecting[0]] >= common_term_line(total)


@dataclass(frozen=True)
class Narrowing:
    """Which of its candidates a query ranks when it selects too many.

    With `every_term`, the memories holding every present term of the query, in the sample of
    `level` (`sample_level`: 1 memory in 2**level); without, those, all of them, and the other
    candidates in the sample of `level`.
    """

    every_term: bool
    level: int
    selected: int = field(default=0, compare=False)  # the candidates estimated from the probe

    def note(self, selecting: list[str], *, common: bool) -> str:
        """What the search reader is told: why the BM25 hits are a sample, and of what; `selecting`:
        the terms that selected the candidates; `common`: the query has no rarer term."""
        ranked = (
            f"those holding every term, 1 in {2**self.level}"
            if self.every_term
            else f"all those holding every term and 1 in {2**self.level} of the others"
        )
        if common:
            held = (
                f"every term of the query is common, and about {self.selected:,} memories in the scopes "
                f"hold its rarest, {selecting[0]!r}"
            )
        else:
            named = ", ".join(repr(term) for term in selecting[:3]) + (", …" if len(selecting) > 3 else "")
            held = f"about {self.selected:,} memories in the scopes hold one of its rarer terms ({named})"
        return f"BM25 ranked a sample: {held}; it ranked {ranked}"


def narrowing(probed: int, probed_holding_every_term: int, k: int) -> Narrowing | None:
    """How a query is narrowed, given how many of its candidates in its scopes are in the sample of
    PROBE_LEVEL (`probed`), and how many of those hold all its present terms; None: it ranks them all.
    Narrowed, it ranks about the budget or fewer: with `every_term` a sample of those holding every
    term; without, all of those and a sample of the others as deep as the rest of the budget needs.

    Both BM25 indexes decide from these two exact counts, so they rank the same memories.
    """
    budget = candidate_budget(k)
    selected, holding = probed << PROBE_LEVEL, probed_holding_every_term << PROBE_LEVEL
    if selected <= budget:
        return None
    if holding > budget:
        return Narrowing(every_term=True, level=_level_for(holding, budget), selected=selected)
    # Those holding every term are all ranked; the others' sample fills what the budget leaves.
    return Narrowing(every_term=False, level=_level_for(selected - holding, budget - holding), selected=selected)


def may_exceed_budget(selecting: list[str], frequencies: dict[str, int], total: int, k: int) -> bool:
    """Whether the memories holding one of these terms can be more than the budget: not when their
    document frequencies (over the whole index, any scope) add up to it or less, nor when the index
    holds no more memories than it (`total`). Only then is the sample probed."""
    return min(sum(frequencies.get(term, 0) for term in selecting), total) > candidate_budget(k)


def candidate_budget(k: int) -> int:
    """How many candidates a query ranks before it is narrowed: at least four times k, so the
    sample of a narrowed one still holds k memories and more."""
    return max(CANDIDATE_BUDGET, 4 * k)


def _level_for(count: int, budget: int) -> int:
    """The first sample level at which `count` memories thin to the budget or fewer."""
    level = 0
    while count > budget << level and level < SAMPLE_LEVELS:
        level += 1
    return level


def sample_level(memory_id: str) -> int:
    """The deepest sample level holding this memory: the leading zero bits of the first 16 bits of
    the MD5 of its id (PostgreSQL computes the same from `md5(memory_id::text)`). A memory is in
    every level up to its own; half of them are in none. The hash, not the id, so ids that share a
    prefix (ordered by time, or written by hand) spread over the levels alike."""
    first = int.from_bytes(hashlib.md5(memory_id.encode("utf-8")).digest()[:2], "big")
    return SAMPLE_LEVELS - first.bit_length()


def coverage_of(query: str, terms: list[str], weights: dict[str, float]) -> Callable[[set[str]], float]:
    """Hit.coverage for this query: the weighted share of its terms a memory holds, given the terms
    it matched. What depends on the query alone (its concepts, its compounds) is worked out once."""
    named_by = concept_phrases(query)
    # A compound the memory writes apart ("RTX4070" / "RTX 4070") is held when all its parts are.
    compounds = {term: parts for term in terms if len(parts := set(tokenize(term)) - {term}) > 1}
    total = sum(weights.values())

    def share(matched: set[str]) -> float:
        matched = set(matched)
        for concept in matched & named_by.keys():
            matched |= named_by[concept]
        matched |= {term for term, parts in compounds.items() if parts <= matched}
        return min(sum(weights[term] for term in matched if term in weights) / total, 1.0) if total else 0.0

    return share


def _bm25_query(terms: list[str], frequencies: dict[str, int], total: int):
    """The query's terms OR-ed over every field; common terms only where a rarer term matched.

    DefaultOr, a balanced tree of unions, skips blocks that cannot reach the top k; the
    preloading union whoosh picks for small indexes scores every posting (~1.7x slower here).
    """
    rare, rest = selecting_terms(terms, frequencies, total)
    if not rare:
        return _in_any_field(terms)  # nothing matches anyway
    if not rest:
        return _in_any_field(rare)
    return AndMaybe(_in_any_field(rare), _in_any_field(rest))


def _in_any_field(terms: list[str]):
    """Any of these terms in any scored field."""
    return DefaultOr([Term(field, term) for term in terms for field in FIELD_BOOSTS])


def _narrowed(searcher, cache: dict, terms: list[str], frequencies: dict[str, int], allowed, k: int):
    """The documents a query may rank (None: any) and the note saying why, if they are narrowed:
    `allowed`, or, for a query that selects more than the budget there, its narrowing (`narrowing`)."""
    total = searcher.doc_count_all()
    rare, rest = selecting_terms(terms, frequencies, total)
    if not rare or not may_exceed_budget(rare, frequencies, total, k):
        return allowed, None
    present = rare + rest

    def sample(level: int) -> frozenset[int]:
        if ("sample", level) not in cache:
            cache["sample", level] = frozenset(searcher.docs_for_query(Term("sample", str(level))))
        return cache["sample", level]

    def matching(query) -> set[int]:
        docs = set(searcher.docs_for_query(query))
        return docs if allowed is None else docs & allowed

    selected = matching(_in_any_field(rare))
    holding = matching(And([_in_any_field([term]) for term in present])) if len(present) > 1 else selected
    probed = selected & sample(PROBE_LEVEL)
    narrowed = narrowing(len(probed), len(probed & holding), k)
    if narrowed is None:
        return allowed, None
    note = narrowed.note(rare, common=only_common(rare, frequencies, total))
    if narrowed.every_term:
        return holding & sample(narrowed.level), note
    return holding | (selected & sample(narrowed.level)), note


def compared_score(score: float) -> int:
    """The score as both BM25 indexes compare it: in millionths, rounded half up.

    `lexical_postgres` computes the same float8 expression in SQL: floor(score * 1e6 + 0.5).
    """
    return math.floor(score * SCORE_STEPS + 0.5)


class _TopWithTies(collectors.TopCollector):
    """whoosh's top-k collector, keeping every entry whose compared score ties with the k-th.

    whoosh's own collector keeps, of equal scores, the entries it met first (the lowest document
    numbers, an accident of write order) and skips the blocks that can only tie with its k-th.
    Here a block is skipped only below the k-th compared score, so `ranked` chooses among all the
    tied entries by id. The cost is scoring the tied entries whoosh would have skipped and reading
    the id of each entry at or above the k-th compared score.
    """

    def prepare(self, top_searcher, q, context):
        super().prepare(top_searcher, q, context)
        self.best: list[int] = []  # a min-heap of the k highest compared scores so far
        self.kept: list[tuple[int, int]] = []  # (compared score, docnum) of entries that may be in the top k
        self._prune_at = 4 * self.limit

    def _collect(self, global_docnum, score):
        self.total += 1
        compared = compared_score(score)
        best = self.best
        if len(best) < self.limit:
            heappush(best, compared)
        elif compared > best[0]:
            heapreplace(best, compared)
        elif compared < best[0]:
            return 0
        self.kept.append((compared, global_docnum))
        if len(best) == self.limit:
            # One step below the k-th compared score: no raw score that rounds to it is skipped.
            self.minscore = max((best[0] - 1) / SCORE_STEPS, 0.0)
            if len(self.kept) > self._prune_at:
                self.kept = [entry for entry in self.kept if entry[0] >= best[0]]
                self._prune_at = max(4 * self.limit, 2 * len(self.kept))
        return 0 - score

    def ranked(self) -> list[tuple[int, str, int]]:
        """The k best as (compared score, memory id, docnum): by compared score, then by id."""
        line = self.best[0] if len(self.best) >= self.limit else None
        stored_fields = self.top_searcher.stored_fields
        entries = [
            (compared, stored_fields(docnum)["id"], docnum)
            for compared, docnum in self.kept
            if line is None or compared >= line
        ]
        entries.sort(key=lambda entry: (-entry[0], entry[1]))
        return entries[: self.limit]


def _process_lock(path: Path) -> threading.RLock:
    """One lock per index directory, shared by every LexicalIndex of this process."""
    key = os.path.realpath(path)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


def _close_abandoned_files(exc: BaseException) -> None:
    """Close the files whoosh left open when it failed (TOC.read does not close a corrupt TOC)."""
    traceback = exc.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if f"{os.sep}whoosh{os.sep}" in frame.f_code.co_filename:
            for value in frame.f_locals.values():
                if isinstance(value, StructFile):
                    with suppress(Exception):
                        value.close()
        traceback = traceback.tb_next


class _Repeated(Exception):
    """An id given twice to `LexicalIndex.fill`."""


class _Busy(Exception):
    """Another writer holds the index: wait and try again (LexicalIndex._until)."""


class LexicalIndex:
    """BM25F search over active memories in a whoosh directory."""

    def __init__(self, path: str | Path | None = None, *, lock_timeout: float = 30.0):
        self.path = Path(path) if path is not None else Path(settings.MEMORYUI_INDEX_DIR) / INDEX
        self.lock_timeout = lock_timeout
        self._lock = _process_lock(self.path)
        self._ix: whoosh_index.FileIndex | None = None
        # Each thread keeps its open searcher (whoosh searchers are not shared between threads)
        # and the documents of each scope it has filtered on, until the index changes: opening
        # a searcher and collecting a 40k-memory scope cost more than the search itself.
        self._local = threading.local()
        self._searchers: list = []
        self._searchers_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LexicalIndex({str(self.path)!r})"

    @property
    def location(self) -> str:
        return str(self.path)

    # Writing

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace these memories' entries, in one commit."""
        latest = {item.id: item for item in items}  # the same id twice in a batch: the last one wins
        if not latest:
            return
        load_segmenter_for(item.text for item in latest.values())

        def apply(writer) -> None:
            for item in latest.values():
                writer.update_document(**self._fields(item))

        self._write(apply, action="upsert")

    def fill(self, items: Iterable[IndexedMemory], *, replace: bool = False) -> int:
        """Fill an empty index with these memories: one writer, one commit, one segment; how many.

        The index a rebuild's chunked upserts and its optimize leave, without a segment per chunk
        and the merging of them, nor the lookup of each id among the entries already written:
        for building an index from scratch (`health.rebuild`, a benchmark's million memories).
        `items` may be a stream, read once while the writer is held. With `replace`, the index
        may hold entries: the commit drops them all for these, so searches read the old entries
        until then, and no write of another process lands between a reset and the fill.
        ValueError, with nothing written, when an id comes twice, or (without `replace`) when the
        index holds an entry.
        """
        if not replace and self.count():
            raise ValueError(f"fill takes an empty index; {self.path} holds entries")
        if isinstance(items, Sequence):
            load_segmenter_for(item.text for item in items)
        seen: set[str] = set()

        def apply(writer) -> None:
            for item in items:
                if item.id in seen:
                    raise _Repeated(item.id)  # not a storage error: the writer is cancelled, then ValueError
                seen.add(item.id)
                writer.add_document(**self._fields(item))

        try:
            self._write(apply, action="fill", replace=replace)
        except _Repeated as repeated:
            raise ValueError(f"fill takes each memory once; {repeated} came twice") from None
        return len(seen)

    def _fields(self, item: IndexedMemory) -> dict[str, str]:
        fields = {
            "id": item.id,
            "scope": item.scope,
            "kind": item.kind,
            "tier": item.tier,
            "content_hash": self.entry_fingerprint(item.content_hash),
            "text": item.text,
        }
        if item.entity_key:
            fields["entity_key"] = item.entity_key
        if item.tags:
            fields["tags"] = "\n".join(item.tags)
        if level := sample_level(item.id):
            fields["sample"] = " ".join(str(n) for n in range(1, level + 1))
        return fields

    def delete(self, ids: Iterable[str]) -> None:
        """Remove these ids' entries (unknown ids are ignored), in one commit."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return

        def apply(writer) -> None:
            for memory_id in ids:
                writer.delete_by_term("id", memory_id)

        self._write(apply, action="delete")

    def optimize(self) -> None:
        """Merge every segment into one. Each write adds a segment and whoosh merges only the
        small ones; at 100k memories a search over one segment took half as long as over the
        18 a rebuild in chunks left (bench/retrieval_latency.py). About 30 s at 100k, during
        which other writers wait."""
        self._write(lambda writer: None, action="optimize", optimize=True)

    def reset(self) -> None:
        """Start over with an empty index (also the way out of an unreadable one)."""
        deadline = time.monotonic() + self.lock_timeout
        with self._locked(deadline, "reset"), self._storage_errors("reset"):
            storage = FileStorage(str(self.path)).create()

            def start_over() -> None:
                # whoosh's create_index only replaces the table of contents; old segments would stay.
                for entry in os.scandir(self.path):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    elif entry.name != _WRITER_LOCK:
                        os.remove(entry.path)
                storage.create_index(SCHEMA)

            self._with_file_lock(storage, deadline, "reset", start_over)
            self._ix = None

    @staticmethod
    def entry_fingerprint(content_hash: str) -> str:
        """What an up-to-date entry of a memory with this content hash stores."""
        return f"{content_hash}.t{TOKENIZER_VERSION}.l{LAYOUT}"

    # Reading

    def search(self, query: str, *, scopes: list[str] | None = None, k: int = 10) -> list[Hit]:
        """The k best entries for `query` by BM25F, within `scopes` (None: every scope).

        The query is never parsed as whoosh syntax: its tokens, analyzed like the indexed text,
        are OR-ed as plain terms over the text, entity key and tags. Entries are ranked by their
        compared score, then by id; a hit's score is its compared score (`compared_score`).
        """
        if k <= 0 or (scopes is not None and not scopes):
            return []
        terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]
        if not terms:
            return []
        with self._storage_errors("search"):
            searcher, scope_docs = self._searcher()
            weights, frequencies = _term_statistics(searcher, terms)
            allowed = None
            if scopes is not None:
                allowed = set()
                for scope in dict.fromkeys(scopes):
                    if scope not in scope_docs:
                        scope_docs[scope] = frozenset(searcher.docs_for_query(Term("scope", scope)))
                    allowed |= scope_docs[scope]
                if not allowed:
                    return []  # (whoosh reads an empty filter as no filter at all)
            wanted = _bm25_query(terms, frequencies, searcher.doc_count_all())
            allowed, note = _narrowed(searcher, scope_docs, terms, frequencies, allowed, k)
            if allowed is not None and not allowed:
                return Hits(note=note)
            top = _TopWithTies(k)
            matched = collectors.TermsCollector(top)
            searcher.search_with_collector(
                wanted, matched if allowed is None else collectors.FilterCollector(matched, allow=allowed)
            )
            ranked = top.ranked()
            coverage = coverage_of(query, terms, weights)
            return Hits(
                (
                    Hit(
                        id=memory_id,
                        rank=rank,
                        score=compared / SCORE_STEPS,
                        coverage=coverage({text.decode("utf-8") for _f, text in matched.docterms.get(docnum, ())}),
                    )
                    for rank, (compared, memory_id, docnum) in enumerate(ranked, 1)
                ),
                note=note,
            )

    def _searcher(self):
        """This thread's searcher, refreshed when the index changed, and its scope cache."""
        ix = self._index()
        local = self._local
        searcher = getattr(local, "searcher", None)
        if searcher is not None and getattr(local, "ix", None) is ix and searcher.up_to_date():
            return searcher, local.scope_docs
        if searcher is not None:
            # A new searcher, not refresh(): a refreshed one reuses segment readers and kept
            # seeing documents that had been deleted from a reused segment (whoosh 2.7.5).
            self._forget(searcher)
        local.searcher, local.ix, local.scope_docs = ix.searcher(weighting=WEIGHTING), ix, {}
        with self._searchers_lock:
            self._searchers.append(local.searcher)
        return local.searcher, local.scope_docs

    def _forget(self, searcher) -> None:
        with self._searchers_lock:
            if searcher in self._searchers:
                self._searchers.remove(searcher)
        with suppress(Exception):
            searcher.close()
        self._local.searcher = None

    def close(self) -> None:
        """Close the searchers this index opened (in every thread)."""
        with self._searchers_lock:
            searchers, self._searchers = self._searchers, []
        for searcher in searchers:
            with suppress(Exception):
                searcher.close()
        self._local = threading.local()

    def entries(self) -> dict[str, str]:
        """Every indexed id with the content hash it was indexed at."""
        ix = self._index()
        with self._storage_errors("read"), ix.searcher() as searcher:
            return {fields["id"]: fields.get("content_hash", "") for fields in searcher.all_stored_fields()}

    def count(self) -> int:
        ix = self._index()
        with self._storage_errors("count"), ix.searcher() as searcher:
            return searcher.doc_count()

    def info(self) -> dict:
        ix = self._index()
        with self._storage_errors("read"):
            with ix.searcher() as searcher:
                documents = searcher.doc_count()
            segments = len(ix._segments())
            generation = ix.latest_generation()
        size = sum(entry.stat().st_size for entry in os.scandir(self.path) if entry.is_file())
        return {
            "index": INDEX,
            "path": str(self.path),
            "documents": documents,
            "segments": segments,
            "generation": generation,
            "size_bytes": size,
            "scoring": "BM25F",
            "field_boosts": dict(FIELD_BOOSTS),
        }

    # Internals

    def _index(self, deadline: float | None = None) -> whoosh_index.FileIndex:
        """The open index; a missing directory (or one without an index) is created empty."""
        if self._ix is not None and self._has_index():
            return self._ix
        if not self._has_index():
            self._create_empty(deadline if deadline is not None else time.monotonic() + self.lock_timeout)
        try:
            self._ix = whoosh_index.open_dir(str(self.path), schema=SCHEMA)
        except Exception as exc:  # a corrupt TOC fails in many ways (pickle, struct, assert, EOF)
            self._ix = None
            _close_abandoned_files(exc)
            raise IndexUnavailable(INDEX, f"cannot open {self.path}: {exc!r}") from exc
        return self._ix

    def _has_index(self) -> bool:
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:  # not a directory, no permission, I/O error
            raise IndexUnavailable(INDEX, f"cannot read {self.path}: {exc}") from exc
        return any(name.startswith("_MAIN_") and name.endswith(".toc") for name in names)

    def _create_empty(self, deadline: float) -> None:
        with self._locked(deadline, "create"), self._storage_errors("create"):
            storage = FileStorage(str(self.path)).create()

            def create() -> None:
                if self._has_index():  # another process created it meanwhile
                    return
                if self._ix is not None:  # it was there when this instance opened it
                    logger.warning(
                        "BM25 index %s vanished; recreated it empty (rebuild it from the database)", self.path
                    )
                storage.create_index(SCHEMA)

            self._with_file_lock(storage, deadline, "create", create)
            self._ix = None

    def _write(self, apply: Callable, *, action: str, optimize: bool = False, replace: bool = False) -> None:
        """Run `apply` on a writer and commit: merging the small segments, all of them (`optimize`),
        or dropping every segment there was before this writer's own (`replace`)."""
        deadline = time.monotonic() + self.lock_timeout
        with self._locked(deadline, action), self._storage_errors(action):
            writer = self._writer(deadline, action)
            try:
                apply(writer)
                writer.commit(mergetype=writing.CLEAR) if replace else writer.commit(optimize=optimize)
            except BaseException:
                if not writer.is_closed:
                    with suppress(Exception):
                        writer.cancel()
                raise

    def _writer(self, deadline: float, action: str):
        """whoosh's writer, waiting for a writer of another process to finish."""

        def attempt():
            ix = self._index(deadline)
            try:
                return ix.writer()
            except whoosh_index.LockError:
                raise _Busy from None
            except FileNotFoundError:  # the directory vanished since _index(): recreate, try again
                self._ix = None
                raise _Busy from None

        return self._until(deadline, action, attempt)

    def _with_file_lock(self, storage: FileStorage, deadline: float, action: str, work: Callable[[], None]) -> None:
        lock = storage.lock(_WRITER_LOCK)

        def attempt() -> None:
            if not lock.acquire():
                raise _Busy
            try:
                work()
            finally:
                lock.release()

        self._until(deadline, action, attempt)

    def _until(self, deadline: float, action: str, attempt: Callable):
        """`attempt()` until it stops raising _Busy: jittered exponential backoff from 5 ms up to
        200 ms between tries, and IndexUnavailable once `deadline` (time.monotonic) has passed."""

        def gave_up(state: RetryCallState):
            raise IndexUnavailable(
                INDEX, f"{action}: another process held the writer lock of {self.path} for {self.lock_timeout:g} s"
            )

        retrying = Retrying(
            retry=retry_if_exception_type(_Busy),
            wait=wait_exponential_jitter(multiplier=0.005, max=0.2, jitter=0.005),
            stop=lambda state: time.monotonic() >= deadline,
            retry_error_callback=gave_up,
        )
        return retrying(attempt)

    @contextmanager
    def _locked(self, deadline: float, action: str):
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise IndexUnavailable(INDEX, f"{action}: another thread held {self.path} for {self.lock_timeout:g} s")
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def _storage_errors(self, action: str):
        try:
            yield
        except IndexUnavailable:
            raise
        except (OSError, EOFError, ValueError, AssertionError, whoosh_index.IndexError) as exc:
            _close_abandoned_files(exc)
            raise IndexUnavailable(INDEX, f"{action} failed on {self.path}: {exc!r}") from exc
