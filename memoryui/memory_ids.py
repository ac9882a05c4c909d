"""Memory ids as people type them: the full id (with or without its dashes, any case) or the short
id the pages show (a prefix of at least `SHORT_ID_MIN` hex digits), resolved to exactly one memory.

Every form, API field, command option and MCP argument that takes a typed memory id resolves it
here, optionally within a scope or scopes (a caller that may not see a scope is told nothing of
its memories: they are unknown). Tombstoned memories resolve like active ones: a tombstoned id is
still an id ("why not recalled?" gives the tombstone as the reason, golden sets refuse it by name,
an agent may read it); a caller that needs an active memory checks `MemoryMatch.status`.

A prefix that names several memories is refused, listing a few of them by the prefix that tells
them apart and the start of their text, so the person can type a longer one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from memoryui.models import Memory
from memoryui.text import shorten

SHORT_ID_MIN = 8  # the pages show ids by their first 8 hex digits
CANDIDATES_SHOWN = 5  # an ambiguous prefix lists at most this many memories
CANDIDATE_TEXT_CHARS = 40
SHOWN_CHARS = 40  # of what was typed, in a message
_HEX_RE = re.compile(r"[0-9a-f]{1,32}")
_GROUPS = (8, 4, 4, 4, 12)  # the dashed form's groups of hex digits


@dataclass(frozen=True)
class MemoryMatch:
    """A memory a typed id names: enough to tell it apart and to judge it without loading the row."""

    id: uuid.UUID
    scope: str
    status: str
    text: str

    @property
    def short_id(self) -> str:
        return short_id(self.id)


class MemoryIdError(ValueError):
    """What was typed names no single memory. `code` is one of `malformed`, `too_short`, `unknown`,
    `ambiguous`; `candidates` holds the memories an ambiguous prefix names (at most CANDIDATES_SHOWN)."""

    def __init__(self, message: str, *, typed: str, code: str, candidates: tuple[MemoryMatch, ...] = ()):
        super().__init__(message)
        self.typed, self.code, self.candidates = typed, code, candidates


def short_id(pk) -> str:
    """The short id the pages show: the first SHORT_ID_MIN hex digits."""
    return str(pk)[:SHORT_ID_MIN]


def hex_digits(typed: str) -> str:
    """The hex digits of a typed id or prefix, lower case and without dashes; MemoryIdError when it is
    not one, or is shorter than a short id."""
    typed = str(typed or "").strip()
    shown = typed[:SHOWN_CHARS]
    digits = typed.casefold().replace("-", "")
    if not _HEX_RE.fullmatch(digits):
        message = f"{shown!r} is not a memory id (a full id, or its first {SHORT_ID_MIN} characters)"
        raise MemoryIdError(message, typed=typed, code="malformed")
    if len(digits) < SHORT_ID_MIN:
        message = f"{shown!r} is too short: give at least the {SHORT_ID_MIN} characters the pages show"
        raise MemoryIdError(message, typed=typed, code="too_short")
    return digits


def lookup(typed: str, *, scopes: str | Iterable[str] | None = None) -> MemoryMatch:
    """The one memory `typed` names (within `scopes`: one scope, several, or None for every scope).

    Raises MemoryIdError: malformed, too short, unknown (no memory within the scopes), ambiguous
    (several; the message lists some of them).
    """
    typed = str(typed or "").strip()
    digits = hex_digits(typed)
    rows = list(_matching(digits, scopes).order_by("pk").values_list("pk", "scope", "status", "text")[:2])
    if len(rows) == 1:
        return MemoryMatch(*rows[0])
    shown = typed[:SHOWN_CHARS]
    if not rows:
        if len(digits) == 32:
            raise MemoryIdError(f"no memory has the id {uuid.UUID(digits)}", typed=typed, code="unknown")
        raise MemoryIdError(f"no memory's id starts with {shown!r}", typed=typed, code="unknown")
    raise _ambiguous(typed, digits, scopes)


def resolve(typed: str, *, scopes: str | Iterable[str] | None = None) -> uuid.UUID:
    """The id of the one memory `typed` names (see `lookup`)."""
    return lookup(typed, scopes=scopes).id


def scopes_holding(typed: str, *, scopes: str | Iterable[str] | None = None) -> list[str]:
    """The scopes (among `scopes`) holding a memory `typed` could name, sorted; [] when it names none
    or is not an id at all."""
    try:
        digits = hex_digits(typed)
    except MemoryIdError:
        return []
    return sorted(set(_matching(digits, scopes).values_list("scope", flat=True)))


def _matching(digits: str, scopes: str | Iterable[str] | None):
    memories = Memory.objects.all()
    if scopes is not None:
        memories = memories.filter(scope__in=[scopes] if isinstance(scopes, str) else list(scopes))
    if len(digits) == 32:
        return memories.filter(pk=uuid.UUID(digits))
    # The dashed form: PostgreSQL compares a uuid as its dashed text, and on SQLite (ids stored as
    # 32 hex digits) Django drops the dashes again.
    return memories.filter(pk__startswith=_dashed(digits))


def _ambiguous(typed: str, digits: str, scopes) -> MemoryIdError:
    memories = _matching(digits, scopes)
    total = memories.count()
    candidates = tuple(
        MemoryMatch(*row)
        for row in memories.order_by("pk").values_list("pk", "scope", "status", "text")[:CANDIDATES_SHOWN]
    )
    one_scope = isinstance(scopes, str) or (scopes is not None and len(set(scopes)) == 1)
    where = f" of {scopes if isinstance(scopes, str) else next(iter(scopes))}" if one_scope else ""
    length = _telling_apart([str(c.id) for c in candidates], len(_dashed(digits)) + 1)
    listed = "; ".join(_candidate(c, length, with_scope=not one_scope) for c in candidates)
    more = f"; and {total - len(candidates)} more" if total > len(candidates) else ""
    message = (
        f"{typed[:SHOWN_CHARS]!r} is ambiguous: {total} memories{where} start with it: {listed}{more}; "
        "give more characters"
    )
    return MemoryIdError(message, typed=typed, code="ambiguous", candidates=candidates)


def _candidate(match: MemoryMatch, length: int, *, with_scope: bool) -> str:
    text = shorten(" ".join(match.text.split()), CANDIDATE_TEXT_CHARS)
    notes = [match.scope] if with_scope else []
    if match.status != Memory.Status.ACTIVE:
        notes.append(match.status)
    about = f" ({', '.join(notes)})" if notes else ""
    return f"{str(match.id)[:length]}{about} “{text}”"


def _telling_apart(ids: list[str], at_least: int) -> int:
    """The shortest length (from `at_least` on) at which the dashed ids' prefixes all differ."""
    length = max(at_least, SHORT_ID_MIN)
    while length < 36 and len({pk[:length] for pk in ids}) < len(ids):
        length += 1
    if length < 36 and ids and ids[0][length - 1] == "-":
        length += 1  # end on a digit, not a dash
    return length


def _dashed(digits: str) -> str:
    """A prefix of an id's 32 hex digits in the dashed form (8-4-4-4-12)."""
    parts, start = [], 0
    for size in _GROUPS:
        if start >= len(digits):
            break
        parts.append(digits[start : start + size])
        start += size
    return "-".join(parts)
