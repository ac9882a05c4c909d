"""gemini-cli and qwen-code chat checkpoints: what `/chat save <tag>` writes to
`checkpoint-<tag>.json` — a JSON array of Gemini API `Content` objects (newer releases wrap it
as `{"history": [...]}`; both are read, the array is written).

    {"role": "user" | "model", "parts": [{"text"}, {"functionCall": {"name", "args", "id"?}},
                                         {"functionResponse": {"name", "response", "id"?}}]}

A model's `functionCall` parts become the assistant message's tool calls; `functionResponse`
parts become tool messages, paired with their call by id when both carry one, else with the
first unanswered call of that name; one that answers no call keeps its name in
`metadata.message_fields`. A call without an id gets a stable one from its place
(`gemini-<content>-<part>`), so importing the same checkpoint again gives the same ids.
Thought parts are left out. The CLI's own setup turn ("This is the Gemini CLI. We are setting
up the context for our chat…", qwen-code's likewise) is marked internal on the system channel.
The transcript's id is the checkpoint's tag, from the file name.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from ingest.sessionlogs.common import (
    FIELDS,
    SessionLogError,
    as_text,
    clip,
    load_json,
    message_fields,
    parse_arguments,
    placeholder_note,
)
from ingest.transcripts import Msg

SETUP_MARKER = "we are setting up the context for our chat"
_CHECKPOINT_FILE = re.compile(r"checkpoint-(?P<tag>.+)\.json$")


def tag_of(filename: str) -> str | None:
    """The tag in a checkpoint's file name (`checkpoint-<tag>.json`, the tag URL-encoded), or None."""
    match = _CHECKPOINT_FILE.search(filename.replace("\\", "/").rsplit("/", 1)[-1])
    return unquote(match["tag"]) if match else None


def read(text: str, *, filename: str = "") -> tuple[dict, list[str]]:
    data = load_json(text, "the checkpoint")
    transcript: dict = {"metadata": {}}
    if isinstance(data, dict) and isinstance(data.get("history"), list):
        if isinstance(data.get("authType"), str):
            transcript["metadata"]["auth_type"] = data["authType"]
        data = data["history"]
    if not isinstance(data, list):
        raise SessionLogError('a chat checkpoint is a JSON array of {"role", "parts"} contents')
    if tag := tag_of(filename):
        transcript["id"] = tag
        transcript["metadata"]["tag"] = tag
    messages: list[dict] = []
    notes: list[str] = []
    files = 0  # inlineData and fileData parts, replaced by [file]
    pending: list[dict] = []  # tool calls not answered yet, in order
    setup_turn = False
    for index, content in enumerate(data):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise SessionLogError(f"content {index} is not an object with parts")
        role = content.get("role")
        texts, calls, responses, thoughts = [], [], [], 0
        for n, part in enumerate(content["parts"]):
            if not isinstance(part, dict):
                continue
            if part.get("thought"):
                thoughts += 1
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                calls.append(
                    {
                        "id": as_text(call.get("id")) or f"gemini-{index}-{n}",
                        "name": as_text(call.get("name")),
                        "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True),
                    }
                )
            elif isinstance(part.get("functionResponse"), dict):
                responses.append(part["functionResponse"])
            elif "inlineData" in part or "fileData" in part:
                files += 1
                texts.append("[file]")
        if thoughts:
            notes.append(f"content {index}: {thoughts} thought part(s) left out")
        text = "\n".join(texts)
        if role == "model":
            if calls or text.strip():
                message = {"role": "assistant", "content": clip(text)}
                if calls:
                    message["tool_calls"] = calls
                    pending.extend(calls)
                if setup_turn and not calls:
                    message.update(channel="system", source="internal")
                messages.append(message)
            setup_turn = False
            continue
        if role not in ("user", "function"):
            raise SessionLogError(f"content {index}: role must be user or model, got {role!r}")
        messages.extend(_result(response, pending) for response in responses)
        setup_turn = SETUP_MARKER in text.lower()
        if text.strip():
            message = {"role": "user", "content": clip(text)}
            if setup_turn:
                message.update(channel="system", source="internal")
            messages.append(message)
    transcript["messages"] = messages
    return transcript, notes + placeholder_note({"file": files})


def _result(response: dict, pending: list[dict]) -> dict:
    """A functionResponse as a tool message; an orphan keeps its tool's name (FIELDS), which
    its missing call would otherwise give back on export."""
    answered = _pair(response, pending)
    message = {"role": "tool", "content": clip(_response_text(response)), "tool_call_id": answered}
    if answered is None:
        message["tool_call_id"] = as_text(response.get("id"))
        if name := as_text(response.get("name")):
            message[FIELDS] = {"name": name}
    return message


def write(messages: list[Msg], transcript: dict) -> list[dict]:
    names = {call.id: call.name for message in messages for call in message.tool_calls}
    history: list[dict] = []
    for message in messages:
        if message.role == "assistant":
            parts: list[dict] = [{"text": message.content}] if message.content else []
            parts += [
                {"functionCall": {"id": call.id, "name": call.name, "args": _args(call.arguments)}}
                for call in message.tool_calls
            ]
            history.append({"role": "model", "parts": parts})
        elif message.role == "tool":
            part = {
                "functionResponse": {
                    "id": message.tool_call_id or "",
                    "name": names.get(message.tool_call_id) or _orphan_name(message, transcript),
                    "response": {"output": message.content},
                }
            }
            # The results of one model turn go back together, in one user content.
            last = history[-1] if history else None
            if last and last["role"] == "user" and all("functionResponse" in p for p in last["parts"]):
                last["parts"].append(part)
            else:
                history.append({"role": "user", "parts": [part]})
        elif message.role == "user":
            history.append({"role": "user", "parts": [{"text": message.content}]})
        # System messages have no place in a Gemini history (the system instruction is not saved in it).
    return history


def _orphan_name(message: Msg, transcript: dict) -> str:
    """The tool name a result with no call carried when it was read."""
    return message_fields(transcript, message.index).get("name", "")


def _response_text(response: dict) -> str:
    value = response.get("response")
    if isinstance(value, dict) and set(value) == {"output"} and isinstance(value["output"], str):
        return value["output"]
    return as_text(value)


def _pair(response: dict, pending: list[dict]) -> str | None:
    """The id of the call this response answers (by id when it has one, else the first
    unanswered call of its name), or None for an orphan."""
    response_id = as_text(response.get("id"))
    match = next((call for call in pending if response_id and call["id"] == response_id), None)
    if match is None and not response_id:
        match = next((call for call in pending if call["name"] == as_text(response.get("name"))), None)
    if match is None:
        return None
    pending.remove(match)
    return match["id"]


def _args(arguments: str) -> object:
    value = parse_arguments(arguments)
    return value if isinstance(value, dict) else {"input": value}
