"""mem0's get_all export: `{"results": [...]}` or a bare list of memories, each with `id`, `memory`
(the text), `hash`, `metadata`, `user_id` / `agent_id` / `run_id`, `created_at`, `updated_at`
and, on the platform, `categories`.

Scope: `--scope` when given; else `user:<user_id>`, else `agent:<agent_id>`, else
`session:<run_id>`. The user comes first: mem0 keeps memories about a user, and one user's
memories must not be split by the agent that heard them (the agent and run stay in metadata).
Kind: mem0 writes extracted facts, so `fact`, unless a category says otherwise (CATEGORY_KINDS).
An item's other fields (`immutable`, `structured_attributes`, `relations`, …) are kept in
`metadata.origin.fields`, and an export writes them back; a document's graph `relations` are
not memories and are passed over, said in `skipped_files`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime

from ingest.memoryfiles import Candidate, FormatError, Parsed, SourceFile, decode, stable_id
from memoryui import jsontext, rules
from memoryui.rules import Kind

FORMAT = "mem0"
EXTRACTED = 0.7  # what an LLM extractor wrote: the working tier
# The first of a memory's categories found here gives its kind; mem0's platform categories.
CATEGORY_KINDS = {
    "personal_details": Kind.ENTITY,
    "family": Kind.RELATIONSHIP,
    "user_preferences": Kind.PREFERENCE,
    "food": Kind.PREFERENCE,
    "music": Kind.PREFERENCE,
    "fashion": Kind.PREFERENCE,
    "entertainment": Kind.PREFERENCE,
    "hobbies": Kind.PREFERENCE,
}
_OWNERS = (("user_id", "user"), ("agent_id", "agent"), ("run_id", "session"))
# An item's fields read into a memory's own; the rest are kept as they are (origin.fields).
READ_KEYS = {"id", "memory", "hash", "metadata", "user_id", "agent_id", "run_id", "app_id", "categories"}
READ_KEYS |= {"created_at", "updated_at"}


def items_of(data: object) -> list | None:
    """The memories of a get_all body, or None when it is not one."""
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return data["results"]
    if isinstance(data, list) and any(isinstance(item, dict) and "memory" in item for item in data):
        return data  # an item that is not a memory is an error of its own
    return None


def looks_like(text: str) -> bool:
    """A get_all body; or JSON that memoryui.jsontext refuses (nested too deep, too large), taken
    as meant for this format, so the import names the file and says why rather than call it no
    export."""
    try:
        return items_of(jsontext.loads(text)) is not None
    except jsontext.JSONTextError as exc:
        return exc.code in (jsontext.TOO_DEEP, jsontext.TOO_LARGE)


def _time(value: object) -> str | None:
    """mem0's time as ISO 8601 with a zone (a naive one is UTC, as mem0 stores it)."""
    if value in (None, ""):
        return None
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


def parse(files: Iterable[SourceFile], *, scope: str | None) -> Parsed:
    parsed = Parsed()
    for source in files:
        text = decode(source, parsed)
        if text is None:
            continue
        try:
            data = jsontext.loads(text)
        except jsontext.JSONTextError as exc:
            parsed.error(source.name, exc.line or 1, f"not JSON: {exc}" if exc.code == jsontext.SYNTAX else str(exc))
            continue
        items = items_of(data)
        if items is None:
            parsed.error(source.name, 1, 'not a mem0 export: expected {"results": [{"id", "memory", …}]} or a list')
            continue
        _skip_graph_relations(source.name, data, parsed)
        for number, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                parsed.error(source.name, number, f"results[{number - 1}]: not a JSON object")
                continue
            try:
                record = _record(item, scope)
            except (FormatError, ValueError) as exc:
                parsed.error(source.name, number, f"results[{number - 1}] ({str(item.get('id'))[:40]}): {exc}")
                continue
            parsed.candidates.append(Candidate(source.name, number, record))
    return parsed


def _skip_graph_relations(name: str, data: object, parsed: Parsed) -> None:
    """Say that a document's graph relations (mem0 with a graph store) were not imported."""
    relations = data.get("relations") if isinstance(data, dict) else None
    if isinstance(relations, list) and relations:
        parsed.skip(name, 1, f"relations: {len(relations)} graph relation(s) of mem0's graph store are not memories")


def _record(item: dict, scope: str | None) -> dict:
    """One mem0 memory as a JSONL record; `line` of the candidate is the item's position."""
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FormatError("metadata must be an object")
    ours = metadata.get("memoryui")
    if isinstance(ours, dict):  # written by memoryui's export: every field of ours
        record = {key: value for key, value in ours.items() if key != "text"}
        record["text"] = item.get("memory")
        if scope is not None:
            record["scope"] = scope
        return record
    mem0_id = item.get("id")
    if not isinstance(mem0_id, str) or not mem0_id.strip():
        raise FormatError("has no id")
    if scope is None:
        owner = next(((key, prefix) for key, prefix in _OWNERS if item.get(key)), None)
        if owner is None:
            raise FormatError("has no user_id, agent_id or run_id: choose a scope (--scope)")
        try:
            scope = rules.normalize_scope(f"{owner[1]}:{item[owner[0]]}")
        except rules.ScopeError as exc:
            raise FormatError(f"{owner[0]} {str(item[owner[0]])[:40]!r} is not usable as a scope ({exc})") from None
    categories = item.get("categories") or []
    kind = (
        next((CATEGORY_KINDS[c] for c in categories if c in CATEGORY_KINDS), Kind.FACT)
        if isinstance(categories, list)
        else Kind.FACT
    )
    # Not the file's name: the next export of the same store, under another name, holds the same memories.
    origin = {"format": FORMAT, "id": mem0_id, "hash": item.get("hash")}
    for key in ("user_id", "agent_id", "run_id", "app_id", "categories"):
        origin[key] = item.get(key)
    if metadata:
        origin["metadata"] = metadata
    if others := {key: value for key, value in item.items() if key not in READ_KEYS}:
        origin["fields"] = others
    record = {
        "id": str(stable_id(FORMAT, scope, mem0_id)),
        "scope": scope,
        "kind": kind,
        "text": item.get("memory"),
        "confidence": EXTRACTED,
        "source": "import",
        "metadata": {"origin": {key: value for key, value in origin.items() if value not in (None, "", [])}},
    }
    for key in ("created_at", "updated_at"):
        if (value := _time(item.get(key))) is not None:
            record[key] = value
    return record


# --- export --------------------------------------------------------------------------------


def export_item(record: dict) -> dict:
    """One memory as a mem0 memory: mem0's own fields, every field of ours in metadata.memoryui."""
    origin = (record.get("metadata") or {}).get("origin") or {}
    from_mem0 = isinstance(origin, dict) and origin.get("format") == FORMAT
    kind, _, owner = record["scope"].partition(":")
    item = {
        "id": origin["id"] if from_mem0 and origin.get("id") else record["id"],
        "memory": record["text"],
        "hash": hashlib.md5(record["text"].encode("utf-8")).hexdigest(),  # noqa: S324 - what mem0 computes
        "metadata": {"memoryui": {key: record[key] for key in sorted(record) if key != "text"}},
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
    }
    owner_key = {"user": "user_id", "agent": "agent_id", "session": "run_id"}.get(kind)
    if owner_key:
        item[owner_key] = owner
    if from_mem0 and isinstance(origin.get("categories"), list):
        item["categories"] = origin["categories"]
    if from_mem0 and isinstance(origin.get("fields"), dict):
        item.update({key: value for key, value in origin["fields"].items() if key not in READ_KEYS})
    return item


def export_document(records: list[dict]) -> str:
    return json.dumps({"results": [export_item(r) for r in records]}, ensure_ascii=False, indent=2) + "\n"
