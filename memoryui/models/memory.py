"""Memory, its append-only history MemoryEvent, and the pairs judged not to be duplicates.

The write path (dedup, placement) is ingest.writing; here are the rows and the domain actions
on one memory (pin, tombstone, restore, edit, merge a duplicate), each writing a MemoryEvent.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count, F, Q
from django.urls import reverse
from django.utils import timezone

from memoryui import rules
from memoryui.models.fields import StoredJSONDecoder
from memoryui.models.outbox import queue_index_sync

UNIT_INTERVAL = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class ConflictError(Exception):
    """A change that would break an invariant (e.g. two active memories with one entity key)."""


class MemoryQuerySet(models.QuerySet):
    def active(self) -> MemoryQuerySet:
        return self.filter(status=Memory.Status.ACTIVE)

    def for_scopes(self, scopes: list[str] | None) -> MemoryQuerySet:
        """Limit to the given scopes; None means every scope."""
        return self if scopes is None else self.filter(scope__in=scopes)

    def stats(self) -> dict:
        """Counts by kind, tier and scope over active memories, every kind and tier present.

        One grouped query: the (scope, status, kind, tier, pinned) index covers it.
        """
        by_kind = dict.fromkeys(rules.KINDS, 0)
        by_tier = dict.fromkeys(rules.TIERS, 0)
        by_scope: dict[str, int] = {}
        total = pinned = tombstoned = 0
        rows = self.order_by().values_list("scope", "status", "kind", "tier", "pinned").annotate(n=Count("*"))
        for scope, status, kind, tier, is_pinned, n in rows:
            if status != Memory.Status.ACTIVE:
                tombstoned += n
                continue
            total += n
            by_kind[kind] = by_kind.get(kind, 0) + n
            by_tier[tier] = by_tier.get(tier, 0) + n
            by_scope[scope] = by_scope.get(scope, 0) + n
            if is_pinned:
                pinned += n
        return {
            "total": total,
            "by_kind": by_kind,
            "by_tier": by_tier,
            "by_scope": dict(sorted(by_scope.items(), key=lambda item: (-item[1], item[0]))),
            "pinned": pinned,
            "tombstoned": tombstoned,
        }

    def record_recalled(self, ids: list, *, actor: str, reason: str) -> int:
        """Bump access_count/accessed_at of the active memories among `ids` (an agent was given
        them), with a `recalled` event each; returns how many were bumped."""
        if not ids:
            return 0
        now = timezone.now()
        with transaction.atomic():
            bumped = self.active().filter(pk__in=ids).update(access_count=F("access_count") + 1, accessed_at=now)
            MemoryEvent.objects.bulk_create(
                MemoryEvent(
                    memory_id=pk, action=MemoryEvent.Action.RECALLED, actor=actor, reason=reason, created_at=now
                )
                for pk in ids
            )
        return bumped

    def find_duplicate(self, scope: str, hash_: str, entity_key: str | None) -> tuple[Memory, str] | None:
        """Dedup layers 1 and 2: the active memory in `scope` with the same entity key or text."""
        active = self.active().filter(scope=scope)
        if entity_key:
            match = active.filter(entity_key=entity_key).first()
            if match:
                return match, "entity_key"
        match = active.filter(content_hash=hash_).order_by("created_at").first()
        if match:
            return match, "exact"
        return None


class MemoryManager(models.Manager.from_queryset(MemoryQuerySet)):
    def scope_names(self, limit: int = 200) -> list[str]:
        """Every scope in the store, sorted, at most `limit`.

        A loose index scan: one index seek per scope instead of reading every row, which
        `SELECT DISTINCT` does on PostgreSQL (tens of ms at 100k memories).
        """
        table = connection.ops.quote_name(self.model._meta.db_table)
        sql = f"""
            WITH RECURSIVE scopes(scope) AS (
                SELECT MIN(scope) FROM {table}
                UNION ALL
                SELECT (SELECT MIN(scope) FROM {table} WHERE scope > scopes.scope)
                FROM scopes WHERE scopes.scope IS NOT NULL
            )
            SELECT scope FROM scopes WHERE scope IS NOT NULL LIMIT %s
        """
        with connection.cursor() as cursor:
            cursor.execute(sql, [limit])
            return [row[0] for row in cursor.fetchall()]


class Memory(models.Model):
    Kind = rules.Kind
    Tier = rules.Tier
    Status = rules.Status
    Source = rules.Source

    # Verbose names and help texts are what the forms and the back office label each field with.
    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    scope = models.CharField(
        "scope",
        max_length=rules.SCOPE_MAX_LENGTH,
        help_text="Whose memory it is, e.g. agent:main, user:42, project:x, global; a bare id means agent:<id>.",
    )
    kind = models.CharField(
        "kind", max_length=20, choices=Kind.choices, help_text="What sort of knowledge it is; the tier follows from it."
    )
    tier = models.CharField(
        "tier",
        max_length=12,
        choices=Tier.choices,
        help_text="core: identity and stable preferences; working: the usual; peripheral: low value, expires.",
    )
    text = models.TextField("text", help_text="One self-contained statement.")
    importance = models.FloatField(
        "importance", validators=UNIT_INTERVAL, help_text="0 to 1: how much it weighs in recall."
    )
    confidence = models.FloatField(
        "confidence", default=0.7, validators=UNIT_INTERVAL, help_text="0 to 1: how sure the writer was."
    )
    pinned = models.BooleanField(
        "pinned", default=False, help_text="A pinned memory never decays and is boosted in recall."
    )
    status = models.CharField(
        "status",
        max_length=12,
        choices=Status.choices,
        default=Status.ACTIVE,
        help_text="A tombstoned memory is left out of search and recall, and can be restored.",
    )
    tombstone_reason = models.TextField("tombstone reason", blank=True)
    tombstoned_at = models.DateTimeField("tombstoned at", null=True, blank=True)
    source = models.CharField(
        "source", max_length=16, choices=Source.choices, default=Source.MANUAL, help_text="Who wrote it."
    )
    # NULL (not "") for "no key", so the partial unique constraint ignores keyless memories.
    entity_key = models.CharField(  # noqa: DJ001
        "entity key",
        max_length=rules.ENTITY_KEY_MAX_LENGTH,
        null=True,
        blank=True,
        help_text="type:value, e.g. phone:18600000000; one active memory per key in a scope.",
    )
    content_hash = models.CharField("content hash", max_length=64, editable=False)
    access_count = models.PositiveIntegerField("accesses", default=0)
    accessed_at = models.DateTimeField("last accessed", null=True, blank=True)
    expires_at = models.DateTimeField(
        "expires at",
        null=True,
        blank=True,
        help_text="When decay tombstones it (only unpinned peripheral memories decay); ISO 8601 with a time "
        "zone, e.g. 2030-01-01T00:00:00Z.",
    )
    metadata = models.JSONField(
        "metadata",
        decoder=StoredJSONDecoder,
        default=dict,
        blank=True,
        help_text='A JSON object: tags, tool names, where it came from, e.g. {"tags": ["ops"]}.',
    )
    created_at = models.DateTimeField("created at", default=timezone.now)
    updated_at = models.DateTimeField("updated at", default=timezone.now)

    objects = MemoryManager()

    class Meta:
        verbose_name_plural = "memories"
        ordering = ["-updated_at", "-id"]
        indexes = [
            # The list's default order is (-updated_at, -id): the id in the index keeps a page
            # cheap when many rows share one timestamp (a bulk import).
            models.Index(fields=["status", "-updated_at", "-id"], name="memory_status_updated"),
            models.Index(fields=["scope", "status", "-updated_at", "-id"], name="memory_scope_updated"),
            models.Index(fields=["scope", "status", "kind", "tier", "pinned"], name="memory_scope_breakdown"),
            models.Index(fields=["status", "kind", "-updated_at", "-id"], name="memory_kind_updated"),
            models.Index(fields=["status", "tier", "-updated_at", "-id"], name="memory_tier_updated"),
            models.Index(fields=["scope", "content_hash"], name="memory_scope_hash"),
            models.Index(fields=["expires_at"], name="memory_expires"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "entity_key"],
                condition=Q(status="active", entity_key__isnull=False),
                name="memory_active_entity_key_unique",
            ),
            models.CheckConstraint(condition=Q(importance__gte=0, importance__lte=1), name="memory_importance_range"),
            models.CheckConstraint(condition=Q(confidence__gte=0, confidence__lte=1), name="memory_confidence_range"),
        ]

    def __str__(self) -> str:
        first_line = self.text.splitlines()[0] if self.text else ""
        return f"[{self.kind}/{self.tier}] {first_line[:80]}"

    def save(self, *args, **kwargs):
        self.content_hash = rules.content_hash(self.text)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None:
            kwargs["update_fields"] = {*update_fields, "content_hash", "updated_at"}
        self.updated_at = timezone.now()
        super().save(*args, **kwargs)
        moved_from = None
        if update_fields is None or "scope" in update_fields:
            left = self.__dict__.get("_stored_scope")
            if left is not None and left != self.scope:
                moved_from = {self.pk: left}
            self._stored_scope = self.scope
        queue_index_sync([self.pk], memories=[self], moved_from=moved_from)

    def get_absolute_url(self) -> str:
        return reverse("memory_detail", args=[self.pk])

    @classmethod
    def from_db(cls, db, field_names, values):
        memory = super().from_db(db, field_names, values)
        # The scope the database holds: a save that changes it tells the outbox which scope the
        # memory left, so the vector index removes it from that scope's collection only.
        memory._stored_scope = memory.__dict__.get("scope")
        return memory

    # --- history -----------------------------------------------------------------------

    SNAPSHOT_FIELDS = (
        "scope", "kind", "tier", "text", "importance", "confidence", "pinned", "status",
        "tombstone_reason", "source", "entity_key", "access_count", "expires_at", "metadata",
    )  # fmt: skip

    def snapshot(self, fields: tuple[str, ...] | list[str] | None = None) -> dict:
        """The JSON-safe values of `fields` (default: every user-visible field)."""
        values = {}
        for name in fields or self.SNAPSHOT_FIELDS:
            value = getattr(self, name)
            values[name] = value.isoformat() if hasattr(value, "isoformat") else value
        return values

    def record(
        self,
        action: str,
        *,
        actor: str,
        before: dict | None = None,
        after: dict | None = None,
        reason: str = "",
        batch: uuid.UUID | None = None,
        previous_updated_at=None,
    ) -> MemoryEvent:
        return MemoryEvent.objects.create(
            memory=self,
            action=action,
            actor=actor,
            before=before,
            after=after,
            reason=reason,
            batch=batch,
            previous_updated_at=previous_updated_at,
        )

    def _change(self, action: str, changes: dict, *, actor: str, reason: str = "", batch=None) -> bool:
        """Apply `changes`, save, and write one event with the before/after of what changed."""
        changed = {name: value for name, value in changes.items() if getattr(self, name) != value}
        if not changed:
            return False
        before = self.snapshot(list(changed))
        previous_updated_at = self.updated_at
        for name, value in changed.items():
            setattr(self, name, value)
        try:
            with transaction.atomic():
                self.save(update_fields=list(changed))
                self.record(
                    action,
                    actor=actor,
                    before=before,
                    after=self.snapshot(list(changed)),
                    reason=reason,
                    batch=batch,
                    previous_updated_at=previous_updated_at,
                )
        except IntegrityError:
            message = f"another active memory in {self.scope} already has entity_key {self.entity_key}"
            for name, value in before.items():
                setattr(self, name, Memory._meta.get_field(name).to_python(value))
            self.updated_at = previous_updated_at
            raise ConflictError(message) from None
        return True

    # --- domain actions (each writes a MemoryEvent) --------------------------------------

    def pin(self, *, actor: str, batch=None) -> bool:
        return self._change("pinned", {"pinned": True}, actor=actor, batch=batch)

    def unpin(self, *, actor: str, batch=None) -> bool:
        return self._change("unpinned", {"pinned": False}, actor=actor, batch=batch)

    def tombstone(self, reason: str, *, actor: str, batch=None) -> bool:
        """Soft-delete with a reason; restorable. Returns False if already tombstoned."""
        reason = (reason or "").strip()
        if not reason:
            raise rules.MemoryValidationError({"reason": ["a tombstone needs a reason"]})
        if self.status == self.Status.TOMBSTONED:
            return False
        return self._change(
            "tombstoned",
            {"status": self.Status.TOMBSTONED, "tombstone_reason": reason, "tombstoned_at": timezone.now()},
            actor=actor,
            reason=reason,
            batch=batch,
        )

    def mark_duplicate_of(self, canonical: Memory, *, reason: str, actor: str, batch=None) -> bool:
        """Tombstone this memory as a duplicate folded into `canonical`, linking the two."""
        metadata = {**(self.metadata or {}), "merged_into": str(canonical.pk)}
        reason = f"{reason}: merged into {canonical.pk}"
        return self._change(
            "tombstoned",
            {
                "status": self.Status.TOMBSTONED,
                "tombstone_reason": reason,
                "tombstoned_at": timezone.now(),
                "metadata": metadata,
            },
            actor=actor,
            reason=reason,
            batch=batch,
        )

    def restore(self, *, actor: str, reason: str = "", batch=None) -> bool:
        if self.status == self.Status.ACTIVE:
            return False
        return self._change(
            "restored",
            {"status": self.Status.ACTIVE, "tombstone_reason": "", "tombstoned_at": None},
            actor=actor,
            reason=reason,
            batch=batch,
        )

    def demote(self, *, importance: float, actor: str, reason: str = "", batch=None) -> bool:
        """Move to peripheral with `importance` and the peripheral TTL (unless pinned: pins never decay)."""
        changes = {"tier": self.Tier.PERIPHERAL, "importance": importance}
        if not self.pinned and self.expires_at is None:
            changes["expires_at"] = timezone.now() + timedelta(days=settings.MEMORYUI_PERIPHERAL_TTL_DAYS)
        return self._change("demoted", changes, actor=actor, reason=reason, batch=batch)

    def set_tier(self, tier: str, *, actor: str, batch=None) -> bool:
        if tier not in rules.TIERS:
            raise rules.MemoryValidationError({"tier": [f"{tier!r} is not one of: {', '.join(rules.TIERS)}"]})
        demoted = rules.TIERS.index(tier) > rules.TIERS.index(self.tier)
        return self._change("demoted" if demoted else "edited", {"tier": tier}, actor=actor, batch=batch)

    BULK_ACTIONS = ("pin", "unpin", "tombstone", "restore", "set_tier")

    def apply_action(self, action: str, *, actor: str, batch=None, reason: str = "", tier: str = "") -> bool:
        """Run one of BULK_ACTIONS by name (bulk actions in the UI and the API)."""
        if action == "tombstone":
            return self.tombstone(reason, actor=actor, batch=batch)
        if action == "restore":
            return self.restore(actor=actor, reason=reason, batch=batch)
        if action == "set_tier":
            return self.set_tier(tier, actor=actor, batch=batch)
        if action in ("pin", "unpin"):
            return getattr(self, action)(actor=actor, batch=batch)
        raise ValueError(f"unknown action {action!r}")

    EDITABLE_FIELDS = (
        "scope", "kind", "tier", "text", "importance", "confidence", "pinned", "source",
        "entity_key", "metadata", "expires_at",
    )  # fmt: skip

    def edit(self, *, actor: str, reason: str = "", batch=None, **fields) -> bool:
        """Validate and apply field changes; one `edited` event with before/after."""
        not_editable = sorted(set(fields) - set(self.EDITABLE_FIELDS))
        if not_editable:
            raise rules.MemoryValidationError({name: ["cannot be edited"] for name in not_editable})
        clean = rules.clean_memory_fields(fields, partial=True, text_max_length=settings.MEMORYUI_TEXT_MAX_LENGTH)
        return self._change("edited", clean, actor=actor, reason=reason, batch=batch)

    def merge_duplicate(
        self,
        incoming: dict,
        *,
        layer: str,
        actor: str,
        batch=None,
        similarity: float | None = None,
        detail: str = "",
        judge: dict | None = None,
    ) -> None:
        """Fold a duplicate write into this memory: bump access and importance, maybe text.

        Dedup layer 3 says how near the two were (`similarity`) and why they merged (`detail`:
        above the threshold, a restatement, the LLM judge's verdict, with `judge` its answer);
        the merge event records it.
        """
        before = self.snapshot(["text", "importance", "access_count", "accessed_at"])
        previous_updated_at = self.updated_at
        self.access_count += 1
        self.accessed_at = timezone.now()
        incoming_importance = incoming.get("importance", self.importance)
        self.importance = rules.merged_importance(self.importance, incoming_importance)
        self.text = rules.merged_text(self.text, incoming["text"])
        self.save(update_fields=["text", "importance", "access_count", "accessed_at"])
        after = {**self.snapshot(["text", "importance", "access_count", "accessed_at"]), "incoming": incoming["text"]}
        reason = f"duplicate by {layer.replace('_', ' ')}"
        if similarity is not None:
            after["similarity"] = round(similarity, 4)
            reason += f" (cosine similarity {similarity:.3f})"
            if detail:
                reason += f": {detail}"
            if judge is not None:
                after["judge"] = judge
        self.record(
            "merged",
            actor=actor,
            before=before,
            after=after,
            reason=reason,
            batch=batch,
            previous_updated_at=previous_updated_at,
        )


class MemoryEvent(models.Model):
    """Append-only history: every change to a memory, with actor and before/after."""

    class Action(models.TextChoices):
        CREATED = "created"
        EDITED = "edited"
        PINNED = "pinned"
        UNPINNED = "unpinned"
        TOMBSTONED = "tombstoned"
        RESTORED = "restored"
        MERGED = "merged"
        DEMOTED = "demoted"
        RECALLED = "recalled"
        IMPORTED = "imported"

    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=12, choices=Action.choices)
    actor = models.CharField(max_length=200)
    before = models.JSONField(decoder=StoredJSONDecoder, null=True, blank=True)
    after = models.JSONField(decoder=StoredJSONDecoder, null=True, blank=True)
    reason = models.TextField(blank=True)
    batch = models.UUIDField(null=True, blank=True, db_index=True)
    # The memory's updated_at before this change, so undoing a batch puts it back exactly.
    previous_updated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["memory", "-created_at"], name="event_memory_time"),
            models.Index(fields=["-created_at", "-id"], name="event_time"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} at {self.created_at:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("memory events are append-only")
        super().save(*args, **kwargs)

    def changes(self) -> list[tuple[str, object, object]]:
        """(field, before, after) for each field the event touched."""
        before, after = self.before or {}, self.after or {}
        return [(name, before.get(name), after.get(name)) for name in dict.fromkeys([*before, *after])]


class DistinctPair(models.Model):
    """Two memories someone judged not to be duplicates: clustering never links them again."""

    scope = models.CharField(max_length=rules.SCOPE_MAX_LENGTH)
    first = models.UUIDField()  # the smaller id of the two
    second = models.UUIDField()
    actor = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["first", "second"], name="distinct_pair_unique")]
        indexes = [models.Index(fields=["scope"], name="distinct_pair_scope")]

    def __str__(self) -> str:
        return f"{self.first} ≠ {self.second}"

    @classmethod
    def ordered(cls, a, b) -> tuple[uuid.UUID, uuid.UUID]:
        a, b = uuid.UUID(str(a)), uuid.UUID(str(b))
        return (a, b) if a < b else (b, a)
