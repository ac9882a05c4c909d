"""The README's transcript example is one the ingestion rules accept, as documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ingest.ingestion import ingest

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[2] / "README.md"


def documented_example() -> dict:
    section = README.read_text().split("\n## Transcripts\n", 1)[1].split("\n## ", 1)[0]
    return json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))


def test_the_readme_example_is_stored_with_every_documented_field():
    example = documented_example()

    report = ingest(example)

    assert report.created and report.messages == len(example["messages"]) == 6
    stored = {key for message in report.transcript.messages.all() for key in message.as_dict()}
    assert stored == {"role", "content", "tool_calls", "tool_call_id", "channel", "source", "created_at"}
    assert report.transcript.external_id == example["id"]
