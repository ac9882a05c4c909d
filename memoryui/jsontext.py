"""JSON text memoryui did not write, read under the API's limits: the one reader of it.

The API's request bodies (api.parsers), session logs (ingest.sessionlogs), memory files
and JSONL lines (ingest.memoryfiles, ingest.jsonl), the dashboard's JSON fields
(web.forms), a tool call's arguments (ingest.transcripts), a model's answer
(memoryui.llm) and a labelled set (import_golden) are all read by `loads`, which refuses,
without handing the text to Python's decoder:

- a document larger than the API takes (`DATA_UPLOAD_MAX_MEMORY_SIZE`, 10 MiB);
- nesting deeper than `untrusted.MAX_JSON_DEPTH` levels (32): the decoder recurses once a level
  and raises RecursionError past about a thousand, and whatever reads the value next (an export,
  a schema check) recurses as deep. The nesting is measured on the text first (strings skipped),
  and the error names the place where it passes the limit (`$.metadata.a.a…`);
- NaN and Infinity, and numbers past a float's range, which no JSON client reads back; and
  integers of more digits than Python converts.

So a value `loads` gives is nested at most MAX_JSON_DEPTH levels: every later reader of it is
safe. Plain functions; Django only for the size limit's setting.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate

from django.conf import settings

from memoryui import untrusted

MAX_JSON_DEPTH = untrusted.MAX_JSON_DEPTH
PATH_MAX_CHARS = 200

# JSONTextError.code
SYNTAX = "syntax"  # not JSON
TOO_DEEP = "too_deep"  # JSON nested past the limit
TOO_LARGE = "too_large"  # more bytes than the API takes
NUMBER = "number"  # NaN, Infinity, a number no float holds, an integer of too many digits

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONTextError(ValueError):
    """Text `loads` does not read. `code` says why (SYNTAX, TOO_DEEP, TOO_LARGE, NUMBER), `reason`
    in words; `line`, `column` (1-based) and `position` (0-based) where, when known; `path` the
    JSON path of the first value nested past the limit and `depth` how deep the text nests (TOO_DEEP)."""

    def __init__(
        self,
        code: str,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
        position: int | None = None,
        path: str | None = None,
        depth: int | None = None,
    ):
        self.code, self.reason = code, reason
        self.line, self.column, self.position = line, column, position
        self.path, self.depth = path, depth
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path:
            return f"{self.path} {self.reason}"
        if self.line is not None:
            return f"{self.reason} (line {self.line}, column {self.column})"
        return self.reason


def max_bytes() -> int | None:
    """The most bytes a document may have: what the API takes in a request body."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def loads(text: str, *, root: str = "$", max_depth: int = MAX_JSON_DEPTH, limit: int | None = None) -> object:
    """The value of the JSON document `text`, or JSONTextError. `root` names the document in
    error paths (`metadata` gives `metadata.a.a…`); `limit` is the most UTF-8 bytes it may have
    (default: `max_bytes()`)."""
    limit = max_bytes() if limit is None else limit
    if limit is not None and len(text) > limit // 4:  # at most 4 bytes a character: count only when it may matter
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise JSONTextError(
                TOO_LARGE, f"is {size:,} bytes; at most {limit:,} (the API's DATA_UPLOAD_MAX_MEMORY_SIZE)"
            )
    deepest = nesting(text, max_depth)
    if deepest > max_depth:
        raise _too_deep(text, root, max_depth, deepest)
    return _decode(text)


def nesting(text: str, enough: int = 0) -> int:
    """How deep the arrays and objects of `text` nest, strings skipped (of text that is not JSON:
    an estimate). Text with no more than `enough` brackets is not looked at closer."""
    if text.count("[") + text.count("{") <= enough:
        return min(enough, text.count("[") + text.count("{"))
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _decode(text: str) -> object:
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise JSONTextError(SYNTAX, exc.msg, line=exc.lineno, column=exc.colno, position=exc.pos) from None
    except RecursionError:  # not past the nesting measured: a caller already deep in its own stack
        raise JSONTextError(TOO_DEEP, f"is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:  # a constant or a number refused below, an integer of too many digits
        raise JSONTextError(NUMBER, str(exc)) from None


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"the number {text[:40]} is too large")
    return number


def _too_deep(text: str, root: str, max_depth: int, deepest: int) -> JSONTextError:
    """The error for text nested past `max_depth`: the path of the first value past it, found by
    reading the text cut there (an empty array in that value's place, what is open closed), which
    is nested no deeper than the limit allows plus one. Text that is not JSON up to that place
    gets the decoder's error for it instead."""
    reason = f"is nested more than {max_depth} levels deep"
    closers: list[str] = []
    for token in _TOKEN.finditer(text):
        char = token.group()
        if char in "[{":
            if len(closers) == max_depth:
                cut = text[: token.start()] + "[]" + "".join(reversed(closers))
                value = _decode(cut)  # its JSONTextError is the text's own, at the same place
                where = next(
                    (path for path, why in untrusted.json_problems(value, root, max_depth=max_depth) if why == reason),
                    None,
                )
                line = text.count("\n", 0, token.start()) + 1
                column = token.start() - text.rfind("\n", 0, token.start())
                return JSONTextError(
                    TOO_DEEP,
                    reason,
                    path=_short(where),
                    line=line,
                    column=column,
                    position=token.start(),
                    depth=deepest,
                )
            closers.append("]" if char == "[" else "}")
        elif char in "]}" and closers:
            closers.pop()
    return JSONTextError(TOO_DEEP, reason, depth=deepest)  # unreachable for text nested as measured


def _short(path: str | None) -> str | None:
    if path is None or len(path) <= PATH_MAX_CHARS:
        return path
    return path[: PATH_MAX_CHARS - 1] + "…"
