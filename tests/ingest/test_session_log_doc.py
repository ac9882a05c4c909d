"""The README's session-log examples are read as documented: each in its format, detected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingest import sessionlogs

README = Path(__file__).resolve().parents[2] / "README.md"


def examples() -> list[tuple[str, str]]:
    section = README.read_text().split("\n## Session logs\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(jsonl|json)\n(.*?)```", section, re.S)


def test_the_section_has_an_example_of_each_session_format():
    assert [sessionlogs.detect(text) for _, text in examples()] == ["claude-code", "gemini", "openai"]


@pytest.mark.django_db
def test_each_example_reads_as_the_mapping_rules_say():
    claude, gemini, openai = (sessionlogs.read(text).transcript["messages"] for _, text in examples())

    assert [(m["role"], m.get("source")) for m in claude] == [
        ("user", "internal"),
        ("user", None),
        ("assistant", None),
        ("tool", None),
    ]
    assert claude[2]["tool_calls"][0]["id"] == claude[3]["tool_call_id"]
    assert [m["role"] for m in gemini] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert gemini[0]["source"] == "internal" and gemini[4]["tool_call_id"] == gemini[3]["tool_calls"][0]["id"]
    assert [(m["role"], m.get("channel")) for m in openai][:2] == [("system", "system"), ("user", None)]
