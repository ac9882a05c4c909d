"""OpenAI chat-completions messages: `[{"role", "content", "tool_calls"?}, {"role": "tool", ...}]`,
or `{"messages": [...]}` (the request body's shape; its `id` is taken as the transcript's).

`system` and `developer` messages go to the system channel; `content` given as parts keeps
their text (an image part becomes `[image]`, counted in the notes); a legacy `function_call` and its `function`
result are paired by name, with ids made up in order.
"""

from __future__ import annotations

from ingest.sessionlogs.common import SessionLogError, as_arguments, as_text, clip, load_json, placeholder_note
from ingest.transcripts import Msg


def read(text: str, *, filename: str = "") -> tuple[dict, list[str]]:
    data = load_json(text, "the message list")
    transcript: dict = {"metadata": {}}
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        if isinstance(data.get("id"), str):
            transcript["id"] = data["id"]
        if isinstance(data.get("model"), str):
            transcript["metadata"]["model"] = data["model"]
        data = data["messages"]
    if not isinstance(data, list):
        raise SessionLogError('an OpenAI message list is a JSON array of messages, or {"messages": [...]}')
    messages: list[dict] = []
    placeholders: dict[str, int] = {}  # image, audio and file parts replaced by `[image]`, …
    pending_legacy: list[tuple[str, str]] = []  # (name, id) of function_call messages not yet answered
    for index, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise SessionLogError(f"message {index} is not an object")
        role = raw.get("role")
        content = clip(_content_text(raw.get("content"), placeholders))
        if role in ("system", "developer"):
            messages.append({"role": "system", "content": content, "channel": "system"})
        elif role == "assistant":
            calls = [_tool_call(call, index, n) for n, call in enumerate(raw.get("tool_calls") or [])]
            if isinstance(raw.get("function_call"), dict):
                legacy = {"id": f"call_{index}_fn", "function": raw["function_call"]}
                calls.append(_tool_call(legacy, index, len(calls)))
                pending_legacy.append((calls[-1]["name"], calls[-1]["id"]))
            if not content and isinstance(raw.get("refusal"), str):
                content = raw["refusal"]
            message = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
        elif role == "function":
            name = raw.get("name")
            match = next((item for item in pending_legacy if item[0] == name), None)
            if match:
                pending_legacy.remove(match)
            messages.append({"role": "tool", "content": content, "tool_call_id": match[1] if match else ""})
        else:
            # user, tool, and anything else: memoryui's rules say what is wrong with it.
            message = {"role": role, "content": content}
            if raw.get("tool_call_id") is not None:
                message["tool_call_id"] = raw["tool_call_id"]
            messages.append(message)
    transcript["messages"] = messages
    return transcript, placeholder_note(placeholders)


def write(messages: list[Msg], transcript: dict) -> list[dict]:
    out = []
    for message in messages:
        if message.role == "assistant":
            item: dict = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                    for call in message.tool_calls
                ]
            out.append(item)
        elif message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content})
        elif message.role == "system":
            out.append({"role": "system", "content": message.content})
        else:
            out.append({"role": "user", "content": message.content})
    return out


def _content_text(content: object, placeholders: dict[str, int]) -> str:
    if isinstance(content, list):
        return "\n".join(_part_text(part, placeholders) for part in content)
    return as_text(content)


def _part_text(part: object, placeholders: dict[str, int]) -> str:
    """A content part's text; an image, audio or file part as a placeholder, counted."""
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return part["text"]
    if isinstance(part, dict) and isinstance(part.get("refusal"), str):
        return part["refusal"]
    kind = part.get("type") if isinstance(part, dict) else None
    kind = "image" if kind in ("image_url", "input_image", "image") else kind
    if kind in ("image", "input_audio", "file"):
        placeholders[kind] = placeholders.get(kind, 0) + 1
        return f"[{kind}]"
    return as_text(part)


def _tool_call(call: object, index: int, n: int) -> dict:
    if not isinstance(call, dict):
        raise SessionLogError(f"message {index}: tool call {n} is not an object")
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments", "")
    # Arguments are JSON text in this format; an object is taken too and kept as JSON text.
    return {
        "id": as_text(call.get("id")) or f"call_{index}_{n}",
        "name": as_text(function.get("name")),
        "arguments": as_arguments(arguments),
    }
