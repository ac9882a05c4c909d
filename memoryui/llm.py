"""The one way memoryui talks to an LLM: any OpenAI-compatible endpoint (MEMORYUI_LLM_*), JSON answers.

Used by the recall selector, the L1 extractor, the dedup judge and roll-ups. Unset
MEMORYUI_LLM_BASE_URL or MEMORYUI_LLM_MODEL means no LLM: callers fall back to their
deterministic path and say so.

An answer with an `AnswerSchema` is asked for as a strict structured output
(`response_format={"type": "json_schema", ...}`) and checked against the same JSON Schema
(Draft 2020-12) when it comes back: endpoints that honour the format cannot answer out of shape,
and those that ignore it are still held to it. Local servers differ in what they take: an
endpoint that refuses `json_schema` (an HTTP 400, 422 or 500 naming the response format, as
llama.cpp's servers answer) is asked with `{"type": "json_object", "schema": ...}`, the form
llama-cpp-python constrains its output with, and one that refuses that too with the prompt
alone. The first form an endpoint (base URL and model) answers is remembered for it in this
process, so later calls start there.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass

from django.conf import settings
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from memoryui import jsontext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMEndpoint:
    base_url: str
    model: str
    api_key: str
    timeout_ms: int

    @classmethod
    def from_settings(cls, timeout_ms: int) -> LLMEndpoint | None:
        """The configured endpoint, or None when MEMORYUI_LLM_BASE_URL or _MODEL is unset."""
        if not settings.MEMORYUI_LLM_BASE_URL or not settings.MEMORYUI_LLM_MODEL:
            return None
        return cls(
            base_url=settings.MEMORYUI_LLM_BASE_URL,
            model=settings.MEMORYUI_LLM_MODEL,
            api_key=settings.MEMORYUI_LLM_API_KEY or "not-needed",  # the SDK insists on one
            timeout_ms=timeout_ms,
        )


NOT_CONFIGURED = "no LLM endpoint (set MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)"


@functools.lru_cache(maxsize=8)
def client(endpoint: LLMEndpoint):
    """One client per endpoint and timeout, reused: its connection pool saves a TCP handshake per call.

    The SDK is imported on first use, not with this module: importing it takes ~0.4 s, which
    every web and worker process would pay although most never call an LLM; callers with a
    latency budget build the client before the budget starts.
    """
    from openai import OpenAI

    return OpenAI(
        base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout_ms / 1000, max_retries=0
    )


# --- answers of one shape ----------------------------------------------------------------------

# Keywords strict structured outputs refuse (OpenAI) or that constrained decoders anchor (a
# `pattern` of "\S" would allow one character): checked on return only, never sent.
_CHECKED_ON_RETURN_ONLY = ("minLength", "maxLength", "pattern")
_SHORT_INSTANCE = 60  # characters of a long value quoted in a rejection


class AnswerRejected(Exception):
    """The answer is not JSON (`code` "invalid_json") or not of its schema ("invalid_answer")."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)


class AnswerSchema:
    """The one valid shape of a JSON answer, as a Draft 2020-12 JSON Schema.

    Strict structured outputs require every property: an optional property must be nullable in
    `schema` (`{"type": ["string", "null"]}`), or the model must always give it.
    """

    def __init__(self, name: str, schema: dict):
        Draft202012Validator.check_schema(schema)
        self.name, self.schema = name, schema
        self._validator = Draft202012Validator(schema)

    @functools.cached_property
    def response_format(self) -> dict:
        """The schema as a strict structured output asks for it."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": _strict(self.schema), "strict": True},
        }

    @functools.cached_property
    def json_object_format(self) -> dict:
        """The schema as servers without `json_schema` take it: a JSON object constrained by it."""
        return {"type": "json_object", "schema": _strict(self.schema)}

    def formats(self) -> dict[str, dict | None]:
        """Each way of asking for this answer, most constrained first (None: the prompt alone)."""
        return {"json_schema": self.response_format, "json_object": self.json_object_format, "prompt": None}

    def first_error(self, answer: object) -> str | None:
        """`<JSON path>: <message>` of the answer's first error (the one `jsonschema.validate`
        would raise), or None when the answer is valid."""
        error = best_match(self._validator.iter_errors(answer))
        return None if error is None else f"{error.json_path}: {_message(error)}"

    def parse(self, raw: str) -> object:
        """The answer in `raw` (one ```json fence tolerated), valid for the schema, or AnswerRejected."""
        try:
            answer = jsontext.loads(strip_fence(raw))
        except jsontext.JSONTextError as exc:
            where = f" at character {exc.position}" if exc.position is not None else ""
            what = "is not JSON" if exc.code == jsontext.SYNTAX else "is JSON memoryui does not read"
            message = f"the answer {what} ({exc.reason}{where})"
            raise AnswerRejected("invalid_json", message) from None
        if error := self.first_error(answer):
            raise AnswerRejected("invalid_answer", error)
        return answer


def _strict(schema: dict) -> dict:
    """`schema` as strict mode takes it: every property required, return-only keywords left out."""
    node = {key: value for key, value in schema.items() if key not in _CHECKED_ON_RETURN_ONLY}
    for key in ("items", "contains", "not", "additionalProperties"):
        if isinstance(node.get(key), dict):
            node[key] = _strict(node[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if key in node:
            node[key] = [_strict(sub) for sub in node[key]]
    for key in ("properties", "$defs", "patternProperties"):
        if key in node:
            node[key] = {name: _strict(sub) for name, sub in node[key].items()}
    if "properties" in node:
        node["required"] = list(node["properties"])
    return node


def _message(error: ValidationError) -> str:
    """jsonschema's message, a long value it quotes first shortened ("[… 11 items] is too long")."""
    quoted = repr(error.instance)
    if len(quoted) <= _SHORT_INSTANCE or not error.message.startswith(quoted):
        return error.message
    if isinstance(error.instance, list):
        short = f"[… {len(error.instance)} items]"
    elif isinstance(error.instance, dict):
        short = f"{{… {len(error.instance)} properties}}"
    else:
        short = quoted[: _SHORT_INSTANCE - 1] + "…"
    return short + error.message[len(quoted) :]


# --- the call --------------------------------------------------------------------------------

# Endpoints (base_url, model) -> the way of asking (AnswerSchema.formats) they answered: they
# refused the ones before it.
_answered_with: dict[tuple[str, str], str] = {}
_REFUSAL = re.compile(r"response_format|response format|json_schema|json_object|structured output", re.IGNORECASE)


def complete_json(llm_client, endpoint: LLMEndpoint, messages: list[dict], schema: AnswerSchema | None = None) -> str:
    """The model's answer to `messages` (temperature 0): with `schema`, asked for as a strict
    structured output, or in the first form the endpoint takes (see the module); without, as a
    JSON object."""
    if schema is None:
        return _complete(llm_client, endpoint, messages, {"type": "json_object"})
    key = (endpoint.base_url, endpoint.model)
    formats = list(schema.formats().items())
    start = next(i for i, (name, _) in enumerate(formats) if name == _answered_with.get(key, "json_schema"))
    for name, response_format in formats[start:-1]:
        try:
            answer = _complete(llm_client, endpoint, messages, response_format)
        except Exception as exc:  # the SDK's errors; only a refusal of the format tries the next form
            if not refuses_response_format(exc):
                raise
            logger.warning("%s (%s) refuses %s response formats: %s", endpoint.base_url, endpoint.model, name, exc)
            continue
        _answered_with[key] = name
        return answer
    _answered_with[key] = "prompt"
    return _complete(llm_client, endpoint, messages, None)


def refuses_response_format(exc: Exception) -> bool:
    """Whether an error is the endpoint refusing the response format: an HTTP 400, 422 or 500 naming it
    (llama.cpp's servers answer 500)."""
    return getattr(exc, "status_code", None) in (400, 422, 500) and bool(_REFUSAL.search(str(exc)))


def _complete(llm_client, endpoint: LLMEndpoint, messages: list[dict], response_format: dict | None) -> str:
    options = {"response_format": response_format} if response_format is not None else {}
    response = llm_client.chat.completions.create(model=endpoint.model, messages=messages, temperature=0, **options)
    if not response.choices:
        return ""
    return response.choices[0].message.content or ""


_FENCE_RE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def strip_fence(raw: str) -> str:
    """The answer without one ```json fence around it (models add it unasked)."""
    text = raw.strip()
    fenced = _FENCE_RE.match(text)
    return fenced.group(1).strip() if fenced else text


def describe_error(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if status is not None:
        return f"HTTP {status} from the LLM endpoint ({name})"
    return f"{name}: {str(exc)[:200]}"


def is_timeout(exc: Exception) -> bool:
    return "Timeout" in type(exc).__name__
