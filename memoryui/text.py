"""Plain-text formatting shared by the pages (as template filters) and the commands' output."""

from __future__ import annotations


def shorten(text: str, length: int) -> str:
    """Cut to `length` characters, ending with an ellipsis when cut."""
    text = text or ""
    return text if len(text) <= length else text[: max(length - 1, 0)] + "…"
