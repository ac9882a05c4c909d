"""Store a transcript (DESIGN.md transcript JSON) so it can be extracted from and inspected.

python manage.py ingest_transcript conversation.json --json
"""

from __future__ import annotations

from memoryui.management.base import ReportingCommand
from memoryui.management.transcript_files import read_transcript, store_transcript


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
