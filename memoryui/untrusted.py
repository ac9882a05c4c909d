"""What untrusted input may hold: checks every boundary applies before anything is stored.

Memory text, metadata, transcripts and import lines come from users and models. Some strings
can be parsed but not stored or shown: JSON allows a lone UTF-16 surrogate ("\\udfff"), which
no UTF-8 text, database or page can hold, and a NUL, which PostgreSQL text refuses. Nesting a few
thousand levels deep exhausts the recursion of whatever reads the value next. These are refused
where the value enters (the API, the forms, `import_memories`, transcripts), naming the field or
line, so nothing half-written is left behind and no stored row can break a page later.

Plain functions over plain values; no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MAX_JSON_DEPTH = 32  # objects and arrays inside one another, the value itself being depth 1
# Characters that show nothing on their own: controls, spaces and separators, zero-width and
# other format characters (joiners, bidi marks, variation selectors, fillers) and private use.
# A regex class rather than Unicode categories, so the API's schema states the same rule
# (api.schema): one that an ECMA-262 and a Python regex read alike.
INVISIBLE_CLASS = (
    "\\x00-\\x20\\x7f-\\xa0\\xad\\u034f\\u061c\\u115f\\u1160\\u1680\\u17b4\\u17b5\\u180b-\\u180f"
    "\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\u3164\\ue000-\\uf8ff\\ufe00-\\ufe0f\\ufeff"
    "\\uffa0\\ufff0-\\ufffb"
)
_VISIBLE = re.compile(f"[^{INVISIBLE_CLASS}]")


# What no text column, page or file can hold: a lone surrogate (valid only as a JSON escape) and NUL.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def string_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text (a lone surrogate, a NUL), or None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    index, code = found.start(), ord(found.group())
    if code == 0:
        return f"holds a NUL character at character {index}"
    return f"holds a lone UTF-16 surrogate (U+{code:04X}) at character {index}, which no text can store"


def is_visible(value: str) -> bool:
    """Whether `value` has at least one character that shows (not only controls, zero-width
    characters and spaces)."""
    return _VISIBLE.search(value) is not None


def json_problems(value: object, path: str = "$", *, max_depth: int = MAX_JSON_DEPTH) -> Iterator[tuple[str, str]]:
    """(JSON path, reason) for each string in `value` (keys included) that cannot be stored, and
    for nesting deeper than `max_depth`. Iterative, so a deeply nested value cannot exhaust the
    recursion of this check either."""
    stack: list[tuple[object, str, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if problem := string_problem(item):
                yield where, problem
        elif isinstance(item, dict | list):
            if depth > max_depth:
                yield where, f"is nested more than {max_depth} levels deep"
                continue
            if isinstance(item, dict):
                for key, child in reversed(list(item.items())):
                    key_text = str(key)
                    if problem := string_problem(key_text):
                        yield where, f"has a key that {problem}"
                        continue
                    stack.append((child, f"{where}.{key_text}", depth + 1))
            else:
                for index in range(len(item) - 1, -1, -1):
                    stack.append((item[index], f"{where}[{index}]", depth + 1))


def first_json_problem(value: object, path: str = "$", *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """`<path>: <reason>` of the first problem `json_problems` finds, or None."""
    for where, reason in json_problems(value, path, max_depth=max_depth):
        return f"{where}: {reason}"
    return None
