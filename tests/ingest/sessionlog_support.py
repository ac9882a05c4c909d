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


def claude_problems(events: object) -> list[str]:
    """Everything that makes Claude Code `events` an invalid Messages API request once resumed:
    consecutive events of one role are one turn (the API joins them); a `tool_result` answers a
    `tool_use` of the assistant turn just before it and comes before any text of its turn; every
    `tool_use` is answered in the next turn. Summary and system events are not sent."""
    if not isinstance(events, list):
        return ["not a list of events"]
    problems: list[str] = []
    turns = _claude_turns(events, problems)
    for n, (role, blocks) in enumerate(turns):
        previous = turns[n - 1] if n else ("user", [])
        called = {b.get("id") for b in previous[1] if previous[0] == "assistant" and b.get("type") == "tool_use"}
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if role == "assistant" and results:
            problems.append(f"turn {n}: an assistant turn holds tool results")
        for result in results:
            if result not in called:
                problems.append(f"turn {n}: tool_result for {result!r} answers no tool_use of the turn before")
        if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
            problems.append(f"turn {n}: text before the tool results of its turn")
        if role == "user" and called - set(results):
            problems.append(f"turn {n}: tool_use {sorted(called - set(results))} without a tool_result after it")
        if any(b.get("type") == "text" and not b.get("text") for b in blocks):
            problems.append(f"turn {n}: an empty text block")
    if turns and turns[-1][0] == "assistant" and any(b.get("type") == "tool_use" for b in turns[-1][1]):
        problems.append("end: tool_use without a tool_result after it")
    return problems


def _claude_turns(events: list, problems: list[str]) -> list[tuple[str, list[dict]]]:
    turns: list[tuple[str, list[dict]]] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("type") in ("summary", "system"):
            continue
        message = event.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        if event.get("type") not in ("user", "assistant") or role != event.get("type"):
            problems.append(f"events[{index}]: not a user or assistant event with its message")
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            problems.append(f"events[{index}]: content is not text or a list of blocks")
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks)))
    return turns


def gemini_problems(contents: object) -> list[str]:
    """Everything that makes Gemini `contents` an invalid generateContent request: roles user and
    model, parts never empty; a function call turn comes right after a user turn or a function
    response turn; the turn after it holds exactly one functionResponse per functionCall (by id,
    else by name); a functionResponse only right after its functionCall turn."""
    if not isinstance(contents, list) or not contents:
        return ["not a non-empty list of contents"]
    problems: list[str] = []
    calls: list[dict] = []  # the function calls of the turn before
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        parts = content.get("parts") if isinstance(content, dict) else None
        if content.get("role") not in ("user", "model") or not isinstance(parts, list) or not parts:
            problems.append(f"{where}: not a user or model content with parts")
            calls = []
            continue
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if responses or calls:
            problems.extend(f"{where}: {problem}" for problem in _answer_problems(content["role"], calls, responses))
        if any("text" in p and not p["text"] for p in parts):
            problems.append(f"{where}: an empty text part")
        calls = [p["functionCall"] for p in parts if "functionCall" in p] if content["role"] == "model" else []
        if calls and index and contents[index - 1].get("role") != "user":
            problems.append(f"{where}: a function call turn not right after a user or function response turn")
    if calls:
        problems.append("end: function calls without their responses")
    return problems


def _answer_problems(role: str, calls: list[dict], responses: list[dict]) -> list[str]:
    if role != "user":
        return ["a model turn where the function responses of the turn before were due"]
    if len(responses) != len(calls):
        return [f"{len(responses)} function response part(s) for {len(calls)} function call part(s)"]
    waiting = list(calls)
    problems = []
    for response in responses:
        call = next((c for c in waiting if _answers(response, c)), None)
        if call is None:
            problems.append(f"functionResponse {response.get('name')!r} answers no function call of the turn before")
        else:
            waiting.remove(call)
    return problems


def _answers(response: dict, call: dict) -> bool:
    same_id = not call.get("id") or response.get("id") == call.get("id")
    return same_id and response.get("name") == call.get("name")
