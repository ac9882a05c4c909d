"""The heuristic: deterministic, explainable recall over the fused candidates.

It answers whenever the model selector cannot (not configured, an error, invalid JSON, over
its latency budget), and it always runs beside the selector so that a trace shows both
decisions. Each candidate that cleared the relevance floor scores

    retrieval × (its fused score / the best fused score)
    + exact   when the query, or one of its terms, is the memory's entity key (or the key's
              value: "18600000000" for `phone:18600000000`) or a tool name it records
    + substring when the whole query occurs in its text or key
    + tags    when a query term is one of its tags
    + text    × the share of the query's terms its text holds, weighted by rarity (BM25's coverage)

with the weights of the recall profile (exact > substring > tags > text; docs/architecture.md
"Read path: recall", step 2), and the reasons list every signal that counted (memoryui.reasons).

Query syntax, for the playground and the API: `select:<id>,<id>` picks memories directly;
`+word` (or `+"two words"`) must occur in a memory's text, key or tags, and is searched too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memoryui.reasons import Reason
from recall import asks
from searchindex.tokens import tokenize

_SELECT_RE = re.compile(r"(?:^|\s)select:\s*([^\s,]+(?:\s*,\s*[^\s,]+)*)", re.IGNORECASE)
_REQUIRED_RE = re.compile(r'(?:^|(?<=\s))\+(?:"([^"]+)"|(\S+))')


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True)
class ParsedQuery:
    """A query with its syntax taken out."""

    text: str  # what the retrievers search for (required words included, without their "+")
    required: tuple[str, ...] = ()  # normalized words or phrases a memory must hold
    select_ids: tuple[str, ...] = ()  # `select:` picks, in the order given


def parse_query(raw: str) -> ParsedQuery:
    select_ids: list[str] = []
    for match in _SELECT_RE.finditer(raw):
        select_ids += [part.strip() for part in match.group(1).split(",") if part.strip()]
    text = _SELECT_RE.sub(" ", raw)
    required = [normalize(quoted or bare) for quoted, bare in _REQUIRED_RE.findall(text)]
    text = _REQUIRED_RE.sub(lambda m: " " + (m.group(1) or m.group(2)) + " ", text)
    return ParsedQuery(
        text=" ".join(text.split()),
        required=tuple(dict.fromkeys(word for word in required if word)),
        select_ids=tuple(dict.fromkeys(select_ids)),
    )


@dataclass(frozen=True)
class Weights:
    retrieval: float = 1.0
    exact: float = 1.0
    substring: float = 0.6
    tags: float = 0.3
    text: float = 0.2
    # The share of its score a memory keeps when the query asks for a time or a number and its
    # text holds none (recall.asks); 1: the kind of answer asked for is not looked at.
    answer_type: float = 0.7


@dataclass(frozen=True)
class Fields:
    """What the heuristic reads of one candidate memory."""

    text: str
    entity_key: str | None = None
    tags: Sequence[str] = ()
    tool_names: Sequence[str] = ()

    @classmethod
    def of(cls, memory) -> Fields:
        metadata = memory.metadata if isinstance(getattr(memory, "metadata", None), dict) else {}
        return cls(
            text=memory.text,
            entity_key=memory.entity_key,
            tags=_strings(metadata.get("tags")),
            tool_names=_strings(metadata.get("tools")),
        )


def _strings(value) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value if isinstance(item, str | int | float))
    return ()


@dataclass
class Scored:
    """One candidate's heuristic score and the signals behind it."""

    id: str
    score: float
    signals: list[Reason] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # required words it does not hold
    # The retrieval and text-coverage parts of the score, without the key, whole-query and tag
    # bonuses: what the block's size compares (recall.block). The bonuses order the candidates, but
    # the same fact stated in another language or without the query's exact words must not fall
    # below the cut because the best one also matched the query verbatim.
    evidence: float = 0.0


def missing_required(fields: Fields, required: Iterable[str]) -> list[str]:
    haystack = normalize(" ".join([fields.text, fields.entity_key or "", *fields.tags]))
    return [word for word in required if word not in haystack]


@dataclass(frozen=True)
class QueryForms:
    """The forms of the query every candidate is compared with, computed once per recall."""

    whole: str  # normalized
    terms: frozenset[str]  # its search terms (searchindex.tokens.tokenize)
    asks: tuple[str, ...] = ()  # the kinds of answer it asks for (recall.asks)

    @classmethod
    def of(cls, query: str) -> QueryForms:
        return cls(whole=normalize(query), terms=frozenset(tokenize(query)), asks=asks.asked(query))


def score(
    candidate_id: str,
    fused_share: float,
    coverage: float | None,
    fields: Fields,
    query: QueryForms,
    weights: Weights,
    required: Iterable[str] = (),
) -> Scored:
    """Score one candidate.

    `fused_share` is its fused score over the best candidate's (0..1); `coverage` is the share
    of the query's terms, weighted by rarity, its text holds (BM25's, None when BM25 missed it).
    """
    result = Scored(id=candidate_id, score=weights.retrieval * fused_share, evidence=weights.retrieval * fused_share)
    if weights.retrieval:
        result.signals.append(Reason("retrieval", share=fused_share))
    whole, terms = query.whole, query.terms
    key = normalize(fields.entity_key or "")
    key_forms = {key, key.split(":", 1)[1]} if ":" in key else {key}
    names = {normalize(name) for name in fields.tool_names} - {""}
    exact = next((form for form in sorted(key_forms - {""}) if form == whole or form in terms), None)
    if exact is not None:
        result.score += weights.exact
        result.signals.append(Reason("exact_key", key=fields.entity_key))
    else:
        name = next((name for name in sorted(names) if name == whole or name in terms), None)
        if name is not None:
            result.score += weights.exact
            result.signals.append(Reason("exact_name", name=name))
    text = normalize(fields.text)
    if len(whole) >= 3 and (whole in text or (key and whole in key)):
        result.score += weights.substring
        result.signals.append(Reason("query_in_text") if whole in text else Reason("query_in_key"))
    tags = {normalize(tag) for tag in fields.tags}
    tag = next((tag for tag in sorted(tags) if tag in terms or tag == whole), None)
    if tag is not None:
        result.score += weights.tags
        result.signals.append(Reason("tag", tag=tag))
    if coverage:
        result.score += weights.text * coverage
        result.evidence += weights.text * coverage
        result.signals.append(Reason("text_coverage", coverage=coverage))
    _weigh_answer_type(result, fields, query.asks, weights.answer_type)
    result.missing = missing_required(fields, required)
    return result


def _weigh_answer_type(result: Scored, fields: Fields, asked: tuple[str, ...], share: float) -> None:
    """Keep `share` of the score and the evidence for each kind of answer asked for that the memory
    does not hold: a memory naming no time does not say when."""
    if share >= 1.0:
        return
    text = " ".join([fields.text, fields.entity_key or ""])
    for kind in asked:
        if not asks.holds(text, kind):
            result.score *= share
            result.evidence *= share
            result.signals.append(Reason("answer_type_missing", kind=kind, share=share))
