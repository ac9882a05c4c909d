"""Which session-log format a file's text is in, by its shape (the file name helps only to break ties)."""

from __future__ import annotations

from ingest.sessionlogs.common import SessionLogError, load_json
from memoryui import jsontext


def detect(text: str, *, filename: str = "") -> str:
    """The format of `text`: claude-code, gemini, openai or memoryui; SessionLogError when none fits."""
    stripped = text.strip()
    if not stripped:
        raise SessionLogError("is empty")
    try:
        data = jsontext.loads(stripped)
    except jsontext.JSONTextError:
        data = _NOT_JSON  # maybe JSONL (one document a line, the file larger than one document may be)
    if data is _NOT_JSON:
        if _looks_claude_code_jsonl(stripped):
            return "claude-code"
        load_json(stripped, "the file")  # says where the JSON is broken
    if isinstance(data, dict):
        if _is_claude_code_event(data):
            return "claude-code"  # a one-line session
        if isinstance(data.get("history"), list):
            return "gemini"
        messages = data.get("messages")
        if isinstance(messages, list) and _looks_openai(messages) and "scope" not in data:
            return "openai"
        return "memoryui"
    if isinstance(data, list):
        if data and all(isinstance(item, dict) and "parts" in item for item in data):
            return "gemini"
        if _looks_openai(data):
            return "openai"
        if filename.endswith(".json") and filename.rsplit("/", 1)[-1].startswith("checkpoint-"):
            return "gemini"
    return "memoryui"  # a bare list of messages is memoryui's; its rules say what is wrong


_NOT_JSON = object()


def _looks_claude_code_jsonl(text: str, lines: int = 20) -> bool:
    """The first lines are events with a type, and one of them is a session's (a file may open
    with bookkeeping, such as a file-history snapshot)."""
    events = []
    for line in text.splitlines()[:lines]:
        if not line.strip():
            continue
        try:
            event = jsontext.loads(line)
        except jsontext.JSONTextError:
            break  # cut short by a crash, refused by the reader, or not JSONL at all: judge by the lines before it
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return False
        events.append(event)
    return any(_is_claude_code_event(event) for event in events)


def _is_claude_code_event(event: dict) -> bool:
    return isinstance(event.get("type"), str) and (
        "sessionId" in event or "uuid" in event or event.get("type") == "summary"
    )


def _looks_openai(messages: list) -> bool:
    """Marks only OpenAI's message shape has: function tool calls, the developer role, content parts."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("developer", "function"):
            return True
        if isinstance(message.get("content"), list):
            return True
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(isinstance(call, dict) and "function" in call for call in calls):
            return True
    return False
