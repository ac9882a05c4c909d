"""Memory JSONL: import lines faithfully (or through dedup) and export them back identically.

Plain functions; the import_memories, export_memories and seed_demo commands are thin
wrappers around them. A line is one JSON object with the fields in FIELDS.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

from django.conf import settings
from django.db import DataError, IntegrityError, connections, models, router, transaction
from django.utils import timezone

from memoryui import jsontext, rules, untrusted
from memoryui.models import Memory, MemoryEvent, queue_index_sync
from memoryui.reports import Report

CHUNK_SIZE = 1000
IMPORT_ACTOR = "import"

# Every field a line may carry; an export writes all of them (content_hash is derived).
FIELDS = (
    "id", "scope", "kind", "text", "tier", "importance", "confidence", "pinned", "status", "source",
    "entity_key", "metadata", "created_at", "updated_at", "accessed_at", "access_count", "expires_at",
    "tombstone_reason", "tombstoned_at",
)  # fmt: skip
# What a restore carries beyond the writable fields; rules.clean_memory_fields checks the rest.
_RESTORE_FIELDS = frozenset(
    {"id", "created_at", "updated_at", "accessed_at", "access_count", "tombstone_reason", "tombstoned_at"}
)
MAX_ACCESS_COUNT = 2**31 - 1  # what a PositiveIntegerField holds on every backend
_TIMESTAMPS = ("created_at", "updated_at", "accessed_at", "expires_at", "tombstoned_at")
_PROBLEMS_SHOWN = 3  # a line's problems named in its error; the rest are counted


# --- parsing and validation (no database) --------------------------------------------------


def parse_record(data: dict, *, scope: str | None = None) -> dict:
    """Validate one line's object and return the fields it sets, cleaned.

    `scope` (already normalized) replaces the line's scope. A null optional field counts
    as absent, except entity_key, expires_at, accessed_at and tombstoned_at, where null is
    a value. Raises rules.MemoryValidationError naming each bad field.
    """
    if scope is not None:
        data = {**data, "scope": scope}
    errors: dict[str, list[str]] = {}
    try:
        clean = rules.clean_memory_fields(
            {key: value for key, value in data.items() if key not in _RESTORE_FIELDS},
            text_max_length=settings.MEMORYUI_TEXT_MAX_LENGTH,
        )
    except rules.MemoryValidationError as exc:
        errors.update(exc.errors)
        clean = {}

    if data.get("id") is not None:
        try:
            if not isinstance(data["id"], str):
                raise ValueError
            clean["id"] = uuid.UUID(data["id"])
        except ValueError:
            errors.setdefault("id", []).append(f"{data['id']!r} is not a UUID")
    for name in ("created_at", "updated_at", "accessed_at", "tombstoned_at"):
        if name not in data:
            continue
        try:
            value = rules.parse_datetime_value(data[name])
        except (ValueError, OverflowError) as exc:
            errors.setdefault(name, []).append(str(exc))
            continue
        if value is not None or name in ("accessed_at", "tombstoned_at"):
            clean[name] = value
    if data.get("access_count") is not None:
        count = data["access_count"]
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_ACCESS_COUNT:
            errors.setdefault("access_count", []).append(f"must be a whole number from 0 to {MAX_ACCESS_COUNT}")
        else:
            clean["access_count"] = count
    if data.get("tombstone_reason") is not None:
        if isinstance(data["tombstone_reason"], str):
            clean["tombstone_reason"] = data["tombstone_reason"]
        else:
            errors.setdefault("tombstone_reason", []).append("must be a string")

    # The model's invariants: a tombstone has a reason; an active memory has no tombstone.
    status = clean.get("status") or "active"
    if status == "tombstoned" and not clean.get("tombstone_reason", "").strip():
        errors.setdefault("tombstone_reason", []).append("a tombstoned memory needs a reason")
    if status == "active":
        if clean.get("tombstone_reason"):
            errors.setdefault("tombstone_reason", []).append("only a tombstoned memory has one")
        if clean.get("tombstoned_at"):
            errors.setdefault("tombstoned_at", []).append("only a tombstoned memory has one")
    if errors:
        raise rules.MemoryValidationError(errors)
    return clean


_JSON_TYPE_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _load_line(raw: str) -> dict:
    """The line's object, or ValueError saying why it is not one a memory can be made of.

    The line is read by memoryui.jsontext (nested at most untrusted.MAX_JSON_DEPTH levels, no
    larger than the API takes, no NaN or number past a float's range); every string (keys
    included) must be storable as text. The error names the JSON path of each problem.
    """
    try:
        data = jsontext.loads(raw)
    except jsontext.JSONTextError as exc:
        if exc.code == jsontext.SYNTAX:
            raise ValueError(f"malformed JSON: {exc.reason} (column {exc.column})") from None
        if exc.code == jsontext.TOO_DEEP and exc.path:
            raise ValueError(f"{exc.path}: {exc.reason}") from None
        raise ValueError(f"malformed JSON: {exc.reason}") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object (got {_JSON_TYPE_NAMES.get(type(data), 'null')})")
    problems = [f"{where}: {reason}" for where, reason in islice(untrusted.json_problems(data), _PROBLEMS_SHOWN + 1)]
    if len(problems) > _PROBLEMS_SHOWN:
        problems[_PROBLEMS_SHOWN:] = ["(and more)"]
    if problems:
        raise ValueError("; ".join(problems))
    return data


def parse_lines(lines: Iterable[bytes | str], *, scope: str | None = None) -> tuple[list[tuple[int, dict]], list[dict]]:
    """Parse and validate every line; return ([(line number, fields)], [{"line", "error"}]).

    Blank lines are ignored; an id used twice in the file is an error on its second line.
    """
    valid: list[tuple[int, dict]] = []
    errors: list[dict] = []
    first_line_of: dict[uuid.UUID, int] = {}
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                errors.append({"line": number, "error": "not valid UTF-8"})
                continue
        if number == 1:
            raw = raw.removeprefix("\ufeff")
        if not raw.strip():
            continue
        try:
            fields = parse_record(_load_line(raw), scope=scope)
        except ValueError as exc:  # MemoryValidationError is a ValueError too
            errors.append({"line": number, "error": str(exc)})
            continue
        except OverflowError:  # an integer too big for a float, e.g. an importance of 10**400 in digits
            errors.append({"line": number, "error": "a number is too large"})
            continue
        if "id" in fields:
            if fields["id"] in first_line_of:
                first = first_line_of[fields["id"]]
                errors.append({"line": number, "error": f"id: {fields['id']} is already used on line {first}"})
                continue
            first_line_of[fields["id"]] = number
        valid.append((number, fields))
    return valid, errors


# --- building and inserting rows ---------------------------------------------------------


def new_memory(fields: dict, *, now: datetime | None = None) -> Memory:
    """An unsaved Memory from parsed fields; what they leave out is derived as the write path does."""
    now = now or timezone.now()
    confidence = fields.get("confidence", 0.7)
    placement = rules.place_memory(
        fields["kind"],
        confidence,
        entity_key=fields.get("entity_key"),
        peripheral_ttl_days=settings.MEMORYUI_PERIPHERAL_TTL_DAYS,
    )
    tier = fields.get("tier") or placement.tier
    status = fields.get("status") or Memory.Status.ACTIVE
    created_at = fields.get("created_at") or now
    if "expires_at" in fields:
        expires_at = fields["expires_at"]
    elif tier == Memory.Tier.PERIPHERAL and placement.ttl_days:
        expires_at = now + timedelta(days=placement.ttl_days)
    else:
        expires_at = None
    tombstoned_at = fields.get("tombstoned_at")
    if status == Memory.Status.TOMBSTONED and tombstoned_at is None:
        tombstoned_at = now
    return Memory(
        id=fields.get("id") or uuid.uuid4(),
        scope=fields["scope"],
        kind=fields["kind"],
        tier=tier,
        text=fields["text"],
        importance=fields.get("importance", placement.importance),
        confidence=confidence,
        pinned=fields.get("pinned", placement.pinned),
        status=status,
        tombstone_reason=fields.get("tombstone_reason", ""),
        tombstoned_at=tombstoned_at,
        source=fields.get("source") or Memory.Source.IMPORT,
        entity_key=fields.get("entity_key"),
        content_hash=rules.content_hash(fields["text"]),
        access_count=fields.get("access_count", 0),
        accessed_at=fields.get("accessed_at"),
        expires_at=expires_at,
        metadata=fields.get("metadata", {}),
        created_at=created_at,
        updated_at=fields.get("updated_at") or created_at,
    )


def insert_memories(memories: list[Memory], *, actor: str, batch: uuid.UUID | None = None) -> int:
    """Insert memories exactly as given (no dedup), each with a `created` event; return the count.

    No Memory.save() runs, so content_hash must already be set (new_memory does). Call
    inside a transaction: a failing chunk raises IntegrityError.
    """
    for start in range(0, len(memories), CHUNK_SIZE):
        chunk = memories[start : start + CHUNK_SIZE]
        _insert_rows(Memory, chunk)
        queue_index_sync([memory.pk for memory in chunk], memories=chunk)
        _insert_rows(
            MemoryEvent,
            [
                MemoryEvent(memory=memory, action="created", actor=actor, after=memory.snapshot(), batch=batch)
                for memory in chunk
            ],
        )
    return len(memories)


def _insert_rows(model: type[models.Model], objects: list[models.Model]) -> None:
    """INSERT `objects` with one statement run for every row (executemany): a lean bulk_create.

    bulk_create compiles SQL for every row and, on SQLite, splits at 999 parameters (52
    memories a statement); that made the insert step of a 100k-line import twice as slow. Values are
    prepared as bulk_create prepares them (pre_save, get_db_prep_save); an auto primary key
    is left to the database and not read back.
    """
    if not objects:
        return
    connection = connections[router.db_for_write(model)]
    fields = [f for f in model._meta.concrete_fields if f is not model._meta.auto_field]
    quote = connection.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields), ", ".join(["%s"] * len(fields))
    )
    rows = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields] for obj in objects]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
    for obj in objects:
        obj._state.adding = False
        obj._state.db = connection.alias


# --- import ------------------------------------------------------------------------------


@dataclass
class ImportReport(Report):
    """What an import did (or, with `dry_run`, would do). `updated` counts lines whose id existed
    with different content; `preview` (a dry run only) says per memory what would happen."""

    imported: int = 0
    updated: int = 0
    merged: int = 0
    skipped: int = 0
    errors: list[dict] = field(default_factory=list)
    batch: uuid.UUID | None = None
    # Of the lines whose id is a memory in another scope: imported as copies (new ids), or found
    # as copies an earlier import made there (then counted as skipped or updated as well).
    copied: int = field(default=0, metadata={"omit_empty": True})
    dry_run: bool | None = field(default=None, metadata={"omit_empty": True})  # True, or left out
    preview: list[dict] = field(default_factory=list, metadata={"omit_empty": True})


# What a dry run calls each step: new, unchanged, updated; a dedup step is new or merged.
_PREVIEW_ACTIONS = {"create": "new", "skip": "unchanged", "update": "updated"}


@dataclass
class _Step:
    line: int
    action: str  # create, update, skip or dedup
    memory: Memory
    fields: dict
    changes: dict = field(default_factory=dict)
    copied: bool = False  # the line's id is a memory in another scope: this is a copy of it


class _Rollback(Exception):
    pass


def _existing_by_id(ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    found: dict[uuid.UUID, Memory] = {}
    for start in range(0, len(ids), CHUNK_SIZE):
        found.update(Memory.objects.in_bulk(ids[start : start + CHUNK_SIZE]))
    return found


def _entity_key_holders(keys: set[str]) -> dict[tuple[str, str], tuple[uuid.UUID, int | None]]:
    """(scope, entity_key) -> (id of the active memory holding it, None = in the database)."""
    holders: dict[tuple[str, str], tuple[uuid.UUID, int | None]] = {}
    keys_list = sorted(keys)
    for start in range(0, len(keys_list), CHUNK_SIZE):
        rows = Memory.objects.active().filter(entity_key__in=keys_list[start : start + CHUNK_SIZE])
        for pk, scope, key in rows.values_list("id", "scope", "entity_key"):
            holders[(scope, key)] = (pk, None)
    return holders


def _plan(
    valid: list[tuple[int, dict]], *, dedup: bool, allow_move: bool, now: datetime
) -> tuple[list[_Step], list[dict]]:
    """Decide what each valid line does, checking it against the database and earlier lines.

    A line never moves an existing memory to another scope unless `allow_move`: a scope is
    an agent's or a user's memory, and a move is not what a restore is expected to do. A line
    whose id is a memory in another scope is imported as a copy: an id of its own, the original
    in `metadata.copied_from`; importing the same line there again finds that copy.
    """
    existing = _existing_by_id([fields["id"] for _, fields in valid if "id" in fields])
    holders = _entity_key_holders({fields["entity_key"] for _, fields in valid if fields.get("entity_key")})
    copies = {} if allow_move else _copies_of([f for _, f in valid if _elsewhere(f, existing)])
    steps: list[_Step] = []
    errors: list[dict] = []
    copy_lines: set[int] = set()
    for number, fields in valid:
        current = existing.get(fields.get("id"))
        if current is not None and current.scope != fields["scope"] and not allow_move:
            # Into another scope: a copy with an id of its own (or the one an earlier import made).
            fields = _as_copy(fields, current)
            current = copies.get((fields["scope"], str(current.pk)))
            if current is not None:
                fields["id"] = current.pk
            copy_lines.add(number)
        if current is not None:
            changes = {
                name: value for name, value in fields.items() if name != "id" and getattr(current, name) != value
            }
            if not changes:
                steps.append(_Step(number, "skip", current, fields))
                continue
            # A status change brings the tombstone fields along unless the line sets them.
            if changes.get("status") == Memory.Status.TOMBSTONED:
                changes.setdefault("tombstoned_at", fields.get("tombstoned_at") or now)
            elif changes.get("status") == Memory.Status.ACTIVE:
                changes.setdefault("tombstone_reason", "")
                changes.setdefault("tombstoned_at", None)
            step = _Step(number, "update", current, fields, changes)
            scope = changes.get("scope", current.scope)
            key = changes.get("entity_key", current.entity_key)
            status = changes.get("status", current.status)
        else:
            memory = new_memory(fields, now=now)
            if dedup and memory.status == Memory.Status.ACTIVE:
                # The write path's dedup decides at write time; an entity key match is a merge.
                steps.append(_Step(number, "dedup", memory, fields))
                continue
            step = _Step(number, "create", memory, fields)
            scope, key, status = memory.scope, memory.entity_key, memory.status

        if key and status == Memory.Status.ACTIVE:
            holder = holders.get((scope, key))
            if holder and holder[0] != step.memory.pk:
                where = f"on line {holder[1]}" if holder[1] else f"by active memory {holder[0]}"
                errors.append({"line": number, "error": f"entity_key: {key} is already used {where} in {scope}"})
                continue
        if current is not None and current.entity_key and current.status == Memory.Status.ACTIVE:
            old = (current.scope, current.entity_key)
            if holders.get(old, (None,))[0] == current.pk:
                del holders[old]
        if key and status == Memory.Status.ACTIVE:
            holders[(scope, key)] = (step.memory.pk, number)
        steps.append(step)
    for step in steps:
        step.copied = step.line in copy_lines
    return steps, errors


def _elsewhere(fields: dict, existing: dict[uuid.UUID, Memory]) -> bool:
    """Whether the line's id is a memory in another scope than the line's."""
    current = existing.get(fields.get("id"))
    return current is not None and current.scope != fields["scope"]


def _copies_of(lines: list[dict]) -> dict[tuple[str, str], Memory]:
    """(scope, original id) -> the copy an earlier import made there, for lines whose id lives elsewhere."""
    ids = sorted({str(fields["id"]) for fields in lines})
    scopes = {fields["scope"] for fields in lines}
    found: dict[tuple[str, str], Memory] = {}
    for start in range(0, len(ids), CHUNK_SIZE):
        rows = Memory.objects.filter(scope__in=scopes, metadata__copied_from__id__in=ids[start : start + CHUNK_SIZE])
        for memory in rows:
            found[(memory.scope, memory.metadata["copied_from"]["id"])] = memory
    return found


def _as_copy(fields: dict, original: Memory) -> dict:
    """The line as a copy of `original` in the line's scope: no id of its own yet, the original named
    in `metadata.copied_from`."""
    copy = {name: value for name, value in fields.items() if name != "id"}
    copy["metadata"] = {
        **(fields.get("metadata") or {}),
        "copied_from": {"id": str(original.pk), "scope": original.scope},
    }
    return copy


def _apply_update(step: _Step, *, actor: str, batch: uuid.UUID, now: datetime) -> None:
    memory, changes = step.memory, dict(step.changes)
    left = memory.scope
    reason = "re-imported with changes"
    if "scope" in changes:
        reason = f"re-imported with changes, moved from {memory.scope} to {changes['scope']} (--allow-move)"
    before = memory.snapshot(list(changes))
    for name, value in changes.items():
        setattr(memory, name, value)
    after = memory.snapshot(list(changes))
    if "text" in changes:
        changes["content_hash"] = memory.content_hash = rules.content_hash(memory.text)
    if "updated_at" not in changes:
        changes["updated_at"] = memory.updated_at = now
    Memory.objects.filter(pk=memory.pk).update(**changes)
    queue_index_sync([memory.pk], moved_from={memory.pk: left} if memory.scope != left else None)
    memory.record("edited", actor=actor, before=before, after=after, reason=reason, batch=batch)


def _write(steps: list[_Step], report: ImportReport, *, atomic: bool, actor: str, now: datetime) -> None:
    """Carry out the plan; each line all-or-nothing (savepoints), the whole file if `atomic`."""

    def line_failed(step: _Step, exc: IntegrityError | DataError) -> None:
        report.errors.append({"line": step.line, "error": f"rejected by the database: {exc}"})
        if atomic:
            raise _Rollback

    for start in range(0, len(steps), CHUNK_SIZE):
        chunk = steps[start : start + CHUNK_SIZE]
        # Updates first: one may free an entity key that a later new line takes.
        for step in (s for s in chunk if s.action == "update"):
            try:
                with transaction.atomic():
                    _apply_update(step, actor=actor, batch=report.batch, now=now)
                report.updated += 1
            except (IntegrityError, DataError) as exc:
                line_failed(step, exc)
        creates = [s for s in chunk if s.action == "create"]
        try:
            with transaction.atomic():
                report.imported += insert_memories([s.memory for s in creates], actor=actor, batch=report.batch)
        except (IntegrityError, DataError):
            # Validation should have caught it (a concurrent writer?): find the lines, keep the rest.
            for step in creates:
                try:
                    with transaction.atomic():
                        report.imported += insert_memories([step.memory], actor=actor, batch=report.batch)
                except (IntegrityError, DataError) as exc:
                    line_failed(step, exc)
        for step in (s for s in chunk if s.action == "dedup"):
            try:
                with transaction.atomic():
                    memory = step.memory
                    duplicate = Memory.objects.select_for_update().find_duplicate(
                        memory.scope, memory.content_hash, memory.entity_key
                    )
                    if duplicate:
                        existing, layer = duplicate
                        existing.merge_duplicate(step.fields, layer=layer, actor=actor, batch=report.batch)
                        report.merged += 1
                    else:
                        report.imported += insert_memories([memory], actor=actor, batch=report.batch)
            except (IntegrityError, DataError) as exc:
                line_failed(step, exc)
        report.skipped += sum(1 for s in chunk if s.action == "skip")


def import_lines(
    lines: Iterable[bytes | str],
    *,
    scope: str | None = None,
    atomic: bool = False,
    dedup: bool = False,
    allow_move: bool = False,
    actor: str = IMPORT_ACTOR,
    dry_run: bool = False,
) -> ImportReport:
    """Import memory JSONL: validate the whole input first, then write inside one transaction.

    By default a restore is faithful: duplicates are kept, ids and timestamps preserved.
    With `dedup`, each new active line goes through the write path's dedup layers (same
    text or entity key in the scope → merged into the existing memory). A line whose id
    exists is skipped when identical and updated in place (an `edited` event) otherwise; one in
    another scope than the line's (or `scope`) is imported there as a copy with an id of its own
    (`copied` counts them), unless `allow_move`, which moves it.
    Bad lines are reported with their numbers; with `atomic`, any error writes nothing.
    Raises rules.ScopeError for a bad `scope`.
    """
    if scope is not None:
        scope = rules.normalize_scope(scope)
    valid, errors = parse_lines(lines, scope=scope)
    options = {"atomic": atomic, "dedup": dedup, "allow_move": allow_move, "actor": actor, "dry_run": dry_run}
    return import_records(valid, errors, **options)


def import_records(
    valid: list[tuple[int, dict]],
    errors: list[dict],
    *,
    atomic: bool = False,
    dedup: bool = False,
    allow_move: bool = False,
    actor: str = IMPORT_ACTOR,
    dry_run: bool = False,
) -> ImportReport:
    """Plan and write records already validated by `parse_record`, numbered by position (a line,
    or any increasing number the caller maps back), as `import_lines` does; `errors` are the
    positions that did not validate. With `dry_run` nothing is written: the report counts what
    would be and its `preview` lists each memory with what would happen to it."""
    now = timezone.now()
    report = ImportReport(errors=list(errors), dry_run=dry_run or None)
    if atomic and errors:
        return report
    steps, plan_errors = _plan(valid, dedup=dedup, allow_move=allow_move, now=now)
    report.errors = sorted(report.errors + plan_errors, key=lambda error: error["line"])
    report.copied = sum(step.copied for step in steps)
    if atomic and report.errors:
        return report
    if dry_run:
        _preview(steps, report)
        return report
    report.batch = uuid.uuid4()
    try:
        with transaction.atomic():
            _write(steps, report, atomic=atomic, actor=actor, now=now)
    except _Rollback:
        report.imported = report.updated = report.merged = report.skipped = 0
    report.errors.sort(key=lambda error: error["line"])
    if not (report.imported or report.updated or report.merged):
        report.batch = None  # no event carries it
    return report


def _preview(steps: list[_Step], report: ImportReport) -> None:
    """Count and list what the steps would do, writing nothing."""
    for step in steps:
        memory, action = step.memory, _PREVIEW_ACTIONS.get(step.action)
        into = None
        if step.action == "dedup":
            duplicate = Memory.objects.find_duplicate(memory.scope, memory.content_hash, memory.entity_key)
            action, into = ("merged", duplicate[0].pk) if duplicate else ("new", None)
        values = {name: step.changes.get(name, getattr(memory, name)) for name in ("scope", "kind", "tier", "text")}
        report.preview.append(
            {
                "line": step.line,
                "action": action,
                # A new line without an id gets a random one when it is written: none to show yet.
                "id": str(memory.pk) if step.action in ("skip", "update") or "id" in step.fields else None,
                **values,
                "changes": sorted(step.changes),
                **({"into": str(into)} if into else {}),
            }
        )
        counter = {"new": "imported", "unchanged": "skipped", "updated": "updated", "merged": "merged"}[action]
        setattr(report, counter, getattr(report, counter) + 1)


# --- export ------------------------------------------------------------------------------


def _timestamp(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="microseconds") if value else None


def memory_record(memory: Memory) -> dict:
    """The JSONL object of one memory: every field in FIELDS, timestamps in UTC."""
    record = {name: getattr(memory, name) for name in FIELDS}
    record["id"] = str(memory.pk)
    for name in _TIMESTAMPS:
        record[name] = _timestamp(record[name])
    return record


def export_records(*, scope: str | None = None, include_tombstoned: bool = False) -> Iterator[dict]:
    """Yield `memory_record` of each memory to export, ordered by (created_at, id)."""
    memories = Memory.objects.order_by("created_at", "id")
    if scope is not None:
        memories = memories.filter(scope=rules.normalize_scope(scope))
    if not include_tombstoned:
        memories = memories.active()
    for memory in memories.iterator(chunk_size=2000):
        yield memory_record(memory)


def export_lines(*, scope: str | None = None, include_tombstoned: bool = False) -> Iterator[str]:
    """Yield one JSON line (with its newline) per memory, ordered by (created_at, id)."""
    for record in export_records(scope=scope, include_tombstoned=include_tombstoned):
        line = json.dumps(record, ensure_ascii=False, sort_keys=True)
        if untrusted.LONE_SURROGATE.search(line):
            # UTF-8 cannot hold a lone surrogate (a row stored before the input checks): the
            # ASCII-escaped line is the same JSON and valid UTF-8, so the export is never lost.
            line = json.dumps(record, ensure_ascii=True, sort_keys=True)
        yield line + "\n"


def write_export(path: str | os.PathLike, lines: Iterable[str]) -> int:
    """Write lines to `path` through a temporary file and a rename; return the line count.

    A failed export leaves the previous file (if any) untouched, never half a file.
    The file is created 0600: memories hold personal data.
    """
    target = Path(path)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    count = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            for line in lines:
                fh.write(line.encode("utf-8"))
                count += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return count
