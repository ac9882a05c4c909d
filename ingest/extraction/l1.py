"""Step 4 of the write path, the L1 extractor (docs/architecture.md "Write path"): an LLM (any OpenAI-compatible
endpoint) reads one user message and answers with the durable memories it holds, as JSON that
must validate against `ANSWER`:

    {"memories": [{"kind": "<one of the 8 kinds>", "text": "...", "confidence": 0.0-1.0,
                   "entity_key": "type:value" or null (optional)}]}

The schema is sent as a strict structured output (memoryui.llm) and checked on return. Anything
else (not JSON, other keys, the kind `note`, a confidence outside 0..1, more than 10 memories, a
malformed entity key) is rejected whole, and the reason, naming the first error's JSON path,
is kept in the message's extraction record. What it returns still goes through the tool guard
and the write path (classification, tier, importance, dedup), like L0's facts.
"""

from __future__ import annotations

import json

from django.conf import settings

from ingest.extraction.l0_entities import Extracted
from memoryui import llm, rules

KINDS = tuple(kind for kind in rules.KINDS if kind != "note")
MAX_MEMORIES = 10
MAX_TEXT_CHARS = 1000
RULE = "L1 (model)"

ANSWER = llm.AnswerSchema(
    "memories",
    {
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "maxItems": MAX_MEMORIES,
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "enum": list(KINDS)},
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS, "pattern": r"\S"},
                        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                        "entity_key": {"type": ["string", "null"]},
                    },
                    "required": ["kind", "text", "confidence"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["memories"],
        "additionalProperties": False,
    },
)

INSTRUCTIONS = f"""\
You extract long-term memories about a user from one message the user wrote to an AI agent.

Keep only durable knowledge worth remembering for weeks: who the user is and how to reach them,
stable preferences, facts about their world, where a project stands, relationships between
people, teams and services, reusable procedures, and things they explicitly asked to remember.
Write each memory as one self-contained statement in the language of the message.

Extract nothing from greetings, nudges, complaints, questions or one-off requests.
Never store tool names with their parameters, parameter schemas, field mappings, guessed call
formats or transcripts of failed calls: the live tool definitions are the truth. Do store
confirmed workarounds and gotchas about a tool's behaviour.

Answer with JSON only, exactly this shape:
{{"memories": [{{"kind": "<kind>", "text": "<statement>", "confidence": <0..1>, "entity_key": "<type:value>"}}]}}
kind is one of: {", ".join(KINDS)}. entity_key is only for identity and contact facts
(name:<value>, phone:<digits>, email:<address>, birthday:<YYYY-MM-DD>, lucky_number:<value>);
null or left out otherwise. Answer {{"memories": []}} when the message holds nothing durable."""


class L1Failed(Exception):
    """No usable answer from the model; the message says why (for the extraction record)."""


def endpoint() -> llm.LLMEndpoint | None:
    return llm.LLMEndpoint.from_settings(settings.MEMORYUI_L1_TIMEOUT_MS)


def l1_extract(text: str, target: llm.LLMEndpoint | None, *, context: str = "") -> list[Extracted]:
    """The memories the model finds in `text` (`context`: the assistant's message before it)."""
    if target is None:
        raise L1Failed(f"not configured: {llm.NOT_CONFIGURED}")
    request = {"message": text}
    if context:
        request["previous_assistant_message"] = context[:2000]
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": json.dumps(request, ensure_ascii=False)},
    ]
    try:
        raw = llm.complete_json(llm.client(target), target, messages, ANSWER)
    except Exception as exc:  # the SDK's errors: connection, HTTP status, timeout
        kind = "timeout" if llm.is_timeout(exc) else "error"
        raise L1Failed(f"{kind}: {llm.describe_error(exc)}") from None
    return parse_answer(raw)


def parse_answer(raw: str) -> list[Extracted]:
    """The memories of a valid answer; L1Failed naming the first error and its JSON path."""
    try:
        answer = ANSWER.parse(raw)
    except llm.AnswerRejected as exc:
        raise L1Failed(f"{exc.code.replace('_', ' ')}: {exc}") from None
    extracted = []
    for n, item in enumerate(answer["memories"]):
        key = item.get("entity_key")
        if key is not None:
            try:
                key = rules.normalize_entity_key(key)
            except rules.EntityKeyError:
                raise L1Failed(f"invalid answer: $.memories[{n}].entity_key: {key[:60]!r} is not type:value") from None
        extracted.append(
            Extracted(
                kind=item["kind"],
                text=" ".join(item["text"].split()),
                confidence=float(item["confidence"]),
                entity_key=key,
                rule=RULE,
            )
        )
    return extracted
