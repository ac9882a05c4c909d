"""Tool exchanges as providers accept them, for a projected export to a provider's format.

The projection keeps a tool result that answers no call before it (an orphan: the log began
mid-exchange, or its call was cut) and a call that got no result before the conversation went
on: the transcript says what happened. A provider refuses both. OpenAI wants every `tool`
message to answer a call of the assistant message its run of results follows, and every call
answered before the next message; Anthropic wants a `tool_result` to answer a `tool_use` of the
assistant turn before it, results first in their turn; Gemini wants a `functionResponse` right
after its `functionCall`. So an export to one of them turns an orphan into a note of the user's
turn, after the results of the exchange it fell in, answers a call left unanswered with a
stated "no result", and says both in its notes.
"""

from __future__ import annotations

from dataclasses import replace

from ingest.transcripts import Msg, ToolCall

NO_RESULT = "[no result: this call was not answered in this transcript]"


def provider_safe(messages: list[Msg]) -> tuple[list[Msg], list[str]]:
    """The messages with every tool result answering a call of the assistant message before it,
    and every call answered before anything else; notes say what was changed."""
    safe: list[Msg] = []
    notes: list[str] = []
    caller: Msg | None = None  # the assistant message whose results are being read
    open_calls: list[ToolCall] = []
    orphans: list[Msg] = []  # met among an exchange's results: they go after them
    for message in messages:
        if message.role == "tool":
            call = next((c for c in open_calls if c.id == message.tool_call_id), None)
            if call is not None:
                open_calls.remove(call)
                safe.append(message)
            else:
                notes.append(_orphan_note(message))
                orphans.append(orphan_as_note(message))
            if not open_calls:
                safe.extend(orphans)
                orphans.clear()
            continue
        safe.extend(_answer_open_calls(caller, open_calls, notes))
        safe.extend(orphans)
        orphans.clear()
        caller, open_calls = message, list(message.tool_calls) if message.role == "assistant" else []
        safe.append(message)
    safe.extend(_answer_open_calls(caller, open_calls, notes))
    safe.extend(orphans)
    return safe, notes


def orphan_as_note(message: Msg) -> Msg:
    """A tool result with no call, as a note in the user's turn that a provider accepts."""
    call = f"call {message.tool_call_id}" if message.tool_call_id else "a call with no id"
    header = f"[tool result for {call}, whose call is not in this transcript]"
    content = f"{header} {message.content}" if message.content else header
    return replace(message, role="user", content=content, tool_call_id=None, channel="system", source="internal")


def _answer_open_calls(caller: Msg | None, open_calls: list[ToolCall], notes: list[str]) -> list[Msg]:
    if caller is None or not open_calls:
        return []
    answers = [
        Msg(index=caller.index, role="tool", content=NO_RESULT, tool_call_id=call.id, created_at=caller.created_at)
        for call in open_calls
    ]
    names = ", ".join(f"{call.name} ({call.id})" for call in open_calls)
    notes.append(f"message #{caller.index}: tool call(s) {names} got no result: answered with {NO_RESULT!r}")
    open_calls.clear()
    return answers


def _orphan_note(message: Msg) -> str:
    call = message.tool_call_id or "with no id"
    return (
        f"message #{message.index}: tool result for call {call} answers no call before it: "
        "written as a user note, which the format allows"
    )
