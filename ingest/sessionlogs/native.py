"""memoryui's own transcript JSON (docs/architecture.md "File formats"), read and written as it is."""

from __future__ import annotations

import json

from ingest.sessionlogs.common import load_json
from ingest.transcripts import Msg


def read(text: str, *, filename: str = "") -> tuple[dict, list[str]]:
    data = load_json(text, "the transcript")
    if isinstance(data, list):
        data = {"messages": data}  # a bare list is the messages
    return data, []


def write(messages: list[Msg], transcript: dict) -> list[dict]:
    return [message.as_dict() for message in messages]


def dumps(items: list[dict], transcript: dict) -> str:
    """The whole transcript JSON, which `ingest_transcript` reads back."""
    document = {key: transcript[key] for key in ("id", "scope", "title", "metadata") if transcript.get(key)}
    document["messages"] = items
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
