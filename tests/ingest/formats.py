"""Helpers of the memory-format tests: the fixtures and commands run with --json."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memoryui.models import Memory, MemoryEvent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "memories"


def run(command: str, *args) -> dict:
    """Run a command with --json; the whole of stdout must be one JSON document."""
    out = io.StringIO()
    call_command(command, *[str(arg) for arg in args], "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def run_failing(command: str, *args) -> dict:
    """Run a command that must fail (exit 1) with --json; its one JSON document."""
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command(command, *[str(arg) for arg in args], "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def counts(field: str, **filters) -> dict[str, int]:
    return dict(Counter(Memory.objects.filter(**filters).values_list(field, flat=True)))


def store_state() -> list[tuple]:
    """Everything an import may change, to compare before and after."""
    memories = Memory.objects.order_by("id").values_list("id", "scope", "kind", "tier", "text", "updated_at")
    return [*memories, MemoryEvent.objects.count()]


def wipe() -> None:
    MemoryEvent.objects.all().delete()
    Memory.objects.all().delete()
