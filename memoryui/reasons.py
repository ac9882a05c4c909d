"""Reasons are data: why the read path decided what it did, as a code with its parameters.

Every decision of search and recall carries its reasons (searchindex.answerability labels a
candidate and answers a query; recall.heuristic, recall.toolfilter, recall.block, recall.selector and
recall.pipeline decide what is recalled). A reason is made from a code of `CODES` and the parameters
its template names:

    Reason("past_candidates", n=20)        # str(): "past the first 20 candidates"

and its words are made from them, by the template, when it is made. A `Reason` is that text, a
`str`: the API, the command line, the pages and the traces show reasons as words, byte for byte as
they were before reasons had codes, and none of them has to change. What reads a reason back
(recall.explain, the pipeline itself) switches on `code` and reads `params`, never the words.

Stored, a reason is `{"code": <code>, **params}` (`to_dict`, `from_dict`); a parameter that is a
reason itself (the answerability reason that "below floor: …" wraps, the block placement that
"heuristic rank 3: …" gives) is stored the same way, nested. Where a record lists reasons as text it
lists their codes beside them, in the same order (recall.pipeline says where).

A record written before reasons had codes holds the words only: `from_text` reads them back into a
code and its parameters. It is the one place reason text is parsed, and only for such records
(`restore`): a text no template matches is `free_text`.

Plain values only: no database, no index; searchindex and recall use it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping
from string import Formatter
from typing import Any


class Template:
    """A code's words: a `str.format` template naming its parameters, some of them reasons (`nested`)."""

    def __init__(self, text: str, *, nested: tuple[str, ...] = ()):
        parts = list(Formatter().parse(text))
        self.text = text
        self.nested = nested
        # name → kind: "reason", "int" (d), "percent" (%), "float" (f, g) or "text" (no format spec).
        self.fields = {name: _kind(spec, name in nested) for _, name, spec, _ in parts if name is not None}
        # How much of the words is fixed: from_text tries the most specific template first.
        self.literal = sum(len(literal) for literal, *_ in parts)
        pattern = "".join(
            re.escape(literal) + (f"(?P<{name}>{_PATTERNS[self.fields[name]]})" if name is not None else "")
            for literal, name, _, _ in parts
        )
        self._pattern = re.compile(pattern, re.DOTALL)

    def render(self, params: Mapping[str, Any]) -> str:
        return self.text.format(**params)

    def read(self, text: str) -> dict | None:
        """The parameters `text` was made from, or None when it is not made from this template."""
        match = self._pattern.fullmatch(text)
        if match is None:
            return None
        return {name: _READERS[kind](match[name]) for name, kind in self.fields.items()}


def _kind(spec: str, nested: bool) -> str:
    if nested:
        return "reason"
    if spec.endswith("d"):
        return "int"
    if spec.endswith("%"):
        return "percent"
    if spec.endswith(("f", "g")):
        return "float"
    assert spec == "", spec
    return "text"


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_PATTERNS = {"int": r"-?\d+", "percent": rf"{_NUMBER}%", "float": _NUMBER, "text": ".*?", "reason": ".+"}
_READERS = {
    "int": int,
    "percent": lambda value: float(value[:-1]) / 100,
    "float": float,
    "text": str,
    "reason": lambda value: from_text(value),
}
_COERCE = {"int": operator.index, "percent": float, "float": float, "text": str}

# Every code, by who gives it. The words are exactly those the read path has always shown.
CODES: dict[str, Template] = {
    # searchindex.answerability: why a candidate is strong, weak or below the floor
    "vector_not_counted": Template("vector similarity not counted: {refused}"),
    "vector_margin": Template("vector {margin:+.3f} over the anchor"),
    "vector_margin_checked": Template(
        "vector {margin:+.3f} over the anchor (outside the top k, read from its stored vector)"
    ),
    "no_vector_match": Template("no vector match"),
    "bm25_coverage": Template("BM25 covers {coverage:.0%} of the query"),
    "no_bm25_match": Template("no BM25 match"),
    "strong_margin": Template("strong: margin ≥ {strong_margin:+.3f}"),
    "strong_coverage": Template("strong: coverage ≥ {strong_coverage:.0%}"),
    "strong_agreement": Template(
        "strong: both retrievers agree (margin ≥ {agree_margin:+.3f} and coverage ≥ {agree_coverage:.0%})"
    ),
    "weak": Template("weak: margin < {strong_margin:+.3f} and coverage < {strong_coverage:.0%}"),
    "below_floor": Template("below floor: margin < {weak_margin:+.3f} and coverage < {weak_coverage:.0%}"),
    # searchindex.answerability (and recall.pipeline): whether the query is answered
    "one_strong_match": Template("1 strong match"),
    "strong_matches": Template("{n:d} strong matches"),
    "no_candidates": Template("no candidate in either index"),
    "no_strong_match": Template("no strong match ({weak:d} weak)"),
    "none_clears_floor": Template("no candidate clears the floor"),
    "no_words": Template("the query holds no words to search for (no letter or digit)"),
    # recall.heuristic: the signals that counted in a candidate's score
    "retrieval": Template("retrieval {share:.2f}"),
    "exact_key": Template("exact key match '{key}'"),
    "exact_name": Template("exact name match '{name}'"),
    "query_in_text": Template("query found in text"),
    "query_in_key": Template("query found in key"),
    "tag": Template("tag '{tag}'"),
    "text_coverage": Template("text covers {coverage:.0%} of the query"),
    "answer_type_missing": Template("asked for a {kind}, holds none (× {share:g})"),
    # recall.toolfilter: a memory naming a tool in use
    "names_active_tool": Template("names active tool {tool}, no schema marker"),
    "durable_marker": Template("kept: durable marker '{marker}' (active tool {tool})"),
    "active_tool_schema": Template("active tool {tool} + marker '{marker}'"),
    # recall.block: a candidate placed in the block or left out (the codes of recall.block, prefixed)
    "block_best": Template("the best match"),
    "block_close": Template("{share:.0%} of the best score; the cut is {cut:.0%}"),
    "block_below_cut": Template("{share:.0%} of the best score; the cut is {cut:.0%}"),
    "block_weak": Template("a weak match at {share:.0%} of the best score; a weak match needs {cut:.0%}"),
    "block_gap": Template(
        "{share:.0%} of the best score, after a drop of {drop:.0%} below #{after:d}; a drop of {gap:.0%} ends the block"
    ),
    "block_same_as": Template("says the same as #{position:d} (similarity {similarity:.3f} ≥ {threshold:g})"),
    "block_past_limit": Template("{share:.0%} of the best score, but the block is full (limit {limit:d})"),
    # recall.pipeline: each path's decision on a candidate
    "floored": Template("below floor: {why}", nested=("why",)),
    "query_not_answered": Template("query not answered: {why}", nested=("why",)),
    "past_candidates": Template("past the first {n:d} candidates"),
    "missing_required": Template("missing required '{word}'"),
    "heuristic_rank": Template("heuristic rank {rank:d}"),
    "block_left_out": Template("heuristic rank {rank:d}: {why}", nested=("why",)),
    "past_limit": Template("heuristic rank {rank:d}, past the limit of {limit:d}"),  # before recall.block
    "selector_pick": Template("selector pick {rank:d}"),
    "not_picked": Template("not picked by the selector"),
    "picked_by_select": Template("picked by select:"),
    # Words only: the selector model's own reason for a pick, or a text no template matches.
    "free_text": Template("{text}"),
    # recall.pipeline and recall.selector: why the selector did not answer (fallback_reason)
    "selector_off": Template("selector off in this profile"),
    "selector_not_configured": Template("selector not configured (no MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)"),
    "selector_nothing_offered": Template("nothing for the selector to choose from: the query is not answered"),
    "selector_no_endpoint": Template("not configured: {message}"),
    "selector_error": Template("error: {message}"),
    "selector_timeout": Template("timeout: {message}"),
    "selector_invalid_json": Template("invalid json: {message}"),
    "selector_invalid_answer": Template("invalid answer: {message}"),
}


class Reason(str):
    """A reason: its words (the `str`), made from `code` and `params` by the code's template.

    It compares and hashes as its words. Immutable; `to_dict()` is its stored form.
    """

    code: str
    params: dict[str, Any]

    def __new__(cls, code: str, /, **params: Any) -> Reason:
        template = CODES.get(code)
        if template is None:
            raise ValueError(f"unknown reason code {code!r}")
        if set(params) != set(template.fields):
            expected = ", ".join(template.fields) or "none"
            raise ValueError(f"reason {code!r} takes the parameters {expected}, not {', '.join(params) or 'none'}")
        values = {name: _coerce(template.fields[name], value) for name, value in params.items()}
        reason = super().__new__(cls, template.render(values))
        reason.__dict__.update(code=code, params=values)
        return reason

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Reason cannot be changed")

    def __repr__(self) -> str:
        params = "".join(f", {name}={value!r}" for name, value in self.params.items())
        return f"Reason({self.code!r}{params})"

    def __reduce__(self):
        return (_rebuild, (self.code, self.params))

    def to_dict(self) -> dict:
        """`{"code": …, **params}`, a nested reason as the same kind of dict."""
        return {"code": self.code, **{name: _stored(value) for name, value in self.params.items()}}

    @classmethod
    def from_dict(cls, data: Mapping) -> Reason:
        """The reason `to_dict` stored; ValueError when `data` is none (an unknown code, wrong parameters)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("code"), str):
            raise ValueError("a stored reason is an object with a code")
        params = {name: value for name, value in data.items() if name != "code"}
        template = CODES.get(data["code"])
        for name in template.nested if template else ():
            if isinstance(params.get(name), Mapping):
                params[name] = cls.from_dict(params[name])
        try:
            return cls(data["code"], **params)
        except TypeError as exc:  # a parameter of the wrong type
            raise ValueError(f"reason {data['code']!r}: {exc}") from None


def _coerce(kind: str, value: Any) -> Any:
    if kind == "reason":
        # A reason given as plain words (none of the read path's own) is free text.
        return value if isinstance(value, Reason) else Reason("free_text", text=str(value))
    return _COERCE[kind](value)


def _stored(value: Any) -> Any:
    return value.to_dict() if isinstance(value, Reason) else value


def _rebuild(code: str, params: dict) -> Reason:
    return Reason(code, **params)


def codes_of(reasons: Iterable[str]) -> list[dict]:
    """The stored form of a list of reasons, in order (a plain str, given by none of the codes, as free text)."""
    return [_coerce("reason", reason).to_dict() for reason in reasons]


# --- records written before reasons had codes -----------------------------------------------------

# The most specific template first (the most fixed words): "below floor: margin < …" before
# "below floor: {why}", free text last.
_BY_SPECIFICITY = sorted(CODES, key=lambda code: -CODES[code].literal)


def from_text(text: str) -> Reason:
    """The reason whose words are `text`: its code and parameters read back from them, or `free_text`.

    Only for a record written before reasons had codes (`restore`). The reason returned always says
    exactly `text`.
    """
    text = str(text)
    for code in _BY_SPECIFICITY:
        params = CODES[code].read(text)
        if params is None:
            continue
        if code in ("block_close", "block_below_cut"):
            # The two read alike; the numbers tell which, as recall.block decides: below the cut is out.
            code = "block_below_cut" if params["share"] < params["cut"] else "block_close"
        try:
            reason = Reason(code, **params)
        except (TypeError, ValueError):
            continue
        if reason == text:
            return reason
    return Reason("free_text", text=text)


def restore(texts: Any, codes: Any = None) -> list[Reason]:
    """The reasons a record lists: from their stored codes when it has them, else from their words.

    A code that cannot be rebuilt (from a newer version, or damaged) is read from its words instead.
    """
    texts = [str(text) for text in texts] if isinstance(texts, list | tuple) else []
    if not (isinstance(codes, list | tuple) and len(codes) == len(texts)):
        return [from_text(text) for text in texts]
    restored = []
    for text, data in zip(texts, codes, strict=True):
        try:
            restored.append(Reason.from_dict(data))
        except ValueError:
            restored.append(from_text(text))
    return restored


def restore_one(text: Any, code: Any = None) -> Reason | None:
    """One reason a record holds (None when it holds none), as `restore` reads a list."""
    if not text:
        return None
    [reason] = restore([text], [code] if code is not None else None)
    return reason
