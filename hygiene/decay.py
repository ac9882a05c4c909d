"""Decay: peripheral memories past their TTL are tombstoned (docs/architecture.md "Tier and importance").

Only the peripheral tier decays, and never a pinned memory: a core or working memory, or a
pinned one, keeps its place whatever its `expires_at` says. One run is one batch, so a run
that retired too much is undone like any other batch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from memoryui.models import Memory
from memoryui.reports import Report

REASON = "expired: peripheral TTL passed"
CHUNK = 500


@dataclass
class DecayReport(Report):
    now: str
    dry_run: bool
    tombstoned: int = 0
    batch: str | None = None
    examples: list[dict] = field(default_factory=list)


def expired(now: datetime | None = None):
    """Active, unpinned, peripheral memories whose expires_at has passed."""
    now = now or timezone.now()
    return Memory.objects.active().filter(
        tier=Memory.Tier.PERIPHERAL, pinned=False, expires_at__isnull=False, expires_at__lte=now
    )


def decay(*, actor: str, now: datetime | None = None, dry_run: bool = False, progress=None) -> DecayReport:
    """Tombstone what has expired, in chunks of one transaction each, all in one batch."""
    now = now or timezone.now()
    report = DecayReport(now=now.isoformat(), dry_run=dry_run)
    batch = uuid.uuid4()
    if dry_run:
        report.tombstoned = expired(now).count()
        report.examples = [_example(m) for m in expired(now).order_by("expires_at", "id")[:8]]
        return report
    while True:
        with transaction.atomic():
            # Re-checked under the row lock: a memory pinned or promoted meanwhile is left alone.
            chunk = list(expired(now).select_for_update().order_by("expires_at", "id")[:CHUNK])
            for memory in chunk:
                if memory.tombstone(REASON, actor=actor, batch=batch):
                    report.tombstoned += 1
                    if len(report.examples) < 8:
                        report.examples.append(_example(memory))
        if progress:
            progress(report.tombstoned)
        if len(chunk) < CHUNK:
            break
    if report.tombstoned:
        report.batch = str(batch)
    return report


def _example(memory: Memory) -> dict:
    return {
        "id": str(memory.pk),
        "scope": memory.scope,
        "text": memory.text[:160],
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
    }
