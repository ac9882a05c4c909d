"""`{% explain_run run as explained %}`: a recall's candidates grouped by stage, each outcome in words
(recall.explain), for the playground and the trace page alike."""

from __future__ import annotations

from django import template

from recall import explain

register = template.Library()


@register.simple_tag
def explain_run(run) -> explain.Explained:
    return explain.explain(run if isinstance(run, dict) else {})


@register.filter
def decision_words(decision: str | None) -> str:
    """A decision as the page says it: `not_selected` → `not selected`."""
    return explain.DECISION_WORDS.get(decision or "", (decision or "").replace("_", " "))
