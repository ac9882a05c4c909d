"""Session logs agents write, read as transcripts and written back from a projection.

    claude-code  Claude Code's session JSONL (one event a line)                         claude_code.py
    gemini       gemini-cli / qwen-code `/chat save` checkpoints                        gemini.py
    openai       an OpenAI chat-completions message list                                openai.py
    memoryui     memoryui's own transcript JSON (docs/architecture.md "File formats")   native.py

`read()` turns a file's text into memoryui's transcript JSON (`{"id"?, "scope"?, "title"?,
"metadata", "messages"}`) that ingest.ingestion validates and stores; the format it came in
is kept in `metadata["format"]` so `export()` can give the projection back in it. Plain
functions; only `export()` reads the database (the stored transcript's projection).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ingest.sessionlogs import claude_code, gemini, native, openai
from ingest.sessionlogs.common import SessionLogError, cut_notes, keep_message_fields, message_fields
from ingest.sessionlogs.detect import detect
from ingest.sessionlogs.pairing import provider_safe
from ingest.transcripts import Msg, messages_of, projection_of

if TYPE_CHECKING:
    from memoryui.models import Transcript

FORMATS = ("memoryui", "claude-code", "gemini", "openai")
PROVIDER_FORMATS = ("claude-code", "gemini", "openai")  # a projection in these must be a valid request
FORMAT_LABELS = {
    "memoryui": "memoryui transcript JSON",
    "claude-code": "Claude Code session (.jsonl)",
    "gemini": "gemini-cli / qwen-code chat checkpoint",
    "openai": "OpenAI chat messages",
}
ALIASES = {"gemini-cli": "gemini", "qwen-code": "gemini", "claude": "claude-code", "transcript": "memoryui"}
_READERS = {"memoryui": native.read, "claude-code": claude_code.read, "gemini": gemini.read, "openai": openai.read}
_WRITERS = {"memoryui": native.write, "claude-code": claude_code.write, "gemini": gemini.write, "openai": openai.write}

__all__ = [
    "FORMATS", "FORMAT_LABELS", "Export", "Session", "SessionLogError",
    "detect", "dumps", "export", "format_name", "original_format", "read", "write",
]  # fmt: skip


@dataclass
class Session:
    format: str
    transcript: dict  # memoryui's transcript JSON, scope and id when the file has them
    notes: list[str] = field(default_factory=list)  # what was left out and why


@dataclass
class Export:
    format: str
    items: list[dict]  # the format's messages, events or contents
    about: dict  # the transcript's id, scope, title, metadata
    trimmed: list[int]  # indexes of the stored messages the projection left out
    notes: list[str]

    def text(self) -> str:
        return dumps(self.items, self.format, transcript=self.about)


def format_name(name: str) -> str:
    """The canonical format name for `name` (an alias such as `qwen-code` too), or SessionLogError."""
    canonical = ALIASES.get((name or "").strip().lower(), (name or "").strip().lower())
    if canonical not in FORMATS:
        raise SessionLogError(f"unknown format {name!r}: use one of {', '.join(FORMATS)}")
    return canonical


def read(text: str, format: str | None = None, *, filename: str = "") -> Session:
    """Read a session log's text (its format detected when not given) as a transcript."""
    fmt = format_name(format) if format else detect(text, filename=filename)
    transcript, notes = _READERS[fmt](text, filename=filename)
    metadata = transcript.get("metadata") if isinstance(transcript, dict) else None
    if isinstance(metadata, dict) and fmt != "memoryui":
        transcript["metadata"] = {**metadata, "format": fmt}
        keep_message_fields(transcript)
        notes = notes + cut_notes(transcript["messages"])
    return Session(format=fmt, transcript=transcript, notes=notes)


def write(messages: Sequence[Msg], format: str, *, transcript: dict | None = None) -> list[dict]:
    """The messages as the items of `format` (messages, events or contents); `transcript` gives
    the id, scope, title and metadata the format carries."""
    return _WRITERS[format_name(format)](list(messages), transcript or {})


def dumps(items: list[dict], format: str, *, transcript: dict | None = None) -> str:
    """The items `write` gave as the file's text: JSONL for Claude Code, JSON for the others."""
    fmt = format_name(format)
    if fmt == "claude-code":
        return claude_code.dumps(items, transcript or {})
    if fmt == "memoryui":
        return native.dumps(items, transcript or {})
    return json.dumps(items, ensure_ascii=False, indent=2) + "\n"


def export(transcript: Transcript, format: str | None = None, *, projected: bool = True) -> Export:
    """A stored transcript's messages written in `format` (default: the format it came in): its
    projection when `projected` — provider-safe, the trailing open tool exchange trimmed — else
    every stored message. A projection written in a provider's format is made what the provider
    accepts (`pairing.provider_safe`), and the notes say what that changed."""
    fmt = format_name(format) if format else original_format(transcript.metadata)
    if projected:
        projection = projection_of(transcript)
        messages, trimmed, notes = projection.messages, [m.index for m in projection.trimmed], projection.notes
        if fmt in PROVIDER_FORMATS:
            messages, changed = provider_safe(messages)
            notes = [*notes, *changed]
    else:
        messages, trimmed, notes = messages_of(transcript), [], []
    about = {
        "id": transcript.external_id,
        "scope": transcript.scope,
        "title": transcript.title,
        "metadata": transcript.metadata if isinstance(transcript.metadata, dict) else {},
    }
    notes = [*notes, *_lost_error_flags(messages, fmt, about), *_lost_in_format(messages, fmt)]
    return Export(format=fmt, items=write(messages, fmt, transcript=about), about=about, trimmed=trimmed, notes=notes)


def _lost_error_flags(messages: Sequence[Msg], fmt: str, about: dict) -> list[str]:
    """A note on the tool results that were errors, for a format with no place to say so."""
    if fmt not in ("openai", "gemini"):
        return []
    errors = [m.index for m in messages if m.role == "tool" and message_fields(about, m.index).get("is_error")]
    if not errors:
        return []
    shown = ", ".join(f"#{index}" for index in errors)
    return [f"messages {shown}: tool results marked as errors; {FORMAT_LABELS[fmt]} have no error flag"]


def _lost_in_format(messages: Sequence[Msg], fmt: str) -> list[str]:
    """Notes on what `fmt` has no place for: a Gemini checkpoint's system messages (the system
    instruction is not saved in it), and the times of messages in formats that keep none."""
    notes = []
    if fmt == "gemini" and (system := [m.index for m in messages if m.role == "system"]):
        shown = ", ".join(f"#{index}" for index in system[:20]) + (", …" if len(system) > 20 else "")
        notes.append(f"messages {shown}: system messages left out; a Gemini checkpoint has no place for them")
    if fmt in _TIMELESS and any(m.created_at for m in messages):
        notes.append(f"the messages' times left out: {_TIMELESS[fmt]} no time")
    return notes


_TIMELESS = {"openai": "an OpenAI message has", "gemini": "a Gemini checkpoint's content has"}


def original_format(metadata: object) -> str:
    """The format a stored transcript came in (memoryui's own when it says none)."""
    fmt = metadata.get("format") if isinstance(metadata, dict) else None
    return fmt if fmt in FORMATS else "memoryui"
