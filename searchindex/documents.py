"""What the search indexes hold and answer: plain values shared by the vector and BM25 indexes.

The database is the source of truth; an index holds a derived copy of each *active* memory,
tagged with the memory's content hash so a stale entry can be told from a current one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IndexedMemory:
    """One active memory as the indexes see it."""

    id: str  # the memory's UUID as a string
    scope: str
    kind: str
    tier: str
    pinned: bool
    text: str
    content_hash: str  # the entry's fingerprint: text hash + every field the index keeps
    entity_key: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_memory(cls, memory) -> IndexedMemory:
        tags = (memory.metadata or {}).get("tags") or ()
        tags = tuple(str(tag) for tag in tags if isinstance(tag, str | int)) if isinstance(tags, list) else ()
        values = {
            "id": str(memory.pk),
            "scope": memory.scope,
            "kind": memory.kind,
            "tier": memory.tier,
            "pinned": memory.pinned,
            "text": memory.text,
            "entity_key": memory.entity_key,
            "tags": tags,
        }
        # The entry's fingerprint covers everything an index stores or filters on, so a
        # changed tier or pin shows up as a stale entry, not only a changed text.
        signature = json.dumps([memory.content_hash, *(values[k] for k in sorted(values) if k != "text")])
        return cls(**values, content_hash=hashlib.sha256(signature.encode()).hexdigest()[:32])


@dataclass(frozen=True)
class Hit:
    """One retriever's answer for one memory: its 1-based rank and raw score.

    `score` is cosine similarity for the vector index and the BM25F score for the lexical one.
    `coverage` (lexical hits only) is the share of the query's terms the memory contains,
    each term weighted by its inverse document frequency: 1.0 when it holds every query term,
    0.2 when it shares only common ones. It says how much of the query a lexical hit answers,
    which the raw BM25 score (unbounded, growing with rare terms) cannot.
    """

    id: str
    rank: int
    score: float
    coverage: float | None = None


class Hits(list):
    """A retriever's hits in rank order, with a note for the reader when they are not the plain
    ranking of every candidate (a BM25 query narrowed to a sample: `searchindex.lexical.narrowing`)."""

    def __init__(self, hits=(), note: str | None = None):
        super().__init__(hits)
        self.note = note


class IndexUnavailable(Exception):
    """An index could not be reached or opened (e.g. the chromadb server is down)."""

    def __init__(self, index: str, message: str):
        self.index = index
        super().__init__(f"{index} index unavailable: {message}")
