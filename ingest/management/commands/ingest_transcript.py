"""Store a transcript or an agent's session log so it can be extracted from and inspected.

python manage.py ingest_transcript conversation.json --json
python manage.py ingest_transcript ~/.claude/projects/-srv-app/5f0c….jsonl --scope agent:main
python manage.py ingest_transcript checkpoint-deploy.json --format gemini --scope agent:main
"""

from __future__ import annotations

from ingest import sessionlogs
from ingest.management.transcript_files import read_session, store_transcript
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = (
        "Store a transcript (memoryui's JSON {id?, scope, messages}, a Claude Code session .jsonl, a gemini-cli "
        "or qwen-code chat checkpoint, or OpenAI chat messages); posting it again adds only new messages. "
        "Malformed messages are reported with their index and nothing is stored."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("path", help="the file, or - for standard input")
        parser.add_argument(
            "--format",
            choices=[*sessionlogs.FORMATS, *sessionlogs.ALIASES],
            help="the file's format (default: detected from its content)",
        )
        parser.add_argument("--scope", help="the transcript's scope (needed when the format has none)")
        parser.add_argument("--id", dest="external_id", help="the transcript's id, in place of the file's")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"]) if options["scope"] else None
        session, data = read_session(
            options["path"],
            options.get("stdin"),
            format=options["format"],
            scope=scope,
            external_id=options["external_id"],
        )
        report = store_transcript(data)
        if options["json"]:
            document = report.to_dict()
            if session.format != "memoryui":  # a session log also says what it was read as
                document.update(format=session.format, notes=session.notes)
            self.report(document)
            return
        verb = "Stored" if report.created else "Updated"
        self.stdout.write(
            f"{verb} transcript {report.transcript.pk} ({session.format}) in {report.transcript.scope}: "
            f"{report.messages} messages ({report.added} new)."
        )
        for note in session.notes:
            self.stdout.write(f"  note: {note}")
