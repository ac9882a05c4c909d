"""Where the queries a scope was asked come from, for measuring its vector search (searchindex/tuning.py).

searchindex serves searches but keeps no log of them; the app that keeps the recalls does and
answers `asked` (recall/probes.py). A light module of its own, so connecting to it loads no index.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["asked", "asked_queries"]

# Sent for each scope measured, with `scope` and `limit`: each receiver returns texts of queries
# the scope was asked, newest first.
asked = Signal()


def asked_queries(scope: str, limit: int) -> list[str]:
    """Up to `limit` distinct query texts `scope` was asked, newest first, from every receiver of
    `asked` (a receiver's answers before the next's)."""
    found: dict[str, None] = {}
    for _, texts in asked.send(sender=None, scope=scope, limit=limit):
        for text in texts or ():
            if isinstance(text, str) and text.strip():
                found.setdefault(text, None)
    return list(found)[:limit]
