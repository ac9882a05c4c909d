"""Transcript ingestion: validate the transcript JSON (docs/architecture.md "File formats") and store it.

A transcript is stored whole or not at all: every malformed message is reported with its index
and the reason, and nothing is written. Ingestion is idempotent by transcript id (the agent's own, within
its scope) + message index: posting a transcript again stores only the messages it did not have; a stored message
is never changed (a different message at a stored index is a conflict, reported, not applied).

A request holds at most MAX_MESSAGES messages. A longer conversation is posted in parts: each part
names the transcript (`id`) and the index of its first message (`start`), and starts where the
stored messages end or earlier (no gap). A session log read from a file (the command line, the
upload form, a raw log posted to the API) is stored whole, up to MAX_FILE_MESSAGES.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from ingest.transcripts import arguments_problem
from memoryui import rules, untrusted
from memoryui.models import ConflictError, Message, Transcript
from memoryui.models.transcripts import EXTERNAL_ID_MAX_LENGTH

ROLES = tuple(Message.Role.values)
SOURCES = ("user", "internal", "banner", "repair", "compaction")
MAX_MESSAGES = 5000  # a request's messages: a longer conversation is posted in parts (`start`)
MAX_FILE_MESSAGES = 100_000  # a session log read from a file, stored whole
MAX_CONTENT_CHARS = 200_000
MAX_TITLE_CHARS = 200
MAX_TOOL_CALL_CHARS = 200  # a tool call's name and id; Message.tool_call_id has the same max_length
PROBLEMS_SHOWN = 20
_TOP_LEVEL = {"id", "scope", "title", "metadata", "messages", "start"}
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "channel", "source", "created_at"}


class TranscriptError(ValueError):
    """A transcript that cannot be stored; `errors` maps a field ("messages[3].role") to its reasons."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {', '.join(reasons)}" for name, reasons in errors.items()))


@dataclass
class IngestReport:
    transcript: Transcript
    created: bool
    added: int
    unchanged: int
    notes: list[str] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return self.added + self.unchanged

    def to_dict(self) -> dict:
        return {
            "transcript_id": str(self.transcript.pk),
            "external_id": self.transcript.external_id,
            "scope": self.transcript.scope,
            "created": self.created,
            "messages": self.messages,
            "added": self.added,
            "unchanged": self.unchanged,
        }


def clean_transcript(data, *, max_messages: int = MAX_MESSAGES) -> dict:
    """The transcript's fields and messages, validated and normalized; TranscriptError naming each problem.

    Messages are named by their index in the transcript (`start` + their position in this part)."""
    errors: dict[str, list[str]] = {}

    def problem(name: str, reason: str) -> None:
        errors.setdefault(name, []).append(reason)

    if not isinstance(data, dict):
        raise TranscriptError({"transcript": [f"must be a JSON object, got {type(data).__name__}"]})
    # Strings no text can store (a lone surrogate, a NUL) and nesting too deep, anywhere in it,
    # named as the API names them (`messages[2].content`); the checks below never see them.
    for where, reason in untrusted.json_problems(data):
        if len(errors) >= PROBLEMS_SHOWN:
            break
        problem(where.removeprefix("$").removeprefix(".") or "transcript", reason)
    if errors:
        raise TranscriptError(errors)
    for key in sorted(set(data) - _TOP_LEVEL):
        problem(str(key), f"is not a transcript field; use {', '.join(sorted(_TOP_LEVEL))}")
    clean: dict = {}
    if data.get("id") not in (None, ""):
        external_id = data["id"]
        if not isinstance(external_id, str):
            problem("id", f"must be a string (the agent's own id for it), got {type(external_id).__name__}")
        else:
            external_id = external_id.strip()
            if len(external_id) > EXTERNAL_ID_MAX_LENGTH:
                problem("id", f"is {len(external_id)} characters; at most {EXTERNAL_ID_MAX_LENGTH}")
            elif not untrusted.is_visible(external_id):
                problem("id", "holds no visible character")
            else:
                clean["id"] = external_id
    try:
        clean["scope"] = rules.normalize_scope(data.get("scope") or "")
    except rules.ScopeError as exc:
        problem("scope", str(exc))
    title = data.get("title", "")
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
        problem("title", f"must be a string of at most {MAX_TITLE_CHARS} characters")
    clean["title"] = title if isinstance(title, str) else ""
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        problem("metadata", "must be a JSON object")
    clean["metadata"] = metadata if isinstance(metadata, dict) else {}
    clean["start"] = _clean_start(data, problem)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        problem("messages", "must be a non-empty list of messages")
        messages = []
    elif len(messages) > max_messages:
        problem(
            "messages",
            f"holds {len(messages)} messages; at most {max_messages} a post: post a longer conversation in parts, "
            "each with the transcript's id and the index of its first message as start",
        )
        messages = []
    clean["messages"] = []
    for index, message in enumerate(messages, start=clean["start"]):
        cleaned = _clean_message(message, f"messages[{index}]", problem)
        if cleaned is not None:
            clean["messages"].append(cleaned)
    if errors:
        raise TranscriptError(errors)
    return clean


def _clean_start(data: dict, problem) -> int:
    """The index of the part's first message: 0 (or null) for a whole transcript."""
    start = data.get("start")
    if isinstance(start, float) and start.is_integer():
        start = int(start)  # JSON has one number type: 5000.0 is 5000
    if start is None:
        return 0
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        problem("start", f"must be the index of the part's first message (an integer from 0), got {start!r}")
        return 0
    return start


def _clean_message(message, where: str, problem) -> dict | None:
    if not isinstance(message, dict):
        problem(where, f"must be an object, got {type(message).__name__}")
        return None
    for key in sorted(set(message) - _MESSAGE_KEYS):
        problem(f"{where}.{key}", f"is not a message field; use {', '.join(sorted(_MESSAGE_KEYS))}")
    role = message.get("role")
    if role not in ROLES:
        problem(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    content = message.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        problem(f"{where}.content", f"must be a string, got {type(content).__name__}")
        content = ""
    elif len(content) > MAX_CONTENT_CHARS:
        problem(f"{where}.content", f"is {len(content)} characters; at most {MAX_CONTENT_CHARS}")
    tool_calls = _clean_tool_calls(message.get("tool_calls", []), f"{where}.tool_calls", problem)
    if tool_calls and role != "assistant":
        problem(f"{where}.tool_calls", "only assistant messages make tool calls")
    if role == "assistant" and not content.strip() and not tool_calls:
        problem(f"{where}.content", "an assistant message needs content or tool calls")
    if role == "user" and not content.strip():
        problem(f"{where}.content", "a user message needs content")
    strings = {}
    for name, limit in (("tool_call_id", MAX_TOOL_CALL_CHARS), ("channel", 40), ("source", 40)):
        value = message.get(name) or ""
        if not isinstance(value, str) or len(value) > limit:
            problem(f"{where}.{name}", f"must be a string of at most {limit} characters")
            value = ""
        strings[name] = value.strip()
    if strings["tool_call_id"] and role != "tool":
        problem(f"{where}.tool_call_id", "only tool results answer a tool call")
    if strings["source"] and strings["source"] not in SOURCES:
        problem(f"{where}.source", f"must be one of {', '.join(SOURCES)}, got {strings['source']!r}")
    created_at = None
    if message.get("created_at") not in (None, ""):
        try:
            created_at = rules.parse_datetime_value(message["created_at"])
        except (TypeError, ValueError) as exc:
            problem(f"{where}.created_at", str(exc))
    return {
        "role": role,
        "content": content,
        "tool_calls": tool_calls,
        **strings,
        "channel": strings["channel"].lower(),
        "created_at": created_at,
    }


def _clean_tool_calls(value, where: str, problem) -> list[dict]:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        problem(where, "must be a list of {id, name, arguments}")
        return []
    calls = []
    for n, call in enumerate(value):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"].strip():
            problem(f"{where}[{n}]", "must be an object with a name (and an id, arguments)")
            continue
        arguments = call.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        elif unwritable := arguments_problem(arguments):  # what cannot be exported is refused here
            problem(f"{where}[{n}].arguments", unwritable)
        call_id = call.get("id") or f"call_{n}"
        if not isinstance(call_id, str):
            problem(f"{where}[{n}].id", "must be a string")
            continue
        name = call["name"].strip()
        too_long = [(key, text) for key, text in (("name", name), ("id", call_id)) if len(text) > MAX_TOOL_CALL_CHARS]
        for key, text in too_long:
            # Kept in the list all the same, so the message is not also said to make no call.
            problem(f"{where}[{n}].{key}", f"is {len(text)} characters; at most {MAX_TOOL_CALL_CHARS}")
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    return calls


def ingest(data, *, allowed_scopes: list[str] | None = None, max_messages: int = MAX_MESSAGES) -> IngestReport:
    """Store a transcript (or the messages it did not have yet); TranscriptError or ConflictError."""
    clean = clean_transcript(data, max_messages=max_messages)
    if allowed_scopes is not None and clean["scope"] not in allowed_scopes:
        raise TranscriptError(
            {"scope": [f"{clean['scope']} is outside this token's scopes: {', '.join(allowed_scopes)}"]}
        )
    now = timezone.now()
    with transaction.atomic():
        transcript = None
        if "id" in clean:
            # Looked up in the transcript's own scope only: another scope's transcript of the same
            # id is none of this caller's business, and is neither found nor named.
            transcript = (
                Transcript.objects.select_for_update().filter(scope=clean["scope"], external_id=clean["id"]).first()
            )
        created = transcript is None
        if created:
            transcript = Transcript.objects.create(
                # memoryui's own id is always new: taking the agent's UUID when it is free would
                # tell the agent whether another scope holds a transcript of that id.
                external_id=clean.get("id", ""),
                scope=clean["scope"],
                title=clean["title"],
                metadata=clean["metadata"],
                created_at=now,
                updated_at=now,
            )
            stored = {}
        else:
            stored = {m.index: m for m in transcript.messages.all()}
        start = clean["start"]
        if start > len(stored):
            # Valid on its own, but not against what is stored: a conflict, as a changed message is.
            raise ConflictError(
                f"start: the transcript holds {len(stored)} messages, so a part starts at {len(stored)} or earlier "
                "(a part may repeat stored messages, never leave a gap)"
            )
        indexed = list(enumerate(clean["messages"], start=start))
        conflicts = [index for index, message in indexed if index in stored and not _same(stored[index], message)]
        if conflicts:
            shown = ", ".join(str(index) for index in conflicts[:10])
            raise ConflictError(
                f"messages {shown} differ from the stored ones: a stored message is never changed "
                "(post the transcript with its stored messages as they were, and new ones after them)"
            )
        new = [
            Message(transcript=transcript, index=index, **message) for index, message in indexed if index not in stored
        ]
        Message.objects.bulk_create(new, batch_size=1000)
        if new and not created:
            transcript.metadata = _with_new_message_fields(transcript.metadata, clean["metadata"], new)
            transcript.updated_at = now
            transcript.save(update_fields=["updated_at", "metadata"])
    return IngestReport(
        transcript=transcript, created=created, added=len(new), unchanged=len(clean["messages"]) - len(new)
    )


def _with_new_message_fields(stored: dict, posted: dict, new: list[Message]) -> dict:
    """The stored metadata, with what the posted session log says of the new messages beyond their
    fields (`message_fields`, by index: a tool result's `is_error`, …) added. A growing session is
    posted whole again; the rest of its metadata, and what was said of stored messages, stay as
    first stored."""
    posted_fields = posted.get("message_fields")
    if not isinstance(posted_fields, dict):
        return stored
    added = {str(m.index): posted_fields[str(m.index)] for m in new if str(m.index) in posted_fields}
    if not added:
        return stored
    kept = stored.get("message_fields") if isinstance(stored.get("message_fields"), dict) else {}
    return {**stored, "message_fields": {**kept, **added}}


def _same(stored: Message, message: dict) -> bool:
    return (
        stored.role == message["role"]
        and stored.content == message["content"]
        and (stored.tool_calls or []) == message["tool_calls"]
        and stored.tool_call_id == message["tool_call_id"]
    )
