"""Dedup layer 3 (docs/architecture.md "Write path", step 7): a new memory that means what an
active memory of its scope already says is merged into it instead of inserted.

The neighbours come from the vector index, so a memory still waiting in the index outbox (written
moments ago, or in the same transaction) is not seen; `manage.py dedup` clusters the whole store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from searchindex.documents import IndexUnavailable
from searchindex.embeddings import EmbedderUnavailable
from searchindex.indexes import get_index

logger = logging.getLogger(__name__)
NEIGHBOURS = 3


@dataclass(frozen=True)
class Neighbour:
    id: str
    similarity: float  # cosine similarity of the two passages
    verdict: object = None  # the write path's LLM judge: its Verdict, or why there is none


@dataclass(frozen=True)
class Lookup:
    neighbours: list[Neighbour]  # at least `threshold` similar, nearest first
    skipped: str | None = None  # why the lookup could not run
    embedded: tuple[str, np.ndarray] | None = None  # (embedder name, the text's passage vector)


def semantic_neighbours(scope: str, text: str, *, threshold: float) -> Lookup:
    """The indexed memories of `scope` at least `threshold` similar to `text`, nearest first.

    A write never fails because the vector index is down: it only skips this layer, and
    `skipped` says why. The text's vector is returned so the index sync can reuse it.
    """
    try:
        index = get_index("vector")
        embedder = index.embedder
        vector = embedder.embed_passages([text])[0]
        hits = index.search_vector(vector, scopes=[scope], k=NEIGHBOURS)
    except (IndexUnavailable, EmbedderUnavailable) as exc:
        logger.warning("semantic dedup skipped: %s", exc)
        return Lookup([], skipped=f"semantic dedup skipped: {exc}")
    neighbours = [Neighbour(hit.id, hit.score) for hit in hits if hit.score >= threshold]
    return Lookup(neighbours, embedded=(embedder.name, vector))
