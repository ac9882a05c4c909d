"""The labelled sets of bench/data, written into a test's store and indexed (helpers for the e2e tests)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from memoryui.models import Memory
from recall import index
from recall.search import search

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def read(name: str) -> tuple[list[dict], list[dict]]:
    """(memories, queries) of bench/data/<name>.json in one shape, whichever format the file has.

    Conversations give one `fact` per observation, dated by its session, and one query per
    question with its evidence as the relevant keys.
    """
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    if "conversations" not in data:
        return data["memories"], data["queries"]
    memories, queries = [], []
    for conversation in data["conversations"]:
        dates = {s["id"]: s["date"] for s in conversation["sessions"]}
        memories += [
            {"key": o["key"], "scope": conversation["scope"], "kind": "fact", "text": o["text"],
             "created_at": f"{dates[o['session']]}T12:00:00+00:00"}
            for o in conversation["observations"]
        ]  # fmt: skip
        queries += [
            {"id": q["id"], "query": q["question"], "scope": conversation["scope"], "type": q["type"],
             "relevant": q["evidence"]}
            for q in conversation["questions"]
        ]  # fmt: skip
    return memories, queries


def load(name: str) -> tuple[list[dict], dict[str, str]]:
    """Write the set's memories through the write path, rebuild both indexes; (queries, memory id → key)."""
    memories, queries = read(name)
    keys = {}
    for m in memories:
        fields = {"scope": m["scope"], "kind": m["kind"], "text": m["text"], "confidence": 0.9}
        if m.get("entity_key"):
            fields["entity_key"] = m["entity_key"]
        if m.get("tags"):
            fields["metadata"] = {"tags": m["tags"]}
        memory, created = Memory.objects.write(actor="test", semantic=False, **fields)
        assert created, m["key"]
        if m.get("created_at"):
            when = datetime.fromisoformat(m["created_at"])
            Memory.objects.filter(pk=memory.pk).update(created_at=when, updated_at=when)
        keys[str(memory.pk)] = m["key"]
    index.rebuild()
    return queries, keys


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
