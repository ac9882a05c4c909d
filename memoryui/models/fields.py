"""How JSON read back from the database is decoded.

Rows written before the input checks existed (memoryui.untrusted) may hold a lone UTF-16
surrogate in a JSON value: JSON can escape one ("\\udfff") and SQLite stores the escape, but no
UTF-8 page, API answer or file can hold the character itself, so encoding the response failed
with a 500 and an export was lost. Every JSONField of the store and of recall decodes with
StoredJSONDecoder, which turns such a surrogate into the text of its escape: shown and exported,
never a crash. (PostgreSQL's jsonb refuses lone surrogates, so there it never has anything to do.)
"""

from __future__ import annotations

import json
import re

from memoryui import untrusted

# A JSON escape of a surrogate, or a surrogate itself: a value holding neither needs no walk.
_MAY_HOLD_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by the text of its JSON escape (`\\udfff`)."""
    return untrusted.LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class StoredJSONDecoder(json.JSONDecoder):
    """Decode a stored JSON value; lone surrogates in strings and keys become their escaped text.

    A valid pair ("\\ud83d\\ude00") decodes to one character and is kept as it is.
    """

    def decode(self, s, *args, **kwargs):
        value = super().decode(s, *args, **kwargs)
        if isinstance(s, str) and not _MAY_HOLD_SURROGATE.search(s):
            return value
        return _escape_all(value)


def _escape_all(value):
    """`value` with every string escaped; iterative, so no nesting depth exhausts the recursion."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if not isinstance(value, dict | list):
        return value
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            for index, child in enumerate(item):
                if isinstance(child, str):
                    item[index] = escape_surrogates(child)
                elif isinstance(child, dict | list):
                    stack.append(child)
        else:
            for key in list(item):
                child = item[key]
                if isinstance(child, str):
                    child = escape_surrogates(child)
                elif isinstance(child, dict | list):
                    stack.append(child)
                safe_key = escape_surrogates(key)
                if safe_key != key:
                    del item[key]
                item[safe_key] = child
    return value
