"""The L1 extractor: an LLM (any OpenAI-compatible endpoint) reads one user message and answers
with the durable memories it holds, as JSON of one strict shape:

    {"memories": [{"kind": "<one of the 8 kinds>", "text": "...", "confidence": 0.0-1.0,
                   "entity_key": "type:value" (optional)}]}

Anything else (not JSON, other keys, the kind `note`, a confidence outside 0..1, a malformed
entity key) is rejected whole with the reason, which the message's extraction record keeps.
What it returns still goes through the tool guard and the write path (classification, tier,
importance, dedup), like L0's facts.
"""

from __future__ import annotations

import json

from django.conf import settings

from memoryui import llm, rules
from memoryui.extraction_rules import Extracted

KINDS = tuple(kind for kind in rules.KINDS if kind != "note")
MAX_MEMORIES = 10
MAX_TEXT_CHARS = 1000
RULE = "L1 (model)"

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
kind is one of: {", ".join(KINDS)}. entity_key is optional: only for identity and contact facts
(name:<value>, phone:<digits>, email:<address>, birthday:<YYYY-MM-DD>, lucky_number:<value>).
Answer {{"memories": []}} when the message holds nothing durable."""


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
        raw = llm.complete_json(llm.client(target), target, messages)
    except Exception as exc:  # the SDK's errors: connection, HTTP status, timeout
        kind = "timeout" if llm.is_timeout(exc) else "error"
        raise L1Failed(f"{kind}: {llm.describe_error(exc)}") from None
    return parse_answer(raw)


def parse_answer(raw: str) -> list[Extracted]:
    """Validate the model's answer strictly; L1Failed naming the first problem."""
    try:
        answer = json.loads(llm.strip_fence(raw))
    except ValueError as exc:
        raise L1Failed(f"invalid json: the answer is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(answer, dict) or set(answer) != {"memories"} or not isinstance(answer["memories"], list):
        raise L1Failed('invalid answer: expected {"memories": [...]} and nothing else')
    items = answer["memories"]
    if len(items) > MAX_MEMORIES:
        raise L1Failed(f"invalid answer: {len(items)} memories from one message; at most {MAX_MEMORIES}")
    extracted = []
    for n, item in enumerate(items):
        where = f"memories[{n}]"
        if not isinstance(item, dict) or not {"kind", "text", "confidence"} <= set(item) <= {
            "kind", "text", "confidence", "entity_key",
        }:  # fmt: skip
            raise L1Failed(f"invalid answer: {where} must have kind, text, confidence and optionally entity_key")
        kind, text, confidence = item["kind"], item["text"], item["confidence"]
        if kind not in KINDS:
            raise L1Failed(f"invalid answer: {where}.kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise L1Failed(f"invalid answer: {where}.text must be 1..{MAX_TEXT_CHARS} characters")
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise L1Failed(f"invalid answer: {where}.confidence must be a number from 0 to 1")
        key = item.get("entity_key")
        if key is not None:
            try:
                if not isinstance(key, str):
                    raise rules.EntityKeyError("not a string")
                key = rules.normalize_entity_key(key)
            except rules.EntityKeyError:
                raise L1Failed(f"invalid answer: {where}.entity_key {str(key)[:60]!r} is not type:value") from None
        extracted.append(
            Extracted(kind=kind, text=" ".join(text.split()), confidence=float(confidence), entity_key=key, rule=RULE)
        )
    return extracted
