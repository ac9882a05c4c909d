"""An outbox row is cleared only once every index the outbox drains holds the change: a sync of
the BM25 index alone (what a bulk import does before it answers) leaves it for the vectors."""

from __future__ import annotations

import pytest

from ingest import writing
from memoryui.models import IndexOutbox
from searchindex import outbox
from searchindex.indexes import get_index

pytestmark = pytest.mark.django_db


def written(text: str) -> str:
    memory, _ = writing.write(actor="test", scope="agent:main", kind="fact", text=text, semantic=False)
    return str(memory.pk)


def test_a_bm25_only_sync_leaves_the_outbox_row_whose_vector_is_still_due(indexes, settings):
    settings.MEMORYUI_LEXICAL = "whoosh"
    pk = written("The backup job runs on Sundays.")
    outbox.sync_memories([pk], indexes=("bm25",))
    assert pk in get_index("bm25").entries() and pk not in get_index("vector").entries()
    assert IndexOutbox.objects.filter(memory_id=pk).exists()

    outbox.sync_memories([pk], indexes=("vector",))  # the vector alone does not know the BM25 entry is there
    assert IndexOutbox.objects.filter(memory_id=pk).exists()
    outbox.sync_memories([pk])
    assert not IndexOutbox.objects.filter(memory_id=pk).exists()


def test_a_sync_of_both_indexes_clears_the_row(indexes):
    pk = written("The staging database is read-only on Fridays.")
    outbox.sync_memories([pk])
    assert pk in get_index("vector").entries() and not IndexOutbox.objects.exists()
