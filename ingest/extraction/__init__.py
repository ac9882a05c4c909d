"""Extraction: what a transcript's user messages teach the store (docs/architecture.md "Write path").

Every message of the transcript's projection (ingest.transcripts) goes through, in order:

    round       a message of an in-flight round (the last one, still at work) is never extracted from
    source      only the user's own words: not assistant/tool/system messages, not the
                heartbeat/cron/system channels, not internal/banner/repair/compaction sources
                (guards)
    fingerprint a leaked internal prompt (multi-agent tests, banners, repair prompts) (guards)
    salience    greetings, nudges, complaints, questions, one-off requests are not knowledge
                (salience, over the clauses of sentences)
    L0          deterministic extraction of typed facts (l0_entities, l0_statements)
    L1          with an LLM configured, the model reads the turns L0 found nothing in (`l1="auto"`)
                or every salient turn (`l1="always"`, on demand) (l1)
    tool guard  no tool schemas, call formats or failed-call transcripts (guards)
    write       the write path: classification, tier, importance, dedup layers 1-3

and each user message records what became of it: added as which kind and tier (and why),
merged into which memory (by which dedup layer, at what similarity), or skipped and why. A dry
run takes the same decisions against the current store and writes nothing.

Extraction is idempotent: a message records the run that processed it in the same transaction
as its memories, so a run retried after its worker died skips what it had done; and a later run
finding again a fact the message already gave (the same memory, by any dedup layer) skips it
instead of merging it into that memory once more: one message is one source, however often its
transcript is extracted. The same fact from another message or transcript merges (and counts).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest import writing
from ingest.extraction import guards, salience
from ingest.extraction.l0_statements import l0_extract
from ingest.extraction.l1 import RULE as L1_RULE
from ingest.extraction.l1 import L1Failed, l1_extract
from ingest.extraction.l1 import endpoint as l1_endpoint
from ingest.transcripts import IN_FLIGHT, Msg, projection_of
from ingest.writing import WriteOutcome
from memoryui.models import Message, Transcript
from memoryui.reports import Report

ACTIONS = ("added", "merged", "skipped")
L1_MODES = ("auto", "always", "off")


_IF_SET = {"omit_empty": True}


@dataclass
class Outcome(Report):
    """What became of one message, or of one fact found in it (its dict leaves out what is not set)."""

    message: int  # the message's index in the transcript
    action: str  # added | merged | skipped
    reason: str  # why: the rule that found it, or why it was skipped
    text: str = field(default="", metadata=_IF_SET)  # the memory text (added, merged) or the message's start (skipped)
    kind: str = field(default="", metadata=_IF_SET)
    tier: str = field(default="", metadata=_IF_SET)
    entity_key: str | None = field(default=None, metadata=_IF_SET)
    # added: the new memory; merged: the memory it merged into
    memory_id: str | None = field(default=None, metadata=_IF_SET)
    layer: str | None = field(default=None, metadata=_IF_SET)  # merged: the dedup layer
    similarity: float | None = field(default=None, metadata=_IF_SET)  # merged by layer 3


@dataclass
class ExtractionReport:
    transcript: str
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    complete: bool = True  # False: stopped at its deadline, before every user message was decided

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(outcome.action for outcome in self.outcomes)
        return {action: counted.get(action, 0) for action in ACTIONS}

    def to_dict(self) -> dict:
        """The `extract --json` contract: added, merged, skipped (and the rest for the UI)."""
        return {
            "transcript_id": self.transcript,
            "dry_run": self.dry_run,
            "added": [
                {"id": o.memory_id, "kind": o.kind, "tier": o.tier, "text": o.text, "message": o.message}
                for o in self.outcomes
                if o.action == "added"
            ],
            "merged": [
                {"id": o.memory_id, "into": o.memory_id, "text": o.text, "layer": o.layer, "similarity": o.similarity}
                for o in self.outcomes
                if o.action == "merged"
            ],
            "skipped": [
                {"text": o.text, "reason": o.reason, "message": o.message}
                for o in self.outcomes
                if o.action == "skipped"
            ],
            "counts": self.counts,
            "notes": self.notes,
            "complete": self.complete,
        }


def extract(
    transcript: Transcript,
    *,
    dry_run: bool = False,
    actor: str = "extractor",
    run_id: str | None = None,
    progress: Callable[[int, dict], None] | None = None,
    fingerprints: list[str] | None = None,
    l1: str = "auto",
    batch: uuid.UUID | None = None,
    deadline: float | None = None,
) -> ExtractionReport:
    """Run the write path over the transcript's projection; with `dry_run`, only say what it would do.

    `batch` marks the events of what it adds and merges, so `undo.undo_batch` takes them back.
    `deadline` (a `time.monotonic()` value) stops a dry run there: the report says how far it got
    (`complete` false, and a note), so a request holds its worker for a bounded time.
    """
    if l1 not in L1_MODES:
        raise ValueError(f"l1 must be one of {', '.join(L1_MODES)}")
    fingerprints = fingerprints if fingerprints is not None else settings.MEMORYUI_INTERNAL_FINGERPRINTS
    endpoint = l1_endpoint() if l1 != "off" else None
    projection = projection_of(transcript)
    report = ExtractionReport(transcript=str(transcript.pk), dry_run=dry_run, notes=list(projection.notes))
    stored = {m.index: m for m in transcript.messages.all()}
    user_messages = [msg for msg in projection.messages if msg.role == "user"]
    for done, msg in enumerate(user_messages, 1):
        if deadline is not None and dry_run and time.monotonic() > deadline:
            report.complete = False
            report.notes.append(
                f"stopped after {done - 1} of {len(user_messages)} user messages: a dry run in a request has a "
                "bounded time; run it in the background for the whole transcript"
            )
            break
        row = stored[msg.index]
        if not dry_run and run_id and row.extraction.get("run") == run_id:
            # Done by this run before its worker died: keep what it recorded.
            report.outcomes += [Outcome(**outcome) for outcome in row.extraction.get("outcomes", [])]
        else:
            round_ = projection.round_of(msg.index)
            outcomes = _decide(
                transcript, msg, round_, fingerprints, dry_run=dry_run, actor=actor, row=row, run_id=run_id,
                l1=(l1, endpoint), context=_previous_assistant(projection.messages, msg), batch=batch,
            )  # fmt: skip
            report.outcomes += outcomes
        if progress:
            progress(done, report.counts)
    if not dry_run:
        Transcript.objects.filter(pk=transcript.pk).update(extracted_at=timezone.now())
    return report


def _previous_assistant(messages: list[Msg], msg: Msg) -> str:
    before = [m for m in messages if m.index < msg.index and m.role == "assistant" and m.content.strip()]
    return before[-1].content if before else ""


def _decide(
    transcript, msg: Msg, round_, fingerprints, *, dry_run, actor, row: Message, run_id, l1, context, batch=None
) -> list[Outcome]:
    """The outcomes of one user message; written (with the message's record) in one transaction."""
    start = excerpt(msg.content)
    reason = None
    if round_ is not None and round_.state == IN_FLIGHT:
        reason = "in-flight round: never extracted until the round is over"
    reason = reason or guards.source_filter(msg.role, msg.channel, msg.source)
    reason = reason or not_knowledge(msg.content, fingerprints)
    facts = []
    if reason is None:
        facts, reason = find_facts(msg.content, l1, context=context)
    if reason:
        outcomes = [Outcome(message=msg.index, action="skipped", reason=reason, text=start)]
        if not dry_run:
            _record(row, outcomes, run_id)
        return outcomes
    given = _memories_given(row)
    with transaction.atomic():
        outcomes = [
            _write(transcript, msg, fact, dry_run=dry_run, actor=actor, given=given, batch=batch) for fact in facts
        ]
        if not dry_run:
            _record(row, outcomes, run_id)
    return outcomes


def not_knowledge(text: str, fingerprints) -> str | None:
    """Why a user's text is not knowledge at all (a leaked internal prompt, chit-chat, a
    question, a one-off request), or None when it may hold some."""
    if fingerprint := guards.internal_fingerprint(text, fingerprints):
        return f"internal prompt (fingerprint '{fingerprint}')"
    if why := salience.salience(text):
        return f"not knowledge: {why}"
    return None


def find_facts(text: str, l1: tuple, *, context: str = "") -> tuple[list, str | None]:
    """The durable facts in a salient text (L0, then L1 by `l1` = (mode, endpoint)), and when
    there are none, why."""
    facts = l0_extract(text)
    mode, endpoint = l1
    reason = None
    if mode != "off" and (mode == "always" or not facts):
        if endpoint is None:
            if not facts:
                reason = "no durable fact found (L0; no LLM configured for L1)"
        else:
            try:
                facts += l1_extract(text, endpoint, context=context)
            except L1Failed as exc:
                if not facts:
                    reason = f"L1 answer rejected: {exc}"
    if reason is None and not facts:
        reason = (
            "no durable fact found (L0, L1)" if endpoint is not None and mode != "off" else "no durable fact found (L0)"
        )
    return facts, reason


def fact_source(fact) -> str:
    if fact.explicit:
        return "remember"
    return "extractor:l1" if fact.rule == L1_RULE else "extractor:l0"


def _memories_given(row: Message) -> set[str]:
    """The memories an earlier extraction of this message added, merged it into, or found again."""
    return {o["memory_id"] for o in (row.extraction or {}).get("outcomes", []) if o.get("memory_id")}


def _write(transcript, msg: Msg, fact, *, dry_run: bool, actor: str, given: set[str], batch=None) -> Outcome:
    guard = guards.tool_guard(fact.text)
    if guard:
        return Outcome(message=msg.index, action="skipped", reason=f"tool guard: {guard}", text=fact.text)
    fields = {
        "scope": transcript.scope,
        "kind": fact.kind,
        "text": fact.text,
        "confidence": fact.confidence,
        "entity_key": fact.entity_key,
        "source": fact_source(fact),
        "metadata": {"origin": {"transcript": str(transcript.pk), "message": msg.index}, "rule": fact.rule},
    }
    written: WriteOutcome | None = None
    if dry_run or given:
        written = writing.preview_write(**fields)
        if not written.created and str(written.memory.pk) in given:
            memory = written.memory
            return Outcome(
                message=msg.index,
                action="skipped",
                reason=f"already extracted from this message: {memory.pk}",
                text=fact.text,
                kind=memory.kind,
                tier=memory.tier,
                entity_key=memory.entity_key,
                memory_id=str(memory.pk),
                layer=written.layer,
            )
    if not dry_run:
        written = writing.write_outcome(actor=actor, batch=batch, **fields)
    memory, merged = written.memory, not written.created
    return Outcome(
        message=msg.index,
        action="merged" if merged else "added",
        reason=fact.rule,
        text=fact.text if merged else memory.text,
        kind=memory.kind,
        tier=memory.tier,
        entity_key=memory.entity_key,
        memory_id=None if dry_run and not merged else str(memory.pk),  # a dry run's new memory has no id
        layer=written.layer,
        similarity=round(written.similarity, 4) if written.similarity is not None else None,
    )


def _record(row: Message, outcomes: list[Outcome], run_id: str | None) -> None:
    row.extraction = {
        "run": run_id,
        "at": timezone.now().isoformat(),
        "outcomes": [asdict(outcome) for outcome in outcomes],
    }
    row.save(update_fields=["extraction"])


def excerpt(text: str, length: int = 200) -> str:
    """The start of a text on one line, for reports."""
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1] + "…"
