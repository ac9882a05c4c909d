"""Roll-ups: older finished rounds of a transcript become one `summary` memory
(docs/architecture.md "Transcript projection").

- Only finished rounds (complete, or interrupted: the user went on without an answer) outside
  the focus window are rolled up; an in-flight round never is.
- A roll-up carries a generation number. A new one absorbs the previous summary and the rounds
  after it, and supersedes it: the old summary is tombstoned with a link to the new one, so
  nothing is left orphaned, and the new one links back.
- The summary is written only after the model produced it: without an LLM, or when the model
  fails or answers out of shape, nothing is written and the reason is returned.
- Nothing to do when no round left the focus window since the last roll-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from ingest import writing
from ingest.transcripts import Round, projection_of
from memoryui import llm
from memoryui.models import Memory, Transcript

MAX_SUMMARY_CHARS = 3000
MAX_INPUT_CHARS = 60_000

INSTRUCTIONS = """\
You condense the older part of a conversation between a user and an AI agent into one summary
the agent can rely on later. Keep decisions, facts about the user and their world, open tasks
and where they stand; drop greetings, chit-chat and tool-call mechanics. If a previous summary is
given, the new summary must absorb it (it replaces it). Write in the conversation's language.

Answer with JSON only, exactly: {"summary": "<at most 3000 characters>"}"""
SUMMARY = llm.AnswerSchema(
    "summary",
    {
        "type": "object",
        "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_CHARS}},
        "required": ["summary"],
        "additionalProperties": False,
    },
)


@dataclass
class RollupResult:
    written: Memory | None = None
    superseded: Memory | None = None
    generation: int | None = None
    rounds: tuple[int, int] | None = None  # first and last round number it covers
    reason: str = ""  # why nothing was written

    def to_dict(self) -> dict:
        if self.written is None:
            return {"written": False, "reason": self.reason}
        return {
            "written": True,
            "id": str(self.written.pk),
            "generation": self.generation,
            "rounds": list(self.rounds),
            "supersedes": str(self.superseded.pk) if self.superseded else None,
        }


def current_summary(transcript: Transcript) -> Memory | None:
    """The transcript's active roll-up, if it has one."""
    return (
        Memory.objects.active()
        .filter(scope=transcript.scope, kind="summary", metadata__rollup__transcript=str(transcript.pk))
        .order_by("-created_at")
        .first()
    )


def rollup(
    transcript: Transcript, *, actor: str = "compaction", endpoint: llm.LLMEndpoint | None = None
) -> RollupResult:
    """Roll the transcript's older finished rounds up into its summary memory, if there is anything new."""
    projection = projection_of(transcript)
    previous = current_summary(transcript)
    covered = previous.metadata["rollup"]["rounds"][1] if previous else 0
    rounds = [r for r in projection.rollup_rounds if r.number > covered]
    if not rounds:
        why = "up to date" if projection.rollup_rounds else "no complete or interrupted round outside the focus window"
        return RollupResult(reason=f"nothing to roll up: {why}")
    endpoint = endpoint if endpoint is not None else llm.LLMEndpoint.from_settings(settings.MEMORYUI_L1_TIMEOUT_MS)
    if endpoint is None:
        return RollupResult(reason=f"no roll-up: summaries need an LLM ({llm.NOT_CONFIGURED})")
    try:
        summary = _summarize(endpoint, rounds, previous)
    except ValueError as exc:
        return RollupResult(reason=f"no roll-up: {exc}")
    first = previous.metadata["rollup"]["rounds"][0] if previous else rounds[0].number
    last = rounds[-1].number
    generation = previous.metadata["rollup"]["generation"] + 1 if previous else 1
    with transaction.atomic():
        written = writing.write_outcome(
            actor=actor,
            scope=transcript.scope,
            kind="summary",
            text=summary,
            confidence=0.7,
            source="compaction",
            metadata={
                "rollup": {
                    "transcript": str(transcript.pk),
                    "generation": generation,
                    "rounds": [first, last],
                    "supersedes": str(previous.pk) if previous else None,
                }
            },
            semantic=False,
        ).memory
        if previous is not None:
            # The link both ways: the tombstone reason names the new summary, whose metadata names this one.
            previous.tombstone(f"superseded by roll-up generation {generation} ({written.pk})", actor=actor)
    return RollupResult(written=written, superseded=previous, generation=generation, rounds=(first, last))


def _summarize(endpoint: llm.LLMEndpoint, rounds: list[Round], previous: Memory | None) -> str:
    lines = []
    for round_ in rounds:
        for msg in round_.messages:
            if msg.content.strip() and msg.role in ("user", "assistant"):
                lines.append(f"{msg.role}: {msg.content.strip()}")
    request = {"previous_summary": previous.text if previous else None, "conversation": "\n".join(lines)}
    text = json.dumps(request, ensure_ascii=False)[:MAX_INPUT_CHARS]
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": text}]
    try:
        raw = llm.complete_json(llm.client(endpoint), endpoint, messages, SUMMARY)
    except Exception as exc:  # the SDK's errors: connection, HTTP status, timeout
        raise ValueError(f"the model failed ({llm.describe_error(exc)})") from None
    try:
        answer = SUMMARY.parse(raw)
    except llm.AnswerRejected as exc:
        what = "not JSON" if exc.code == "invalid_json" else f'not {{"summary": "..."}}: {exc}'
        raise ValueError(f"the model's answer is {what}") from None
    summary = " ".join(answer["summary"].split())
    if not summary:
        raise ValueError("the summary is empty")
    return summary
