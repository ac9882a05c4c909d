"""Merging duplicate clusters (hygiene.dedup finds them): the canonical memory stays.

Merging keeps the canonical, folds the others in (access counts summed, importance and text
merged as the write path does, the better tier and pin kept, an entity key taken over) and
tombstones them with a link both ways; every change is an event in one batch, which
`undo.undo_batch` reverts exactly. `reject` records that a cluster's members are not
duplicates, so clustering never links them again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from hygiene.dedup import ClusterReport, canonical_order
from memoryui import rules
from memoryui.models import DistinctPair, Memory
from memoryui.reports import Report


class DedupError(ValueError):
    """A merge that cannot be done as asked (a member gone, another scope, no canonical)."""


@dataclass
class MergeResult(Report):
    canonical: str
    merged: list[str]
    batch: uuid.UUID


@dataclass
class MergePlan:
    """What a merge will do: keep `canonical`, tombstone `duplicates` (for the confirmation)."""

    canonical: Memory
    duplicates: list[Memory]


def plan(scope: str, member_ids, *, canonical_id=None, lock: bool = False) -> MergePlan:
    """Check a merge and say what it would do; raise DedupError when it cannot be done.

    `canonical_id` defaults to the proposed one (canonical_order). All members must still be
    active and in `scope`. `lock` locks the rows (inside the merge's transaction).
    """
    scope = rules.normalize_scope(scope)
    wanted = {str(pk) for pk in member_ids}
    if len(wanted) < 2:
        raise DedupError("a merge needs at least two memories")
    try:
        for pk in wanted:
            uuid.UUID(pk)
    except ValueError:
        raise DedupError(f"{pk!r} is not a memory id") from None
    rows = Memory.objects.select_for_update() if lock else Memory.objects.all()
    found = {str(m.pk): m for m in rows.filter(pk__in=wanted)}
    problems = [f"{pk}: not found" for pk in sorted(wanted - found.keys())]
    problems += [f"{pk}: in {m.scope}, not {scope}" for pk, m in sorted(found.items()) if m.scope != scope]
    problems += [f"{pk}: tombstoned" for pk, m in sorted(found.items()) if m.status != Memory.Status.ACTIVE]
    if problems:
        raise DedupError("cannot merge: " + "; ".join(problems))
    ordered = sorted(found.values(), key=canonical_order)
    if canonical_id is not None:
        if str(canonical_id) not in found:
            raise DedupError(f"the canonical memory {canonical_id} is not one of the members")
        canonical = found[str(canonical_id)]
    else:
        canonical = ordered[0]
    return MergePlan(canonical, [m for m in ordered if m.pk != canonical.pk])


def merge(
    scope: str,
    member_ids,
    *,
    canonical_id=None,
    actor: str,
    batch: uuid.UUID | None = None,
    reason: str = "",
) -> MergeResult:
    """Merge these memories into one: the canonical survives, the others are tombstoned with a link.

    `canonical_id` defaults to the proposed one (canonical_order). All members must still be
    active and in `scope`; nothing is changed otherwise.
    """
    batch = batch or uuid.uuid4()
    with transaction.atomic():
        merging = plan(scope, member_ids, canonical_id=canonical_id, lock=True)
        _fold(merging.canonical, merging.duplicates, actor=actor, batch=batch, reason=reason)
    return MergeResult(str(merging.canonical.pk), [str(m.pk) for m in merging.duplicates], batch)


def _fold(canonical: Memory, duplicates: list[Memory], *, actor: str, batch: uuid.UUID, reason: str) -> None:
    changes: dict = {
        "access_count": canonical.access_count + sum(m.access_count for m in duplicates),
        "importance": canonical.importance,
        "text": canonical.text,
        "pinned": canonical.pinned or any(m.pinned for m in duplicates),
        "tier": min([canonical.tier, *(m.tier for m in duplicates)], key=rules.TIERS.index),
    }
    accessed = [m.accessed_at for m in [canonical, *duplicates] if m.accessed_at]
    if accessed:
        changes["accessed_at"] = max(accessed)
    for duplicate in duplicates:
        changes["importance"] = rules.merged_importance(changes["importance"], duplicate.importance)
        changes["text"] = rules.merged_text(changes["text"], duplicate.text)
    if changes["tier"] != Memory.Tier.PERIPHERAL or changes["pinned"]:
        changes["expires_at"] = None
    key_donor = next((m for m in duplicates if m.entity_key), None) if not canonical.entity_key else None
    if key_donor is not None:
        changes["entity_key"] = key_donor.entity_key
    metadata = dict(canonical.metadata or {})
    metadata["merged_from"] = [*metadata.get("merged_from", []), *(str(m.pk) for m in duplicates)]
    changes["metadata"] = metadata
    why = reason or "duplicates merged"
    # Tombstone the duplicates first: an entity key passes to the canonical memory only once
    # its holder is no longer active.
    for duplicate in duplicates:
        duplicate.mark_duplicate_of(canonical, reason=why, actor=actor, batch=batch)
    canonical._change("merged", changes, actor=actor, reason=f"{why}: {len(duplicates)} folded in", batch=batch)


def merge_all(
    report: ClusterReport, *, actor: str, batch: uuid.UUID | None = None, progress=None
) -> tuple[uuid.UUID, list[MergeResult]]:
    """Merge every cluster of `report` (one transaction per cluster, one batch for all)."""
    batch = batch or uuid.uuid4()
    results = []
    for done, cluster in enumerate(report.clusters, 1):
        results.append(
            merge(
                report.scope,
                [m.memory.pk for m in cluster.members],
                canonical_id=cluster.canonical.pk,
                actor=actor,
                batch=batch,
                reason=f"duplicates ({cluster.label})",
            )
        )
        if progress:
            progress(done)
    return batch, results


def reject(scope: str, member_ids, *, actor: str) -> int:
    """Record that these memories are not duplicates of each other; return the new pairs."""
    scope = rules.normalize_scope(scope)
    ids = sorted({str(pk) for pk in member_ids})
    if len(ids) < 2:
        raise DedupError("a rejection needs at least two memories")
    created = 0
    now = timezone.now()
    with transaction.atomic():
        for n, a in enumerate(ids):
            for b in ids[n + 1 :]:
                first, second = DistinctPair.ordered(a, b)
                _, made = DistinctPair.objects.get_or_create(
                    first=first, second=second, defaults={"scope": scope, "actor": actor, "created_at": now}
                )
                created += made
    return created
