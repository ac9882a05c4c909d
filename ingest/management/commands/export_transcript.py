"""Write a stored transcript back out: as stored, or (--projected) as the provider-safe projection
every consumer sees, in the format it came in or another. What the target format cannot hold, or
the projection changed, is listed as notes (in `--json`'s `notes`; on standard error when the
export itself goes to standard output).

python manage.py export_transcript 3f2c… --projected                  # to standard output
python manage.py export_transcript 3f2c… --projected --format openai resumed.json
"""

from __future__ import annotations

from django.core.management.base import CommandError

from ingest import sessionlogs
from ingest.management.transcript_files import stored_transcript
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = (
        "Write a stored transcript in the format it came in (or --format): every stored message, or with "
        "--projected the projection (a trailing open tool exchange trimmed, so a provider accepts it)."
    )

    def add_arguments(self, parser):
        parser.add_argument("transcript", help="memoryui's id of the transcript, or the id it was posted with")
        parser.add_argument("path", nargs="?", help="the file to write (default: standard output)")
        parser.add_argument("--projected", action="store_true", help="the projection, not every stored message")
        parser.add_argument(
            "--format",
            choices=[*sessionlogs.FORMATS, *sessionlogs.ALIASES],
            help="write this format (default: the one the transcript came in)",
        )
        parser.add_argument("--scope", help="the scope, when the id it was posted with is used in several")
        parser.add_argument(
            "--json", action="store_true", help="with a PATH: print one JSON document saying what was written"
        )

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"]) if options["scope"] else None
        transcript = stored_transcript(options["transcript"], scope)
        export = sessionlogs.export(transcript, options["format"], projected=options["projected"])
        text = export.text()
        if not options["path"]:
            if options["json"]:
                raise CommandError("--json needs a PATH: without one the export itself is the output")
            self.stdout.write(text, ending="")
            for note in export.notes:  # the export alone goes to standard output
                self.stderr.write(f"note: {note}")
            return
        try:
            with open(options["path"], "w", encoding="utf-8") as stream:
                stream.write(text)
        except OSError as exc:
            raise CommandError(f"cannot write {options['path']}: {exc.strerror or exc}") from None
        summary = {
            "transcript_id": str(transcript.pk),
            "format": export.format,
            "projected": options["projected"],
            "exported": len(export.items),
            "trimmed": export.trimmed,
            "notes": export.notes,
            "path": options["path"],
        }
        if options["json"]:
            self.report(summary)
        else:
            self.stdout.write(
                f"Wrote {len(export.items)} {export.format} items of transcript {transcript.pk} to {options['path']}"
                + (f" ({len(export.trimmed)} messages trimmed)." if export.trimmed else ".")
            )
            for note in export.notes:
                self.stdout.write(f"note: {note}")
