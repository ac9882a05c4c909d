"""Test doubles: servers that speak real protocols, so client code runs unchanged, and a
fast stand-in embedder."""

from __future__ import annotations

import numpy as np

from searchindex.embeddings import Embedder
from tests.fakes.openai_server import fake_embedding


class HashEmbedder(Embedder):
    """A fast stand-in model: deterministic vectors from a hash of the text, no meaning.

    Only identical texts are similar; use it where the test is about the index, not recall quality.
    """

    def __init__(self, name: str = "hash:sha256@1", dim: int = 8):
        self.name = name
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def _embed_batch(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        return np.stack([fake_embedding(text, self._dim) for text in texts])
