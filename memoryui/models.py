"""The memory store: Memory, its append-only history MemoryEvent, and API tokens."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from memoryui import dedup_judge, rules

UNIT_INTERVAL = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class ConflictError(Exception):
    """A change that would break an invariant (e.g. two active memories with one entity key)."""


class MemoryQuerySet(models.QuerySet):
    def active(self) -> MemoryQuerySet:
        return self.filter(status=Memory.Status.ACTIVE)

    def for_scopes(self, scopes: list[str] | None) -> MemoryQuerySet:
        """Limit to the given scopes; None means every scope."""
        return self if scopes is None else self.filter(scope__in=scopes)

    def matching(
        self,
        *,
        status: str = "active",
        scope: str | None = None,
        kind: str | None = None,
        tier: str | None = None,
        source: str | None = None,
        pinned: bool | None = None,
        text: str | None = None,
    ) -> MemoryQuerySet:
        """The list filters shared by the dashboard and the API; `status="all"` keeps both."""
        memories = self if status == "all" else self.filter(status=status)
        exact = {"scope": scope, "kind": kind, "tier": tier, "source": source, "pinned": pinned}
        memories = memories.filter(**{name: value for name, value in exact.items() if value not in (None, "")})
        if text:
            memories = memories.filter(Q(text__icontains=text) | Q(entity_key__icontains=text))
        return memories

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


@dataclass
class WriteOutcome:
    """What one write did: the memory it created, or the one it merged into (layer, similarity)."""

    memory: Memory
    created: bool
    layer: str | None = None  # normalized_text, entity_key or semantic, when merged
    similarity: float | None = None  # dedup layer 3's cosine similarity
    skipped: str | None = None  # why dedup layer 3 did not run, when it did not


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

    def write(self, *, actor: str, id: uuid.UUID | None = None, semantic: bool = True, **fields) -> tuple[Memory, bool]:
        """The write path: validate, normalize, place, dedup, insert or merge.

        Returns (memory, created). A duplicate (same normalized text or entity key in the
        scope, or, with `semantic`, a text whose embedding is at least
        MEMORYUI_SEMANTIC_DEDUP_THRESHOLD similar to an indexed active memory's) is merged into
        the existing memory instead of inserted. `id` gives a new memory a stable id (demo
        data, restores); it is ignored when the write merges.
        """
        outcome = self.write_outcome(actor=actor, id=id, semantic=semantic, **fields)
        return outcome.memory, outcome.created

    def write_outcome(
        self, *, actor: str, id: uuid.UUID | None = None, semantic: bool = True, batch=None, **fields
    ) -> WriteOutcome:
        """`write`, telling also which dedup layer merged it and at what similarity; `batch` marks
        the created or merged event as part of a batch (undone together)."""
        clean, placement, hash_ = self._prepare(fields)
        neighbours, skipped, embedded = self._semantic_neighbours(clean, hash_) if semantic else ([], None, None)
        with transaction.atomic():
            duplicate = (
                self.get_queryset().select_for_update().find_duplicate(clean["scope"], hash_, clean.get("entity_key"))
            )
            if duplicate:
                existing, layer = duplicate
                existing.merge_duplicate(clean, layer=layer, actor=actor, batch=batch)
                return WriteOutcome(existing, False, layer=layer)
            match = self._semantic_duplicate(clean, neighbours) if neighbours else None
            if match:
                match.memory.merge_duplicate(clean, layer="semantic", actor=actor, batch=batch, match=match)
                return WriteOutcome(match.memory, False, layer="semantic", similarity=match.similarity)
            now = timezone.now()
            tier = clean.pop("tier", None) or placement.tier
            expires_at = clean.pop("expires_at", None)
            if expires_at is None and placement.ttl_days and tier == Memory.Tier.PERIPHERAL:
                expires_at = now + timedelta(days=placement.ttl_days)
            clean.setdefault("importance", placement.importance)
            clean.setdefault("pinned", placement.pinned)
            memory = self.model(
                **clean, tier=tier, expires_at=expires_at, content_hash=hash_, created_at=now, updated_at=now
            )
            if id is not None:
                memory.id = id
            memory.save(force_insert=True)
            reason = "; ".join(filter(None, [skipped, self.judge_notes(neighbours)]))
            memory.record("created", actor=actor, after=memory.snapshot(), reason=reason, batch=batch)
            if embedded is not None:
                embedder_name, vector = embedded
                PendingVector.objects.create(
                    memory_id=memory.pk,
                    embedder=embedder_name,
                    content_hash=hash_,
                    vector=vector.astype("<f4").tobytes(),
                )
        return WriteOutcome(memory, True, skipped=skipped)

    def preview_write(self, *, semantic: bool = True, **fields) -> WriteOutcome:
        """What `write` would do, changing nothing: the memory it would merge into (and by which
        layer), or an unsaved memory with the tier, importance and pinning it would get."""
        clean, placement, hash_ = self._prepare(fields)
        neighbours, skipped, _ = self._semantic_neighbours(clean, hash_) if semantic else ([], None, None)
        duplicate = self.get_queryset().find_duplicate(clean["scope"], hash_, clean.get("entity_key"))
        if duplicate:
            existing, layer = duplicate
            return WriteOutcome(existing, False, layer=layer)
        match = self._semantic_duplicate(clean, neighbours, lock=False) if neighbours else None
        if match:
            return WriteOutcome(match.memory, False, layer="semantic", similarity=match.similarity)
        clean.setdefault("importance", placement.importance)
        clean.setdefault("pinned", placement.pinned)
        tier = clean.pop("tier", None) or placement.tier
        clean.pop("expires_at", None)
        return WriteOutcome(self.model(**clean, tier=tier, content_hash=hash_), True, skipped=skipped)

    def _prepare(self, fields: dict) -> tuple[dict, rules.Placement, str]:
        clean = rules.clean_memory_fields(fields, text_max_length=settings.MEMORYUI_TEXT_MAX_LENGTH)
        clean.setdefault("source", "manual")
        clean.setdefault("confidence", 0.7)
        clean.setdefault("metadata", {})
        if clean.get("status", "active") != "active":
            raise rules.MemoryValidationError({"status": ["new memories are active"]})
        clean.pop("status", None)
        placement = rules.place_memory(
            clean["kind"],
            clean["confidence"],
            entity_key=clean.get("entity_key"),
            peripheral_ttl_days=settings.MEMORYUI_PERIPHERAL_TTL_DAYS,
        )
        return clean, placement, rules.content_hash(clean["text"])

    def _semantic_neighbours(self, clean: dict, hash_: str) -> tuple[list, str | None, tuple | None]:
        """Dedup layer 3's candidates, looked up before the transaction (embedding is slow, and so
        is the LLM judge when it is on), why the lookup was skipped, and (embedder name, vector)
        of the text when it ran."""
        threshold = settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD
        if threshold is None:
            return [], None, None
        if self.find_duplicate(clean["scope"], hash_, clean.get("entity_key")):
            return [], None, None  # layers 1-2 will merge it: no need to embed
        from recall.dedup import semantic_neighbours

        # As low as a restatement may link: semantic_link decides which of these merge.
        floor = min(threshold, rules.RESTATEMENT_FLOOR)
        lookup = semantic_neighbours(clean["scope"], clean["text"], threshold=floor)
        return self._judged(clean, lookup.neighbours, threshold), lookup.skipped, lookup.embedded

    def _judged(self, clean: dict, neighbours: list, threshold: float) -> list:
        """The neighbours, those in the band below the threshold that no rule links or keeps apart
        carrying the LLM judge's verdict (or why there is none) when the judge is on."""
        target = dedup_judge.endpoint()
        band = [n for n in neighbours if n.similarity < threshold]
        if target is None or not band:
            return neighbours
        rows = self.get_queryset().active().filter(pk__in=[n.id for n in band]).values_list("pk", "text", "entity_key")
        existing = {str(pk): (text, key) for pk, text, key in rows}
        judged = []
        for neighbour in neighbours:
            text, key = existing.get(neighbour.id, (None, None))
            if neighbour.similarity < threshold and text is not None:
                detail, _ = rules.semantic_link(text, clean["text"], neighbour.similarity, threshold)
                asked = detail is None and not rules.entity_keys_differ(key, clean.get("entity_key"))
                if asked and not rules.semantic_merge_blocker(text, clean["text"]):
                    neighbour = replace(neighbour, verdict=dedup_judge.judge(text, clean["text"], target))
            judged.append(neighbour)
        return judged

    def _semantic_duplicate(self, clean: dict, neighbours: list, *, lock: bool = True) -> SemanticMatch | None:
        """The nearest neighbour that is still active in the scope and may be merged into (dedup
        layer 3 by rules.semantic_link: near enough and not kept apart, or a restatement; or, in
        the band below the threshold, called a duplicate by the LLM judge)."""
        rows = self.get_queryset().active().filter(scope=clean["scope"], pk__in=[n.id for n in neighbours])
        if lock:
            rows = rows.select_for_update()
        by_id = {str(m.pk): m for m in rows}
        threshold = settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD
        key = clean.get("entity_key")
        for neighbour in neighbours:
            existing = by_id.get(neighbour.id)
            if existing is None:
                continue
            detail, _ = rules.semantic_link(
                existing.text, clean["text"], neighbour.similarity, threshold, existing.entity_key, key
            )
            verdict = getattr(neighbour, "verdict", None)
            keys_differ = rules.entity_keys_differ(key, existing.entity_key)
            if detail is None and isinstance(verdict, dedup_judge.Verdict) and verdict.duplicate and not keys_differ:
                detail = verdict.describe()
            if detail is not None:
                return SemanticMatch(existing, neighbour.similarity, detail, verdict)
        return None

    def judge_notes(self, neighbours: list) -> str:
        """What the LLM judge said of the neighbours it was asked about, for the created event."""
        notes = []
        for neighbour in neighbours:
            verdict = getattr(neighbour, "verdict", None)
            if verdict is not None:
                said = verdict.describe() if isinstance(verdict, dedup_judge.Verdict) else verdict
                notes.append(f"{neighbour.id} ({neighbour.similarity:.3f}): {said}")
        return "; ".join(notes)


@dataclass(frozen=True)
class SemanticMatch:
    """Dedup layer 3's match: the memory a write merges into, how near, and why."""

    memory: Memory
    similarity: float
    detail: str  # "" (above the threshold), a restatement, or the judge's verdict
    verdict: object = None  # the LLM judge's Verdict, when it was asked


class Memory(models.Model):
    class Kind(models.TextChoices):
        ENTITY = "entity"
        PREFERENCE = "preference"
        FACT = "fact"
        PROJECT_STATE = "project_state", "project state"
        RELATIONSHIP = "relationship"
        PROCEDURE = "procedure"
        REMEMBER = "remember"
        SUMMARY = "summary"
        NOTE = "note"

    class Tier(models.TextChoices):
        CORE = "core"
        WORKING = "working"
        PERIPHERAL = "peripheral"

    class Status(models.TextChoices):
        ACTIVE = "active"
        TOMBSTONED = "tombstoned"

    class Source(models.TextChoices):
        USER = "user"
        REMEMBER = "remember"
        EXTRACTOR_L0 = "extractor:l0"
        EXTRACTOR_L1 = "extractor:l1"
        COMPACTION = "compaction"
        IMPORT = "import"
        MANUAL = "manual"
        CLEANUP = "cleanup"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    scope = models.CharField(max_length=rules.SCOPE_MAX_LENGTH)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    tier = models.CharField(max_length=12, choices=Tier.choices)
    text = models.TextField()
    importance = models.FloatField(validators=UNIT_INTERVAL)
    confidence = models.FloatField(default=0.7, validators=UNIT_INTERVAL)
    pinned = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    tombstone_reason = models.TextField(blank=True)
    tombstoned_at = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    # NULL (not "") for "no key", so the partial unique constraint ignores keyless memories.
    entity_key = models.CharField(max_length=rules.ENTITY_KEY_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    content_hash = models.CharField(max_length=64, editable=False)
    access_count = models.PositiveIntegerField(default=0)
    accessed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = MemoryManager()

    class Meta:
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
        queue_index_sync([self.pk])

    def get_absolute_url(self) -> str:
        return reverse("memory_detail", args=[self.pk])

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
        self, incoming: dict, *, layer: str, actor: str, batch=None, match: SemanticMatch | None = None
    ) -> None:
        """Fold a duplicate write into this memory: bump access and importance, maybe text.

        `match` (dedup layer 3) says how near the two were and why they merged (above the
        threshold, a restatement, the LLM judge's verdict); the merge event records it.
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
        if match is not None:
            after["similarity"] = round(match.similarity, 4)
            reason += f" (cosine similarity {match.similarity:.3f})"
            if match.detail:
                reason += f": {match.detail}"
            if isinstance(match.verdict, dedup_judge.Verdict):
                after["judge"] = match.verdict.to_dict()
        self.record(
            "merged",
            actor=actor,
            before=before,
            after=after,
            reason=reason,
            batch=batch,
            previous_updated_at=previous_updated_at,
        )


class IndexOutbox(models.Model):
    """Memories whose search-index entries may be out of date.

    A row is written in the same transaction as the change to the memory and removed once
    both indexes hold the new state; after commit a task is enqueued to do that. A crash
    between the commit and the index write leaves the row behind: it is visible as pending
    and `reindex` finishes the work.
    """

    memory_id = models.UUIDField(primary_key=True)
    queued_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["queued_at"]

    def __str__(self) -> str:
        return f"index sync pending for {self.memory_id}"


class PendingVector(models.Model):
    """A new memory's passage vector, computed by the write path for dedup layer 3.

    It waits here for the index sync, usually in another process, which then need not embed
    the same text again; the sync uses it only while the memory still has this content hash
    and the vector index this embedder, and deletes it once done.
    """

    memory_id = models.UUIDField(primary_key=True)
    embedder = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    vector = models.BinaryField()  # little-endian float32
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.embedder} vector of {self.memory_id}"


class IndexCheck(models.Model):
    """One verify, repair or rebuild of the search indexes: who ran it, when, and what it found."""

    class Action(models.TextChoices):
        VERIFY = "verify"
        REPAIR = "repair"
        REBUILD = "rebuild"

    action = models.CharField(max_length=10, choices=Action.choices)
    actor = models.CharField(max_length=200)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(null=True, help_text="verify: every index matches the database; else: it finished")
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["action", "-started_at"], name="indexcheck_action_started")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} at {self.started_at:%Y-%m-%d %H:%M}"


def queue_index_sync(memory_ids) -> None:
    """Record that these memories' index entries must be refreshed, and refresh them after commit."""
    ids = [uuid.UUID(str(pk)) for pk in memory_ids]
    if not ids:
        return
    now = timezone.now()
    IndexOutbox.objects.bulk_create(
        [IndexOutbox(memory_id=pk, queued_at=now) for pk in ids],
        update_conflicts=True,
        unique_fields=["memory_id"],
        update_fields=["queued_at"],
    )
    # One sync per transaction, however many writes it holds: 500 memories written in one
    # transaction are embedded and indexed in batches, not one by one. Ids of writes undone
    # by a savepoint rollback may ride along: a sync reads the database, so they are no-ops.
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        for _savepoints, callback, _robust in reversed(connection.run_on_commit):
            if isinstance(callback, _IndexSync) and not callback.done:
                callback.ids.extend(str(pk) for pk in ids)
                return
    # robust: a broker that is down must not turn a committed change into an error page;
    # the outbox row stays and `reindex` (or the next sync) finishes the work.
    transaction.on_commit(_IndexSync([str(pk) for pk in ids]), robust=True)


INDEX_SYNC_BATCH = 200


class _IndexSync:
    """The after-commit callback that enqueues the index sync of a transaction's memories."""

    def __init__(self, ids: list[str]):
        self.ids = ids
        self.done = False
        self.__qualname__ = "index sync"  # Django names a failing robust callback by it

    def __call__(self) -> None:
        self.done = True
        _enqueue_index_sync(list(dict.fromkeys(self.ids)))


def _enqueue_index_sync(ids: list[str]) -> None:
    from recall.tasks import sync_index  # the read path depends on the store, not the reverse

    for start in range(0, len(ids), INDEX_SYNC_BATCH):
        sync_index.delay(ids[start : start + INDEX_SYNC_BATCH])


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
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
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


TOKEN_PREFIX = "mui_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def usable(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A bearer token for agents and scripts; only its hash is stored."""

    name = models.CharField(max_length=100)
    key_prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, blank=True, help_text="Empty = every scope.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @classmethod
    def issue(cls, *, user, name: str, scopes: list[str] | None = None) -> tuple[ApiToken, str]:
        """Create a token and return it with the raw key, which is never stored or shown again."""
        name = (name or "").strip()
        if not name:
            raise rules.MemoryValidationError({"name": ["is required"]})
        normalized = []
        for scope in scopes or []:
            try:
                normalized.append(rules.normalize_scope(scope))
            except rules.ScopeError as exc:
                raise rules.MemoryValidationError({"scopes": [f"{scope!r}: {exc}"]}) from None
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name,
            key_prefix=raw[: len(TOKEN_PREFIX) + 8],
            key_hash=hash_token(raw),
            scopes=sorted(set(normalized)),
            user=user,
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> ApiToken | None:
        token = cls.objects.usable().select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.user.is_active:
            return None
        now = timezone.now()
        # Write at most once a minute: a busy agent should not turn every read into a write.
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return token

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def allowed_scopes(self) -> list[str] | None:
        """The scopes this token may see, or None for every scope."""
        return list(self.scopes) or None

    def revoke(self) -> bool:
        if self.revoked_at:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True


# --- transcripts and background work ----------------------------------------------------------


class Transcript(models.Model):
    """An agent's conversation as it was posted; memory is extracted from its projection."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    scope = models.CharField(max_length=rules.SCOPE_MAX_LENGTH, db_index=True)
    title = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, help_text="last time messages were added")
    extracted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"transcript {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("transcript_detail", args=[self.pk])


class Message(models.Model):
    """One message of a transcript, at its index; never changed once stored (ingestion is by index)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SYSTEM = "system"

    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="messages")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=40, blank=True)
    source = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    # What the last extraction made of this message: its run, and each outcome (added as
    # kind/tier, merged into a memory, skipped and why).
    extraction = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["transcript", "index"]
        constraints = [models.UniqueConstraint(fields=["transcript", "index"], name="message_unique_index")]

    def __str__(self) -> str:
        return f"{self.transcript_id}#{self.index} {self.role}"

    def as_dict(self) -> dict:
        """The message in the transcript JSON format."""
        data = {"role": self.role, "content": self.content}
        for name in ("tool_calls", "tool_call_id", "channel", "source"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        if self.created_at:
            data["created_at"] = self.created_at.isoformat()
        return data


class TaskRun(models.Model):
    """One background job (an extraction, a reindex): what it was asked, how far it got, how it ended."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=40, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    actor = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} ({self.created_at:%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("task_detail", args=[self.pk])

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 100 if self.status == self.Status.SUCCEEDED else 0
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    def start(self, total: int) -> None:
        self.status, self.started_at, self.progress_total = self.Status.RUNNING, timezone.now(), total
        self.attempts += 1
        self.error = ""
        self.save(update_fields=["status", "started_at", "progress_total", "attempts", "error"])

    def advance(self, done: int, counts: dict) -> None:
        TaskRun.objects.filter(pk=self.pk).update(progress_done=done, counts=counts)
        self.progress_done, self.counts = done, counts

    def finish(self, result: dict) -> None:
        self.status, self.finished_at, self.result = self.Status.SUCCEEDED, timezone.now(), result
        self.progress_done = self.progress_total
        self.save(update_fields=["status", "finished_at", "result", "progress_done", "counts"])

    def fail(self, error: str) -> None:
        self.status, self.finished_at, self.error = self.Status.FAILED, timezone.now(), error[:5000]
        self.save(update_fields=["status", "finished_at", "error", "counts"])
