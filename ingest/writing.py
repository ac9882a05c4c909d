"""The write path (docs/architecture.md "Write path", steps 6-7): normalize, place, dedup, then insert or merge.

    prepare      rules.clean_memory_fields validates and normalizes (scope, text, kind, ...);
                 rules.place_memory gives the tier, importance, pinning and TTL
    layers 1-2   the same normalized text or entity key in the scope (Memory.objects.find_duplicate)
    layer 3      the nearest indexed memories (searchindex.neighbours), merged by
                 rules.semantic_link, or in the band below the threshold by the opt-in LLM
                 judge (ingest.dedup_judge); looked up before the transaction, because
                 embedding (and the judge) are slow
    insert       one row, a `created` event and, for the index sync, the vector the lookup
                 computed (PendingVector) and an outbox row (Memory.save)

A duplicate is never inserted: the existing memory absorbs it (Memory.merge_duplicate) and a
`merged` event says by which layer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest import dedup_judge
from memoryui import rules
from memoryui.models import Memory, PendingVector
from searchindex.neighbours import Neighbour, semantic_neighbours


@dataclass
class WriteOutcome:
    """What one write did: the memory it created, or the one it merged into (layer, similarity)."""

    memory: Memory
    created: bool
    layer: str | None = None  # normalized_text, entity_key or semantic, when merged
    similarity: float | None = None  # dedup layer 3's cosine similarity
    skipped: str | None = None  # why dedup layer 3 did not run, when it did not


@dataclass(frozen=True)
class SemanticMatch:
    """Dedup layer 3's match: the memory a write merges into, how near, and why."""

    memory: Memory
    similarity: float
    detail: str  # "" (above the threshold), a restatement, or the judge's verdict
    verdict: object = None  # the LLM judge's Verdict, when it was asked


def write(*, actor: str, id: uuid.UUID | None = None, semantic: bool = True, **fields) -> tuple[Memory, bool]:
    """Validate, normalize, place, dedup, insert or merge; returns (memory, created).

    A duplicate (same normalized text or entity key in the scope, or, with `semantic`, a text
    whose embedding is at least MEMORYUI_SEMANTIC_DEDUP_THRESHOLD similar to an indexed active
    memory's) is merged into the existing memory instead of inserted. `id` gives a new memory a
    stable id (demo data, restores); it is ignored when the write merges.
    """
    outcome = write_outcome(actor=actor, id=id, semantic=semantic, **fields)
    return outcome.memory, outcome.created


def write_outcome(
    *, actor: str, id: uuid.UUID | None = None, semantic: bool = True, batch: uuid.UUID | None = None, **fields
) -> WriteOutcome:
    """`write`, telling also which dedup layer merged it and at what similarity; `batch` marks
    the created or merged event as part of a batch (undone together)."""
    clean, placement, hash_ = _prepare(fields)
    neighbours, skipped, embedded = _semantic_neighbours(clean, hash_) if semantic else ([], None, None)
    with transaction.atomic():
        duplicate = Memory.objects.select_for_update().find_duplicate(clean["scope"], hash_, clean.get("entity_key"))
        if duplicate:
            existing, layer = duplicate
            existing.merge_duplicate(clean, layer=layer, actor=actor, batch=batch)
            return WriteOutcome(existing, False, layer=layer)
        match = _semantic_duplicate(clean, neighbours) if neighbours else None
        if match:
            _merge_semantic(match, clean, actor=actor, batch=batch)
            return WriteOutcome(match.memory, False, layer="semantic", similarity=match.similarity)
        now = timezone.now()
        tier = clean.pop("tier", None) or placement.tier
        expires_at = clean.pop("expires_at", None)
        if expires_at is None and placement.ttl_days and tier == Memory.Tier.PERIPHERAL:
            expires_at = now + timedelta(days=placement.ttl_days)
        clean.setdefault("importance", placement.importance)
        clean.setdefault("pinned", placement.pinned)
        memory = Memory(**clean, tier=tier, expires_at=expires_at, content_hash=hash_, created_at=now, updated_at=now)
        if id is not None:
            memory.id = id
        memory.save(force_insert=True)
        reason = "; ".join(filter(None, [skipped, judge_notes(neighbours)]))
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


def preview_write(*, semantic: bool = True, **fields) -> WriteOutcome:
    """What `write` would do, changing nothing: the memory it would merge into (and by which
    layer), or an unsaved memory with the tier, importance and pinning it would get."""
    clean, placement, hash_ = _prepare(fields)
    neighbours, skipped, _ = _semantic_neighbours(clean, hash_) if semantic else ([], None, None)
    duplicate = Memory.objects.find_duplicate(clean["scope"], hash_, clean.get("entity_key"))
    if duplicate:
        existing, layer = duplicate
        return WriteOutcome(existing, False, layer=layer)
    match = _semantic_duplicate(clean, neighbours, lock=False) if neighbours else None
    if match:
        return WriteOutcome(match.memory, False, layer="semantic", similarity=match.similarity)
    clean.setdefault("importance", placement.importance)
    clean.setdefault("pinned", placement.pinned)
    tier = clean.pop("tier", None) or placement.tier
    clean.pop("expires_at", None)
    return WriteOutcome(Memory(**clean, tier=tier, content_hash=hash_), True, skipped=skipped)


def _prepare(fields: dict) -> tuple[dict, rules.Placement, str]:
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


def _semantic_neighbours(clean: dict, hash_: str) -> tuple[list[Neighbour], str | None, tuple | None]:
    """Dedup layer 3's candidates, looked up before the transaction (embedding is slow, and so
    is the LLM judge when it is on), why the lookup was skipped, and (embedder name, vector)
    of the text when it ran."""
    threshold = settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD
    if threshold is None:
        return [], None, None
    if Memory.objects.find_duplicate(clean["scope"], hash_, clean.get("entity_key")):
        return [], None, None  # layers 1-2 will merge it: no need to embed
    # As low as a restatement may link: semantic_link decides which of these merge.
    floor = min(threshold, rules.RESTATEMENT_FLOOR)
    lookup = semantic_neighbours(clean["scope"], clean["text"], threshold=floor)
    return _judged(clean, lookup.neighbours, threshold), lookup.skipped, lookup.embedded


def _judged(clean: dict, neighbours: list[Neighbour], threshold: float) -> list[Neighbour]:
    """The neighbours, those in the band below the threshold that no rule links or keeps apart
    carrying the LLM judge's verdict (or why there is none) when the judge is on."""
    target = dedup_judge.endpoint()
    band = [n for n in neighbours if n.similarity < threshold]
    if target is None or not band:
        return neighbours
    rows = Memory.objects.active().filter(pk__in=[n.id for n in band]).values_list("pk", "text", "entity_key")
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


def _semantic_duplicate(clean: dict, neighbours: list[Neighbour], *, lock: bool = True) -> SemanticMatch | None:
    """The nearest neighbour that is still active in the scope and may be merged into (dedup
    layer 3 by rules.semantic_link: near enough and not kept apart, or a restatement; or, in
    the band below the threshold, called a duplicate by the LLM judge)."""
    rows = Memory.objects.active().filter(scope=clean["scope"], pk__in=[n.id for n in neighbours])
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
        verdict = neighbour.verdict
        keys_differ = rules.entity_keys_differ(key, existing.entity_key)
        if detail is None and isinstance(verdict, dedup_judge.Verdict) and verdict.duplicate and not keys_differ:
            detail = verdict.describe()
        if detail is not None:
            return SemanticMatch(existing, neighbour.similarity, detail, verdict)
    return None


def _merge_semantic(match: SemanticMatch, clean: dict, *, actor: str, batch: uuid.UUID | None) -> None:
    judge = match.verdict.to_dict() if isinstance(match.verdict, dedup_judge.Verdict) else None
    match.memory.merge_duplicate(
        clean,
        layer="semantic",
        actor=actor,
        batch=batch,
        similarity=match.similarity,
        detail=match.detail,
        judge=judge,
    )


def judge_notes(neighbours: list[Neighbour]) -> str:
    """What the LLM judge said of the neighbours it was asked about, for the created event."""
    notes = []
    for neighbour in neighbours:
        verdict = neighbour.verdict
        if verdict is not None:
            said = verdict.describe() if isinstance(verdict, dedup_judge.Verdict) else verdict
            notes.append(f"{neighbour.id} ({neighbour.similarity:.3f}): {said}")
    return "; ".join(notes)
