"""The process's open search indexes: the vector index (chromadb) and the BM25 index (whoosh or PostgreSQL).

The database is the source of truth; each index holds a derived copy of every active memory.
`searchindex.outbox` keeps them in step with the database, `searchindex.health` verifies,
repairs and rebuilds them.
"""

from __future__ import annotations

import threading

from django.conf import settings

from searchindex.lexical import LexicalIndex
from searchindex.lexical_postgres import PostgresLexicalIndex
from searchindex.vector import VectorIndex

_lock = threading.Lock()
_indexes: dict[str, object] = {}

INDEX_NAMES = ("vector", "bm25")
CHUNK = 500


def get_index(name: str):
    """The process's open index by name ("vector" or "bm25"), opened on first use."""
    with _lock:
        if name not in _indexes:
            _indexes[name] = _open(name)
        return _indexes[name]


def _open(name: str):
    if name == "vector":
        return VectorIndex()
    if name == "bm25":
        return PostgresLexicalIndex() if settings.MEMORYUI_LEXICAL == "postgres" else LexicalIndex()
    raise ValueError(f"unknown index {name!r}; one of {', '.join(INDEX_NAMES)}")


def engine(name: str) -> str:
    """What serves this index as configured: whoosh or PostgreSQL, chromadb embedded or a server."""
    if name == "bm25":
        return "PostgreSQL" if settings.MEMORYUI_LEXICAL == "postgres" else "whoosh"
    return "chromadb server" if settings.CHROMA_URL else "chromadb"


def kept_in_step(name: str) -> bool:
    """Whether this index is written inside each memory's own write transaction (the PostgreSQL
    lexical index): the outbox then has nothing to do for it, and it is never behind."""
    return name == "bm25" and settings.MEMORYUI_LEXICAL == "postgres"


def drained_by_outbox() -> tuple[str, ...]:
    """The indexes the outbox brings in step after commit: those not kept in step by the write."""
    return tuple(name for name in INDEX_NAMES if not kept_in_step(name))


def close_indexes() -> None:
    """Close and forget the open indexes (settings changed, or the directory was replaced)."""
    with _lock:
        for opened in _indexes.values():
            close = getattr(opened, "close", None)
            if close:
                close()
        _indexes.clear()
