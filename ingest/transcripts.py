"""Transcript projection: what every consumer of a transcript (extraction, summary, export) sees.

Plain dataclasses and functions, no database, except `projection_of(transcript)`: the stored
transcript projected with the configured focus window, which every consumer uses. A stored
message becomes a `Msg` through `Msg.from_dict(message.index, message.as_dict())`; `project()`
then:

1. **Trims the trailing open tool exchange**, as an agent runtime does when it resumes a
   session: while the transcript ends in an assistant message with tool calls followed only
   by tool results, and some of those calls have no result, the assistant message and the
   partial results after it are removed together (the agent crashed mid-call; an assistant
   call without all its results is not a valid provider request, and half an exchange is
   worse than none). A chain of such exchanges is trimmed back to the last fully answered
   one. "Trailing" means nothing but tool results after the call: anything else after it,
   even a system message, makes it a mid-transcript call, which is kept and only noted.
   Tool results without a preceding call (orphans) are never removed, so this rule alone
   never empties a projection; only a transcript made of nothing but open exchanges
   projects to nothing, because nothing in it is valid. `Projection.trimmed` and the notes
   say what was trimmed and why.
2. **Splits rounds.** A round runs from one user message up to the next; messages before
   the first user message are `leading`.
3. **States rounds, after trimming.** `complete`: an assistant answer (content, no tool
   calls) follows the round's last tool call or result. `in_flight`: the last round, with
   tool calls or results and no answer after them — the agent may still be at work.
   `interrupted`: an earlier round with tool calls or results and no answer after them —
   the next round began without one (the user rejected or interrupted a call and went on),
   so the round is over. `open`: neither tools nor an answer (the user spoke last, or went
   on unanswered). Only the last round can be in flight. A round that lost a trimmed
   exchange is `in_flight` whatever remains of it — the agent was mid-call, so summarizing
   it would make the agent repeat the call; trimming only ever takes from the last round.
4. **Marks the focus window**: the last `focus_rounds` rounds, extended back until the
   window holds `focus_tokens` tokens. It is never rolled up.

In-flight rounds are never extracted from, summarized or rolled up; open and interrupted
rounds' user words may be extracted from, and complete and interrupted rounds outside the
focus window may be rolled up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from memoryui import jsontext, untrusted

if TYPE_CHECKING:
    from memoryui.models import Transcript

FOCUS_ROUNDS = 3
FOCUS_TOKENS = 8000

COMPLETE = "complete"
IN_FLIGHT = "in_flight"
INTERRUPTED = "interrupted"
OPEN = "open"
FINISHED = (COMPLETE, INTERRUPTED)  # over: what a roll-up may take


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # as given: JSON text or plain text (arguments_value reads it)


def arguments_value(arguments: str) -> object:
    """A tool call's arguments as the formats write them: the JSON value the text holds, read
    by memoryui.jsontext (so never nested past the API's limit), or the text itself when it is
    not JSON that reader takes; no arguments are `{}`."""
    if not arguments:
        return {}
    try:
        return jsontext.loads(arguments)
    except jsontext.JSONTextError:
        return arguments


def arguments_problem(arguments: str) -> str | None:
    """Why a tool call's arguments could not be written in every format, or None: JSON text
    nested past the API's limit or larger than it takes (a format writes the value, and every
    reader after it would recurse as deep), or holding a string no text can store. Plain text,
    and text that is not JSON, is written as it is: no problem."""
    try:
        value = jsontext.loads(arguments) if arguments else {}
    except jsontext.JSONTextError as exc:
        if exc.code in (jsontext.TOO_DEEP, jsontext.TOO_LARGE):
            where = f" (at {exc.path})" if exc.path else ""
            return f"holds JSON that {exc.reason}{where}: no format could write it back"
        return None
    problem = untrusted.first_json_problem(value)
    return f"holds JSON that cannot be stored: {problem}" if problem else None


@dataclass(frozen=True)
class Msg:
    index: int  # position in the stored transcript, 0-based
    role: str  # user | assistant | tool | system
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on tool results
    channel: str | None = None  # chat, heartbeat, cron, system, ...
    source: str | None = None  # user, internal, banner, repair, compaction
    created_at: str | None = None  # ISO 8601, as stored

    @classmethod
    def from_dict(cls, index: int, data: Mapping) -> Msg:
        """Read a message in the transcript JSON shape. Rejects nothing: validation happens on ingest."""
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            raw_calls = (raw_calls,)
        return cls(
            index=index,
            role=_text(data.get("role")),
            content=_content(data.get("content")),
            tool_calls=tuple(_tool_call(item) for item in raw_calls),
            tool_call_id=_optional(data.get("tool_call_id")),
            channel=_optional(data.get("channel")),
            source=_optional(data.get("source")),
            created_at=_optional(data.get("created_at")),
        )

    def as_dict(self) -> dict:
        """The message in the transcript JSON shape (what `from_dict` reads)."""
        data: dict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls]
        for name in ("tool_call_id", "channel", "source", "created_at"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        return data

    @property
    def is_tool_result(self) -> bool:
        return self.role == "tool" or self.tool_call_id is not None

    @property
    def is_answer(self) -> bool:
        """An assistant message that says something and calls nothing: a round's final answer."""
        return self.role == "assistant" and not self.tool_calls and bool(self.content.strip())

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.content) + sum(estimate_tokens(call.arguments) for call in self.tool_calls)


@dataclass
class Round:
    number: int  # 1-based, in order
    messages: list[Msg]
    state: str  # complete | in_flight | interrupted | open
    in_focus: bool
    tokens: int

    @property
    def user_message(self) -> Msg | None:
        """The user message that opened the round."""
        if self.messages and self.messages[0].role == "user":
            return self.messages[0]
        return None


@dataclass
class Projection:
    messages: list[Msg]  # the transcript minus trimmed messages
    trimmed: list[Msg]  # the trailing open tool exchanges removed from the end: calls and their partial results
    leading: list[Msg]  # messages before the first user message, kept as they are
    rounds: list[Round]
    notes: list[str]  # what was trimmed and why, what is in flight, where the focus starts

    def round_of(self, index: int) -> Round | None:
        """The round holding the message at `index`; a trimmed message belongs to the last round."""
        for round_ in self.rounds:
            if any(message.index == index for message in round_.messages):
                return round_
        if self.rounds and any(message.index == index for message in self.trimmed):
            # Trimmed messages are trailing, and the last round runs to the end of the transcript.
            return self.rounds[-1]
        return None

    @property
    def extractable_rounds(self) -> list[Round]:
        return [round_ for round_ in self.rounds if round_.state != IN_FLIGHT]

    @property
    def rollup_rounds(self) -> list[Round]:
        return [round_ for round_ in self.rounds if round_.state in FINISHED and not round_.in_focus]


def estimate_tokens(text: str) -> int:
    """Estimate cheaply: each CJK character ~1 token, other text ~1 token per 4 characters."""
    if not text:
        return 0
    cjk = sum(1 for char in text if _is_cjk(char))
    return cjk + math.ceil((len(text) - cjk) / 4)


def project(
    messages: Sequence[Msg], *, focus_rounds: int = FOCUS_ROUNDS, focus_tokens: int = FOCUS_TOKENS
) -> Projection:
    """Project a transcript: trim the trailing open tool exchange, split and state rounds, mark the focus window."""
    if focus_rounds < 0 or focus_tokens < 0:
        raise ValueError("focus_rounds and focus_tokens must not be negative")
    notes: list[str] = []
    kept, trimmed = _trim_open_exchanges(list(messages))
    notes.extend(_notes_on_trimmed(trimmed))
    notes.extend(_notes_on_unmatched_tools(kept))

    first_user = next((position for position, message in enumerate(kept) if message.role == "user"), len(kept))
    leading = kept[:first_user]
    rounds = _rounds(kept[first_user:])
    if trimmed and rounds:
        rounds[-1].state = IN_FLIGHT
    notes.extend(_notes_on_unfinished(rounds, trimmed=bool(trimmed)))
    _mark_focus_window(rounds, focus_rounds, focus_tokens, notes)
    return Projection(messages=kept, trimmed=trimmed, leading=leading, rounds=rounds, notes=notes)


def messages_of(transcript: Transcript) -> list[Msg]:
    """The stored transcript's messages, in order."""
    return [Msg.from_dict(m.index, m.as_dict()) for m in transcript.messages.all()]


def projection_of(transcript: Transcript) -> Projection:
    """The stored transcript as every consumer sees it, with the configured focus window."""
    return project(
        messages_of(transcript),
        focus_rounds=settings.MEMORYUI_FOCUS_ROUNDS,
        focus_tokens=settings.MEMORYUI_FOCUS_TOKENS,
    )


def _trim_open_exchanges(messages: list[Msg]) -> tuple[list[Msg], list[Msg]]:
    trimmed: list[Msg] = []
    while True:
        start = len(messages)
        while start and messages[start - 1].is_tool_result:
            start -= 1
        call = messages[start - 1] if start else None
        if call is None or call.role != "assistant" or not call.tool_calls:
            # Nothing but results back to a user/system message or the start: orphans, kept.
            return messages, trimmed
        answered = {message.tool_call_id for message in messages[start:]}
        if all(tool_call.id in answered for tool_call in call.tool_calls):
            return messages, trimmed  # a complete exchange (the answer may still be missing: in flight)
        trimmed[:0] = messages[start - 1 :]
        del messages[start - 1 :]


def _notes_on_trimmed(trimmed: list[Msg]) -> list[str]:
    notes = []
    call: Msg | None = None
    for message in trimmed:
        if message.is_tool_result:
            notes.append(
                f"trimmed message #{message.index}: tool result for {message.tool_call_id or 'no id'}, part of the "
                f"open exchange of message #{call.index if call else '?'} (its other calls have no result)"
            )
            continue
        call = message
        results = {other.tool_call_id for other in trimmed if other.is_tool_result and other.index > message.index}
        missing = [tool_call for tool_call in message.tool_calls if tool_call.id not in results]
        if len(missing) == len(message.tool_calls):
            notes.append(
                f"trimmed message #{message.index}: assistant tool call {_describe_calls(message.tool_calls)} "
                "has no result (the agent stopped mid-call; not a valid request)"
            )
        else:
            notes.append(
                f"trimmed message #{message.index}: assistant tool calls {_describe_calls(message.tool_calls)} "
                f"are only partly answered, {_describe_calls(missing)} has no result (the agent stopped mid-call; "
                "a call without all its results is not a valid request, so the whole exchange goes)"
            )
    return notes


def _notes_on_unmatched_tools(messages: list[Msg]) -> list[str]:
    notes = []
    called: set[str | None] = set()
    for message in messages:
        if message.is_tool_result and message.tool_call_id not in called:
            notes.append(f"message #{message.index}: tool result with no preceding call (kept as it is)")
        called.update(call.id for call in message.tool_calls)
    answered: set[str | None] = set()
    unanswered = []
    for message in reversed(messages):
        if message.is_tool_result:
            answered.add(message.tool_call_id)
        unanswered.extend((message, call) for call in reversed(message.tool_calls) if call.id not in answered)
    for message, call in reversed(unanswered):
        notes.append(
            f"message #{message.index}: tool call {_describe_calls((call,))} has no result "
            "(kept: it is not at the end of the transcript)"
        )
    return notes


def _rounds(messages: list[Msg]) -> list[Round]:
    """The rounds from the first user message on, stated; only the last one can be in flight."""
    split = _split_rounds(messages)
    return [
        Round(
            number=number,
            messages=round_messages,
            state=_round_state(round_messages, last=number == len(split)),
            in_focus=False,
            tokens=sum(message.tokens for message in round_messages),
        )
        for number, round_messages in enumerate(split, start=1)
    ]


def _notes_on_unfinished(rounds: list[Round], *, trimmed: bool) -> list[str]:
    notes = []
    for round_ in rounds:
        if round_.state == INTERRUPTED:
            notes.append(
                f"round {round_.number} was interrupted: its tool calls or results got no answer before round "
                f"{round_.number + 1} began (a rejected or interrupted call); it is over"
            )
        elif round_.state == IN_FLIGHT and trimmed:
            notes.append(
                f"round {round_.number} is in flight: its open tool exchange was trimmed, the agent was mid-call"
            )
        elif round_.state == IN_FLIGHT:
            notes.append(f"round {round_.number} is in flight: tool calls or results with no answer after them")
    return notes


def _split_rounds(messages: list[Msg]) -> list[list[Msg]]:
    rounds: list[list[Msg]] = []
    for message in messages:
        if message.role == "user" or not rounds:
            rounds.append([])
        rounds[-1].append(message)
    return rounds


def _round_state(messages: list[Msg], *, last: bool) -> str:
    last_tool = max(
        (position for position, message in enumerate(messages) if message.tool_calls or message.is_tool_result),
        default=None,
    )
    if last_tool is None:
        return COMPLETE if any(message.is_answer for message in messages) else OPEN
    if any(message.is_answer for message in messages[last_tool + 1 :]):
        return COMPLETE
    # No answer after the tools: the agent may still be at work, unless a later round began.
    return IN_FLIGHT if last else INTERRUPTED


def _mark_focus_window(rounds: list[Round], focus_rounds: int, focus_tokens: int, notes: list[str]) -> None:
    tokens = 0
    in_focus = 0
    for round_ in reversed(rounds):
        if in_focus >= focus_rounds and tokens >= focus_tokens:
            break
        round_.in_focus = True
        tokens += round_.tokens
        in_focus += 1
    if in_focus:
        first = rounds[-in_focus]
        notes.append(
            f"focus window starts at round {first.number}: {in_focus} of {len(rounds)} rounds, ~{tokens} tokens"
        )


def _describe_calls(calls: Sequence[ToolCall]) -> str:
    return ", ".join(f"{call.name or '?'} ({call.id or 'no id'})" for call in calls)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= code <= 0x3FFFF  # extensions B and later
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
    )


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _optional(value: object) -> str | None:
    # Stored rows keep "" for absent fields; the projection says None.
    text = _text(value)
    return text or None


def _content(value: object) -> str:
    # Content may come as a list of parts ({"type": "text", "text": ...}); keep their text.
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, Mapping) and "text" in part:
                parts.append(_text(part["text"]))
            else:
                parts.append(_text(part))
        return "\n".join(parts)
    return _text(value)


def _tool_call(item: object) -> ToolCall:
    if not isinstance(item, Mapping):
        return ToolCall(id="", name="", arguments=_text(item))
    # Also accept the provider shape {"id", "function": {"name", "arguments"}}.
    function = item.get("function")
    source = function if isinstance(function, Mapping) else item
    return ToolCall(id=_text(item.get("id")), name=_text(source.get("name")), arguments=_text(source.get("arguments")))
