"""What every session-log reader shares: its error, JSON parsing, content limits."""

from __future__ import annotations

import json
import re

from memoryui import untrusted
from memoryui.ingestion import MAX_CONTENT_CHARS


class SessionLogError(ValueError):
    """A file that cannot be read in the format asked for (or any format, when detecting)."""


def _strict_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def load_json(text: str, what: str = "the file"):
    """The JSON document in `text`, or SessionLogError naming the line and column."""
    try:
        return json.loads(text, parse_constant=_strict_constant)
    except json.JSONDecodeError as exc:
        raise SessionLogError(f"Invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise SessionLogError(f"is nested more than {untrusted.MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:
        raise SessionLogError(f"Invalid JSON: {exc}") from None


def clip(text: str) -> str:
    """Text within a message's limit: a long tool output keeps its head and says what was cut."""
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    marker = f"\n[… {len(text) - MAX_CONTENT_CHARS + 100} characters cut on import]"
    return text[: MAX_CONTENT_CHARS - 100] + marker


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
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


_SAFE_ID = re.compile(r"[^A-Za-z0-9_.:-]+")


def slug(text: str) -> str:
    return _SAFE_ID.sub("-", text).strip("-")[:60] or "call"
