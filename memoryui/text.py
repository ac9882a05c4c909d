"""Plain-text formatting shared by the pages (as template filters), their messages and the
commands' output."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.timesince import timesince, timeuntil


def shorten(text: str, length: int) -> str:
    """Cut to `length` characters, ending with an ellipsis when cut."""
    text = text or ""
    return text if len(text) <= length else text[: max(length - 1, 0)] + "…"


def count(n: int, singular: str, plural: str | None = None) -> str:
    """`1 note`, `3 notes`; `plural` where adding an s is wrong."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def memories(n: int) -> str:
    """`1 memory`, `3 memories`."""
    return count(n, "memory", "memories")


def exact_time(value: datetime) -> str:
    """A time to the second, with the zone, in the current time zone: `2026-11-25 22:25:23 UTC`."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def ago(value: datetime) -> str:
    """How long ago (or how soon) a time is, as a person says it: "just now", "3 minutes ago",
    "in 2 days"."""
    age = timezone.now() - value
    if abs(age) < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value, depth=1)} ago" if age > timedelta(0) else f"in {timeuntil(value, depth=1)}"
