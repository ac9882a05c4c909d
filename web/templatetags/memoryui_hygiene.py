"""What the task pages show of a batch: whether it can still be undone, or was."""

from __future__ import annotations

from django import template

from hygiene import undo

register = template.Library()


@register.simple_tag
def undo_state(batch) -> str | None:
    """`{% undo_state run.result.batch as state %}`: "undoable", "undone", or None (no batch)."""
    return undo.state(batch)
