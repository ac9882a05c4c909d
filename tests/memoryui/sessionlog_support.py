"""What the session-log tests share: the fixtures, the commands as a script calls them, and a
strict validator of the OpenAI chat-completions message format."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from memoryui.models import Memory, Transcript

SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "sessions"
ROLES = {"system", "developer", "user", "assistant", "tool"}
KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


def run(command: str, *args: str) -> dict:
    out = StringIO()
    call_command(command, *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def ingest(name: str, *args: str, scope: str = "agent:main") -> Transcript:
    report = run("ingest_transcript", str(SESSIONS / name), "--scope", scope, *args)
    return Transcript.objects.get(pk=report["transcript_id"])


def extract_l0(transcript: Transcript) -> dict:
    """`extract --transcript ID` with L0 only: no LLM is asked."""
    return run("extract", "--transcript", str(transcript.pk), "--l1", "off")


def added(report: dict) -> list[tuple[str, str]]:
    return sorted((item["kind"], item["text"]) for item in report["added"])


def skipped(report: dict) -> dict[int, str]:
    return {item["message"]: item["reason"] for item in report["skipped"]}


def export(transcript: Transcript, *args: str) -> str:
    out = StringIO()
    call_command("export_transcript", str(transcript.pk), *args, stdout=out)
    return out.getvalue()


def stored(transcript: Transcript) -> list[dict]:
    return [message.as_dict() for message in transcript.messages.all()]


def memories() -> list[tuple[str, str]]:
    return sorted(Memory.objects.values_list("kind", "text"))


def openai_problems(messages: object) -> list[str]:
    """Everything that makes `messages` an invalid chat-completions request: roles and keys, every
    assistant tool call answered by exactly one tool result before the next non-tool message, no
    tool result without its call, arguments as JSON text."""
    if not isinstance(messages, list) or not messages:
        return ["not a non-empty list of messages"]
    problems: list[str] = []
    open_calls: set[str] = set()
    seen_ids: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            problems.append(f"{where}: not a message with a valid role")
            continue
        role = message["role"]
        if extra := set(message) - KEYS[role]:
            problems.append(f"{where}: keys {sorted(extra)} are not allowed on a {role} message")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(f"{where}: tool result for {call_id!r} answers no open call")
            open_calls.discard(call_id)
            if not isinstance(message.get("content"), str):
                problems.append(f"{where}: a tool result's content must be text")
            continue
        if open_calls:
            problems.append(f"{where}: a {role} message before the results of {sorted(open_calls)}")
            open_calls = set()
        content = message.get("content")
        calls = message.get("tool_calls") or []
        if role == "assistant":
            if content is None and not calls:
                problems.append(f"{where}: an assistant message without content or tool calls")
            for n, call in enumerate(calls):
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or call.get("type") != "function" or not call.get("id"):
                    problems.append(f"{where}.tool_calls[{n}]: not a function call with an id")
                    continue
                if call["id"] in seen_ids:
                    problems.append(f"{where}.tool_calls[{n}]: id {call['id']!r} is used twice")
                seen_ids.add(call["id"])
                open_calls.add(call["id"])
                if not isinstance(function.get("name"), str) or not function["name"]:
                    problems.append(f"{where}.tool_calls[{n}]: no function name")
                try:
                    json.loads(function.get("arguments"))
                except (TypeError, ValueError):
                    problems.append(f"{where}.tool_calls[{n}]: arguments are not JSON text")
        elif not isinstance(content, str) or not content:
            problems.append(f"{where}: a {role} message needs text content")
    if open_calls:
        problems.append(f"end: calls {sorted(open_calls)} have no result")
    return problems
