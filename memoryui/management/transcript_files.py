"""Reading and storing a transcript file, shared by `ingest_transcript` and `extract`."""

from __future__ import annotations

import json
import sys

from django.core.management.base import CommandError

from memoryui.ingestion import IngestReport, TranscriptError, ingest
from memoryui.models import ConflictError


def read_transcript(path: str, stdin=None) -> dict:
    """The transcript JSON in `path` (`-`: standard input), or a CommandError saying why not."""
    try:
        if path == "-":
            return json.load(stdin or sys.stdin)
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


def store_transcript(data: dict) -> IngestReport:
    """Store the transcript, or a CommandError naming every problem (nothing is stored then)."""
    try:
        return ingest(data)
    except TranscriptError as exc:
        details = "; ".join(f"{name}: {', '.join(reasons)}" for name, reasons in exc.errors.items())
        raise CommandError(f"transcript not stored: {details}") from None
    except ConflictError as exc:
        raise CommandError(f"transcript not stored: {exc}") from None
