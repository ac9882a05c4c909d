"""Store a transcript (DESIGN.md transcript JSON) so it can be extracted from and inspected.

python manage.py ingest_transcript conversation.json --json
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import CommandError

from memoryui.ingestion import TranscriptError, ingest
from memoryui.management.base import ReportingCommand
from memoryui.models import ConflictError


def read_transcript(path: str, stdin=None) -> dict:
    try:
        if path == "-":
            return json.load(stdin or sys.stdin)
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


def store_transcript(data: dict):
    try:
        return ingest(data)
    except TranscriptError as exc:
        details = "; ".join(f"{name}: {', '.join(reasons)}" for name, reasons in exc.errors.items())
        raise CommandError(f"transcript not stored: {details}") from None
    except ConflictError as exc:
        raise CommandError(f"transcript not stored: {exc}") from None


class Command(ReportingCommand):
    help = (
        "Store a transcript (JSON: {id?, scope, messages}); posting it again adds only new messages. "
        "Malformed messages are reported with their index and nothing is stored."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("path", help="transcript JSON file, or - for standard input")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        report = store_transcript(read_transcript(options["path"], options.get("stdin")))
        if options["json"]:
            self.report(report.to_dict())
            return
        verb = "Stored" if report.created else "Updated"
        self.stdout.write(
            f"{verb} transcript {report.transcript.pk} in {report.transcript.scope}: "
            f"{report.messages} messages ({report.added} new)."
        )
