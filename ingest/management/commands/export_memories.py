"""Write memory JSONL (or a markdown memory directory, or a mem0 export) that import_memories reads
back identically."""

from __future__ import annotations

from django.core.management.base import CommandError

from ingest import jsonl
from ingest.memoryfiles import EXPORTABLE, FormatError
from ingest.memoryfiles.export import export
from memoryui import rules
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = (
        "Export memories as JSONL to PATH (or - for stdout), ordered by creation time, every field, "
        "timestamps in UTC; or, with --format, as a markdown memory directory (PATH: a new or empty "
        "directory; one .md per memory and a MEMORY.md index) or a mem0 get_all JSON file. Active memories "
        "only unless --include-tombstoned. Written atomically (temporary file + rename) with mode 0600."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="file (a directory for markdown-dir) to write, or - for standard output")
        parser.add_argument("--format", choices=EXPORTABLE, default="jsonl", help="what to write (default: jsonl)")
        parser.add_argument("--scope", help="only this scope (a bare id means agent:<id>)")
        parser.add_argument("--include-tombstoned", action="store_true", help="also export tombstoned memories")
        parser.add_argument("--json", action="store_true", help="print one JSON report on stdout")

    def handle(self, *args, **options):
        as_json = options["json"]
        scope = options["scope"]
        if scope is not None:
            try:
                scope = rules.normalize_scope(scope)
            except rules.ScopeError as exc:
                raise CommandError(f"--scope: {exc}") from None
        if options["path"] == "-" and options["format"] != "jsonl":
            raise CommandError(f"--format {options['format']} writes to a PATH, not to stdout")
        if options["path"] == "-" and as_json:
            raise CommandError("--json needs a file PATH: with - the export itself goes to stdout")

        if options["path"] == "-":
            for line in jsonl.export_lines(scope=scope, include_tombstoned=options["include_tombstoned"]):
                self.stdout.write(line, ending="")
            return
        try:
            exported = export(
                options["path"], format=options["format"], scope=scope, include_tombstoned=options["include_tombstoned"]
            )
        except OSError as exc:
            raise CommandError(f"cannot write {options['path']}: {exc.strerror or exc}") from None
        except FormatError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.report({"exported": exported})
        else:
            self.stdout.write(f"Exported {exported} memories to {options['path']}.")
