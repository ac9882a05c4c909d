"""Fixtures of the vector index tests: where the index lives, and indexes closed at the end."""

from __future__ import annotations

import pytest

from searchindex.vector import VectorIndex
from tests.fakes import HashEmbedder
from tests.searchindex.hashed_vectors import DIM


@pytest.fixture(params=["embedded", "server"])
def backend(request, tmp_path):
    """Where the index lives: `{"path": ...}` or `{"url": ...}` of a real `chroma run` server."""
    if request.param == "embedded":
        return {"path": tmp_path / "chroma"}
    return {"url": request.getfixturevalue("chroma_server").url}


@pytest.fixture
def hashed_index():
    """Open VectorIndexes with HashEmbedder vectors of DIM dimensions, closed at the end."""
    opened = []

    def open_(**where) -> VectorIndex:
        index = VectorIndex(embedder=HashEmbedder(dim=DIM), **where)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()
