"""One-shot clean-up of a polluted legacy store (docs/architecture.md "Raw transcript stored as memory").

A store an auto-capture path filled with raw user messages (every one a `note`) is cleaned in
four steps, each previewed first (counts and examples, nothing written) and then applied as
one batch of events that `undo.undo_batch` reverts exactly:

    snapshot  the scope, tombstoned memories included, written to a JSONL backup in the data dir
              (of the host that ran the step: on several hosts the backup names it, `host:path`)
    internal  notes that are leaked internal prompts (the fingerprints) or not knowledge at all
              (chit-chat, nudges, complaints, questions, one-off requests) are tombstoned,
              repeats included
    extract   the rest go through the write path's extractors (L0, and L1 when an LLM is
              configured): each durable fact is written as a typed memory, and the note is
              tombstoned once everything it held is stored
    demote    notes still left (no fact found, nothing certain) go to peripheral with
              importance 0.1 and the peripheral TTL, so decay retires them unless someone acts

Only active, unpinned notes are touched: typed memories and pinned notes are the user's.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest import extraction, jsonl, writing
from ingest.extraction.guards import tool_guard
from ingest.extraction.l1 import endpoint as l1_endpoint
from memoryui import rules
from memoryui.models import Memory
from memoryui.reports import Report
from memoryui.text import count, memories

STEPS = ("snapshot", "internal", "extract", "demote")
STEP_TITLES = {
    "snapshot": "Back up the scope",
    "internal": "Tombstone internal prompts and chit-chat",
    "extract": "Extract typed memories, then tombstone the raw notes",
    "demote": "Demote what is left to peripheral",
}
DEMOTED_IMPORTANCE = 0.1
EXAMPLES = 8


@dataclass
class Action(Report):
    """What a step does (or would do) to one note."""

    memory_id: str = field(metadata={"key": "id"})
    text: str
    action: str  # tombstone | extract | demote | keep
    reason: str
    # extract: the typed memories written or merged into
    facts: list[dict] = field(default_factory=list, metadata={"omit_empty": True})


@dataclass
class StepReport:
    scope: str
    step: str
    dry_run: bool
    actions: list[Action] = field(default_factory=list)
    batch: str | None = None  # the batch to undo (None for a dry run or a step that changed nothing)
    backup: str | None = None  # snapshot: the file written (or that would be); on several hosts `host:path`
    backed_up: int = 0

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(action.action for action in self.actions)
        counts = dict(sorted(counted.items()))
        if self.step == "extract":
            facts = [fact for action in self.actions for fact in action.facts]
            counts["typed_added"] = sum(1 for fact in facts if fact["action"] == "added")
            counts["typed_merged"] = sum(1 for fact in facts if fact["action"] == "merged")
        if self.step == "snapshot":
            counts["backed_up"] = self.backed_up
        return counts

    def reasons(self) -> list[tuple[str, int]]:
        """How many notes each reason covers, most first (the preview's summary)."""
        counted = Counter(_reason_family(action.reason) for action in self.actions)
        return counted.most_common()

    def examples(self, limit: int = EXAMPLES) -> list[Action]:
        return self.actions[:limit]

    def to_dict(self) -> dict:
        return {
            "scope": self.scope,
            "step": self.step,
            "dry_run": self.dry_run,
            "batch": self.batch,
            "backup": self.backup,
            "counts": self.counts,
            "reasons": dict(self.reasons()),
            "actions": [action.to_dict() for action in self.actions],
        }


# How a step's counts read: (would, does, did), for a preview, a confirmation and a result.
_VERBS = {
    "snapshot": ("would back up", "backs up", "backed up"),
    "internal": ("would tombstone", "tombstones", "tombstoned"),
    "extract": ("would write", "writes", "wrote"),
    "demote": ("would demote", "demotes", "demoted"),
}
_TENSES = ("preview", "ask", "done")


def describe(step: str, counts: dict, *, backup: str | None = None, tense: str = "preview") -> str:
    """A step's counts in words: "Would back up 87 memories to …", "Tombstoned 70 notes".

    `tense` is "preview" (a dry run: nothing written), "ask" (the confirmation) or "done".
    A preview or a confirmation names the backup folder: the file is named when it is written.
    """
    verb = _VERBS[step][_TENSES.index(tense)]
    if step == "snapshot":
        n = counts.get("backed_up", 0)
        where = backup if tense == "done" or not backup else str(Path(backup).parent)
        text = f"{verb} {memories(n)} (tombstoned ones included) to {where}"
    elif step == "internal":
        n = counts.get("tombstone", 0)
        text = f"{verb} {count(n, 'note')}: internal prompts and chit-chat, repeats included" if n else ""
    elif step == "extract":
        n, added, merged = counts.get("extract", 0), counts.get("typed_added", 0), counts.get("typed_merged", 0)
        then = {"preview": "then tombstone", "ask": "then tombstones", "done": "then tombstoned"}[tense]
        also = f" ({merged} more merged into memories already there)" if merged else ""
        typed = count(added, "typed memory", "typed memories")
        text = f"{verb} {typed}{also} from {count(n, 'note')}, {then} those notes" if n else ""
    else:
        n = counts.get("demote", 0)
        demoted = count(n, "note")
        text = f"{verb} {demoted} to peripheral, importance {DEMOTED_IMPORTANCE}, expiring unless pinned" if n else ""
    if not text:
        text = {"preview": "would change nothing", "ask": "changes nothing", "done": "changed nothing"}[tense]
        text += ": no note to " + {"internal": "tombstone", "extract": "extract", "demote": "demote"}[step]
    return text[0].upper() + text[1:]


def _reason_family(reason: str) -> str:
    """'internal prompt (fingerprint 'X')' → 'internal prompt'; 'not knowledge: question' stays."""
    return re.sub(r"\s*\(.*\)$", "", reason)


def notes(scope: str) -> list[Memory]:
    """The notes a clean-up may touch: active, unpinned, in `scope`, oldest first."""
    return list(
        Memory.objects.active().filter(scope=scope, kind=Memory.Kind.NOTE, pinned=False).order_by("created_at", "id")
    )


def run_step(
    scope: str,
    step: str,
    *,
    dry_run: bool,
    actor: str,
    l1: str = "auto",
    fingerprints: list[str] | None = None,
    progress=None,
) -> StepReport:
    """Preview (`dry_run`) or apply one step against the store as it is now."""
    if step not in STEPS:
        raise rules.MemoryValidationError({"step": [f"{step!r} is not one of: {', '.join(STEPS)}"]})
    if l1 not in extraction.L1_MODES:
        raise rules.MemoryValidationError({"l1": [f"must be one of {', '.join(extraction.L1_MODES)}"]})
    scope = rules.normalize_scope(scope)
    report = StepReport(scope=scope, step=step, dry_run=dry_run)
    if step == "snapshot":
        _snapshot(report)
        return report
    batch = uuid.uuid4()
    fingerprints = fingerprints if fingerprints is not None else settings.MEMORYUI_INTERNAL_FINGERPRINTS
    endpoint = l1_endpoint() if step == "extract" and l1 != "off" else None
    candidates = notes(scope)
    for done, note in enumerate(candidates, 1):
        if step == "internal":
            action = _internal(note, fingerprints, dry_run=dry_run, actor=actor, batch=batch)
        elif step == "extract":
            action = _extract(note, fingerprints, (l1, endpoint), dry_run=dry_run, actor=actor, batch=batch)
        else:
            action = _demote(note, dry_run=dry_run, actor=actor, batch=batch)
        if action is not None:
            report.actions.append(action)
        if progress:
            progress(done, len(candidates), report.counts)
    if not dry_run and report.actions:
        report.batch = str(batch)
    return report


def backup_dir() -> Path:
    path = settings.DATA_DIR / "backups"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _snapshot(report: StepReport) -> None:
    slug = re.sub(r"[^a-z0-9]+", "-", report.scope.lower()).strip("-") or "scope"
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S%fZ")
    path = backup_dir() / f"{slug}-{stamp}.jsonl"
    lines = jsonl.export_lines(scope=report.scope, include_tombstoned=True)
    if report.dry_run:
        report.backed_up = Memory.objects.filter(scope=report.scope).count()
        report.backup = str(path)
        return
    report.backed_up = jsonl.write_export(path, lines)
    # A data dir is per host when there are several: the written file is found on the host that
    # wrote it (the worker that ran the step), not on the web host showing the result.
    report.backup = f"{socket.gethostname()}:{path}" if settings.MEMORYUI_MULTI_HOST else str(path)


def _excerpt(text: str) -> str:
    return extraction.excerpt(text, 160)


def _internal(note: Memory, fingerprints, *, dry_run: bool, actor: str, batch) -> Action | None:
    role = (note.metadata or {}).get("role")
    reason = f"not the user's words (role {role})" if role in ("assistant", "tool", "system") else None
    reason = reason or extraction.not_knowledge(note.text, fingerprints)
    if reason is None:
        return None
    if not dry_run:
        note.tombstone(f"clean-up: {reason}", actor=actor, batch=batch)
    return Action(str(note.pk), _excerpt(note.text), "tombstone", reason)


def _extract(note: Memory, fingerprints, l1: tuple, *, dry_run: bool, actor: str, batch) -> Action | None:
    if extraction.not_knowledge(note.text, fingerprints):
        return None  # the internal step's to take; left alone when it was skipped
    found, _ = extraction.find_facts(note.text, l1)
    facts = [fact for fact in found if not tool_guard(fact.text)]
    if not facts:
        return None
    with transaction.atomic():
        # The typed memories' created/merged events join the batch: undo takes them back too.
        written = [_write_fact(note, fact, dry_run=dry_run, actor=actor, batch=batch) for fact in facts]
        if not dry_run:
            stored = ", ".join(f["id"] for f in written)
            note.tombstone(f"clean-up: knowledge stored as typed memories ({stored})", actor=actor, batch=batch)
    kinds = ", ".join(sorted({f["kind"] for f in written}))
    return Action(str(note.pk), _excerpt(note.text), "extract", f"stated facts → {kinds}", written)


def _write_fact(note: Memory, fact, *, dry_run: bool, actor: str, batch) -> dict:
    fields = {
        "scope": note.scope,
        "kind": fact.kind,
        "text": fact.text,
        "confidence": fact.confidence,
        "entity_key": fact.entity_key,
        "source": Memory.Source.CLEANUP,
        "metadata": {
            "origin": {"memory": str(note.pk)},
            "rule": fact.rule,
            "extracted_as": extraction.fact_source(fact),
        },
    }
    # Layers 1-2 only: a typed fact must never fold into one of the raw notes being cleaned
    # (the semantic layer cannot tell a note from the statement it holds). `dedup` finds the rest.
    if dry_run:
        outcome = writing.preview_write(semantic=False, **fields)
    else:
        outcome = writing.write_outcome(actor=actor, semantic=False, batch=batch, **fields)
    memory = outcome.memory
    return {
        "action": "added" if outcome.created else "merged",
        "id": str(memory.pk) if memory.pk and (not dry_run or not outcome.created) else None,
        "kind": memory.kind,
        "tier": memory.tier,
        "text": memory.text if outcome.created else fact.text,
        "entity_key": memory.entity_key,
    }


def _demote(note: Memory, *, dry_run: bool, actor: str, batch) -> Action | None:
    if note.tier == Memory.Tier.PERIPHERAL and note.importance <= DEMOTED_IMPORTANCE:
        return None
    reason = "no durable fact found: kept, but peripheral and expiring"
    if not dry_run:
        note.demote(importance=DEMOTED_IMPORTANCE, actor=actor, reason=f"clean-up: {reason}", batch=batch)
    return Action(str(note.pk), _excerpt(note.text), "demote", reason)


def run_all(scope: str, *, dry_run: bool, actor: str, l1: str = "auto") -> list[StepReport]:
    """Every step in order (each applied before the next is computed, unless `dry_run`).

    A dry run of later steps is computed as if the earlier ones had been applied: it runs the
    steps inside a transaction that is rolled back, so nothing is written.
    """
    if not dry_run:
        return [run_step(scope, step, dry_run=False, actor=actor, l1=l1) for step in STEPS]
    reports = []
    with transaction.atomic():
        for step in STEPS:
            report = run_step(scope, step, dry_run=step == "snapshot", actor=actor, l1=l1)
            report.dry_run, report.batch = True, None
            reports.append(report)
        transaction.set_rollback(True)
    return reports
