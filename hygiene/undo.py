"""Undo a batch: put every memory a batch changed back exactly as it was before the batch.

Every change is a MemoryEvent with the before values of what it changed (and the memory's
updated_at before it), and bulk work (an import, a bulk action, a merge, a clean-up step, a
decay run) marks its events with one batch id. Undo walks the batch's events newest first and
writes each memory's `before` values back: a tombstoned memory comes back active, a merged one
gets its text, importance and counts back, a memory the batch created is tombstoned (deletes
are tombstones here too). The undo is itself a batch of events, so nothing is lost and the
undo can be undone.

A memory changed again after the batch is not silently overwritten: undo refuses and names
it, unless `force`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.core.exceptions import FieldDoesNotExist
from django.db import transaction

from memoryui.models import ConflictError, Memory, MemoryEvent
from memoryui.reports import Report
from memoryui.text import memories

UNDO_PREFIX = "undo of batch "


class UndoError(ValueError):
    """The batch cannot be undone as asked (unknown, already undone, changed since)."""


@dataclass
class UndoReport(Report):
    batch: str
    undo_batch: str
    restored: int = 0  # tombstoned by the batch, active again
    reverted: int = 0  # edited/merged/demoted by the batch, values put back
    tombstoned: int = 0  # created by the batch, tombstoned now
    memories: list[str] = field(default_factory=list, metadata={"convert": len})  # reported as a count


def undo_reason(batch) -> str:
    return f"{UNDO_PREFIX}{batch}"


def is_undone(batch) -> bool:
    # Through the batch's own memories (indexed), not a scan of every event's reason.
    touched = MemoryEvent.objects.filter(batch=batch).values("memory_id")
    return MemoryEvent.objects.filter(memory_id__in=touched, reason=undo_reason(batch)).exists()


def state(batch) -> str | None:
    """ "undone", "undoable", or None when there is no batch (or it changed nothing)."""
    if not batch:
        return None
    if is_undone(batch):
        return "undone"
    return "undoable" if MemoryEvent.objects.filter(batch=batch).exists() else None


def changed_since(batch) -> list[str]:
    """Memories of the batch that changed again afterwards (outside the batch)."""
    events = MemoryEvent.objects.filter(batch=batch)
    last = {}
    for memory_id, created_at in events.values_list("memory_id", "created_at"):
        last[memory_id] = max(created_at, last.get(memory_id, created_at))
    later = (
        MemoryEvent.objects.filter(memory_id__in=list(last))
        .exclude(batch=batch)
        .exclude(action=MemoryEvent.Action.RECALLED)
        .values_list("memory_id", "created_at")
    )
    return sorted({str(memory_id) for memory_id, created_at in later if created_at > last[memory_id]})


def undo_batch(batch, *, actor: str, force: bool = False) -> UndoReport:
    """Revert every change of `batch`, newest first, in one transaction and one new batch."""
    try:
        batch = uuid.UUID(str(batch))
    except ValueError:
        raise UndoError(f"{batch!r} is not a batch id") from None
    events = list(MemoryEvent.objects.filter(batch=batch).order_by("-created_at", "-id"))
    if not events:
        raise UndoError(f"no changes were recorded in batch {batch}")
    if is_undone(batch):
        raise UndoError(f"batch {batch} was already undone")
    if not force:
        changed = changed_since(batch)
        if changed:
            shown = ", ".join(changed[:5]) + ("…" if len(changed) > 5 else "")
            raise UndoError(f"{memories(len(changed))} changed after batch {batch}: {shown} (use force to undo anyway)")
    report = UndoReport(batch=str(batch), undo_batch=str(uuid.uuid4()))
    reason = undo_reason(batch)
    with transaction.atomic():
        ids = {event.memory_id for event in events}
        rows = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=ids)}
        for event in events:
            memory = rows[event.memory_id]
            try:
                _revert(memory, event, actor=actor, reason=reason, batch=report.undo_batch, report=report)
            except ConflictError as exc:
                raise UndoError(f"cannot undo batch {batch}: {exc}") from None
        report.memories = sorted(str(pk) for pk in ids)
    return report


def _revert(memory: Memory, event: MemoryEvent, *, actor: str, reason: str, batch: str, report: UndoReport) -> None:
    if event.action in (MemoryEvent.Action.CREATED, MemoryEvent.Action.IMPORTED) and not event.before:
        if memory.tombstone(reason, actor=actor, batch=batch):
            report.tombstoned += 1
        return
    before = event.before or {}
    values = {}
    for name, value in before.items():
        try:
            model_field = Memory._meta.get_field(name)
        except FieldDoesNotExist:
            continue  # a note kept beside the values ("incoming" text of a merge)
        if name in ("id", "content_hash", "created_at"):
            continue
        values[name] = model_field.to_python(value) if value is not None else None
    if "metadata" in values and values["metadata"] is None:
        values["metadata"] = {}
    if not values:
        return
    was_tombstoned = memory.status == Memory.Status.TOMBSTONED
    action = "restored" if was_tombstoned and values.get("status") == Memory.Status.ACTIVE else "edited"
    if memory._change(action, values, actor=actor, reason=reason, batch=batch):
        if action == "restored":
            report.restored += 1
        else:
            report.reverted += 1
    if event.previous_updated_at is not None:
        Memory.objects.filter(pk=memory.pk).update(updated_at=event.previous_updated_at)
        memory.updated_at = event.previous_updated_at


def undo_batches(batches, *, actor: str, force: bool = False) -> UndoReport:
    """Undo `batches` in this order, all or none (UndoError as `undo_batch` raises it); the counts summed."""
    batches = list(batches)
    total = UndoReport(batch=", ".join(str(batch) for batch in batches), undo_batch="")
    with transaction.atomic():
        for batch in batches:
            report = undo_batch(batch, actor=actor, force=force)
            total.restored += report.restored
            total.reverted += report.reverted
            total.tombstoned += report.tombstoned
            total.memories = sorted({*total.memories, *report.memories})
    return total


def preview(batches, *, force: bool = False) -> UndoReport:
    """What undoing `batches` (in this order) would do, counted; changes nothing.

    The undo runs for real inside a transaction that is rolled back, so the counts are exactly
    the undo's own. Raises UndoError as the undo would.
    """
    with transaction.atomic():
        total = undo_batches(batches, actor="preview", force=force)
        transaction.set_rollback(True)
    return total
