"""What every session-log reader shares: its error, JSON parsing, content limits, and the
per-message fields a format has that the transcript JSON has none for."""

from __future__ import annotations

import json
import re

from ingest.ingestion import MAX_CONTENT_CHARS
from ingest.transcripts import arguments_value
from memoryui import jsontext


class SessionLogError(ValueError):
    """A file that cannot be read in the format asked for (or any format, when detecting)."""


def load_json(text: str, what: str = "the file"):
    """The JSON document in `text` (memoryui.jsontext: the API's limits), or SessionLogError
    naming the line and column, or the place nested too deep."""
    try:
        return jsontext.loads(text)
    except jsontext.JSONTextError as exc:
        raise SessionLogError(_why(exc)) from None


def load_line(line: str, lineno: int):
    """One JSONL line's value: JSONTextError (a ValueError) when it is not JSON, which may be a
    line cut short; SessionLogError naming the line when it is JSON memoryui does not read
    (nested too deep, too large, a number no JSON client reads back)."""
    try:
        return jsontext.loads(line)
    except jsontext.JSONTextError as exc:
        if exc.code == jsontext.SYNTAX:
            raise
        if exc.code == jsontext.NUMBER:
            raise SessionLogError(f"line {lineno} is not JSON: {exc.reason}") from None
        raise SessionLogError(f"line {lineno} {_why(exc)}") from None


def _why(exc: jsontext.JSONTextError) -> str:
    if exc.code == jsontext.TOO_DEEP:
        return f"{exc.reason} (at {exc.path})" if exc.path else exc.reason
    if exc.code == jsontext.TOO_LARGE:
        return exc.reason
    return f"Invalid JSON: {exc}"


_CUT = re.compile(r"\n\[… (?P<cut>\d+) characters cut on import\]\Z")
# A reader marks a message dict with what the format says of it that a transcript message has no
# field for (a tool result's `is_error`, an orphan result's tool name); `keep_message_fields`
# moves the marks to the transcript's metadata, by message index, where the writers find them.
FIELDS = "_format_fields"


def clip(text: str) -> str:
    """Text within a message's limit: a long tool output keeps its head and says what was cut."""
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    marker = f"\n[… {len(text) - MAX_CONTENT_CHARS + 100} characters cut on import]"
    return text[: MAX_CONTENT_CHARS - 100] + marker


def cut_notes(messages: list) -> list[str]:
    """A note for each message `clip` cut: which one, and how long it was."""
    notes = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        match = _CUT.search(content) if isinstance(content, str) else None
        if match and len(content) <= MAX_CONTENT_CHARS:
            length = int(match["cut"]) + MAX_CONTENT_CHARS - 100
            call = f", tool result for call {message['tool_call_id']}" if message.get("tool_call_id") else ""
            notes.append(
                f"message #{index} ({message.get('role')}{call}): {length:,} characters, "
                f"cut to {MAX_CONTENT_CHARS:,} (a message holds at most that)"
            )
    return notes


def keep_message_fields(transcript: dict) -> None:
    """Move the readers' marks (FIELDS) into `metadata["message_fields"]`, by message index."""
    kept = {}
    for index, message in enumerate(transcript.get("messages") or []):
        if isinstance(message, dict) and (fields := message.pop(FIELDS, None)):
            kept[str(index)] = fields
    if kept:
        transcript.setdefault("metadata", {})["message_fields"] = kept


def message_fields(transcript: dict, index: int) -> dict:
    """What the format said of the stored message at `index` beyond the transcript's fields."""
    metadata = transcript.get("metadata")
    kept = metadata.get("message_fields") if isinstance(metadata, dict) else None
    fields = kept.get(str(index)) if isinstance(kept, dict) else None
    return fields if isinstance(fields, dict) else {}


def placeholder_note(counts: dict[str, int]) -> list[str]:
    """A note for the attachments a reader replaced with a placeholder (`[image]`, …)."""
    return [
        f"replaced {count} {kind}(s) with [{kind}]: the transcript keeps text only"
        for kind, count in sorted(counts.items())
        if count
    ]


def as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def as_arguments(value: object) -> str:
    """Tool-call arguments as JSON text (strings are kept as given)."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)


def parse_arguments(text: str) -> object:
    """Arguments stored as JSON text back to a value (plain text stays text)."""
    return arguments_value(text)


_SAFE_ID = re.compile(r"[^A-Za-z0-9_.:-]+")


def slug(text: str) -> str:
    return _SAFE_ID.sub("-", text).strip("-")[:60] or "call"
