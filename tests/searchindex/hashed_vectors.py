"""What the vector index tests share: memories with HashEmbedder vectors (random directions with no
meaning, whose true nearest neighbours numpy computes by brute force), and random query vectors."""

from __future__ import annotations

import numpy as np

from searchindex.documents import IndexedMemory
from searchindex.vector import VectorIndex

SCOPE = "agent:main"
DIM = 32


def memories(count: int, *, scope: str = SCOPE, start: int = 0, word: str = "memory") -> list[IndexedMemory]:
    return [
        IndexedMemory(
            id=f"00000000-0000-0000-0000-{n:012d}",
            scope=scope,
            kind="fact",
            tier="working",
            pinned=False,
            text=f"{word} number {n}",
            content_hash=f"h-{n}-{word}",
        )
        for n in range(start, start + count)
    ]


def exact_top(index: VectorIndex, items: list[IndexedMemory], query: np.ndarray, k: int) -> list[str]:
    """The ids of the k items nearest to `query` by brute force."""
    stored = index.embedder.embed_passages([item.text for item in items])
    order = np.argsort(-(stored @ query), kind="stable")[:k]
    return [items[n].id for n in order]


def queries(count: int, seed: int = 3) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)
