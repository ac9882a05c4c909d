"""The labelled sets of bench/data, written into a test's store and indexed (helpers for the e2e tests)."""

from __future__ import annotations

import json
from pathlib import Path

from recall.golden import import_labelled, labelled_id, read_labelled
from searchindex.search import search

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def read(name: str) -> tuple[list[dict], list[dict]]:
    """(memories, queries) of bench/data/<name>.json in one shape, whichever format the file has."""
    return read_labelled(json.loads((DATA / f"{name}.json").read_text(encoding="utf-8")))


def load(name: str) -> tuple[list[dict], dict[str, str]]:
    """Import the set (memories through the write path, both indexes synced); (queries, memory id → key)."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    import_labelled(data, name=name, actor="test")
    memories, queries = read_labelled(data)
    return queries, {str(labelled_id(m["key"])): m["key"] for m in memories}


def answer(query: dict, keys: dict[str, str], *, retriever: str = "hybrid", limit: int = 5, floor: bool = True):
    result = search(query["query"], scopes=[query["scope"]], limit=limit, retriever=retriever, floor=floor)
    return [keys[str(found.memory.pk)] for found in result.results]


def recall_at(queries: list[dict], keys: dict[str, str], k: int, **how) -> float:
    """Relevant memories among the first k over min(k, number relevant), averaged over answerable queries."""
    answerable = [q for q in queries if q["relevant"]]
    total = 0.0
    for q in answerable:
        relevant = set(q["relevant"])
        total += len(relevant & set(answer(q, keys, limit=k, **how))) / min(k, len(relevant))
    return total / len(answerable)
