"""Load memory JSONL: a faithful restore by default, merged through dedup with --dedup."""

from __future__ import annotations

import sys

from django.core.management.base import CommandError

from memoryui import jsonl, rules
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = (
        "Import memories from JSONL (PATH, or - for stdin). Duplicates are kept (a faithful restore) "
        "unless --dedup; a line whose id exists is skipped when identical, updated otherwise, and never "
        "moved to another scope unless --allow-move. Bad lines are reported with their line numbers and "
        "the command exits 1."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("path", help="JSONL file, or - for standard input")
        parser.add_argument("--scope", help="put every line in this scope (a bare id means agent:<id>)")
        parser.add_argument("--atomic", action="store_true", help="all or nothing: any bad line writes nothing")
        parser.add_argument("--dedup", action="store_true", help="merge duplicates through the write path")
        parser.add_argument(
            "--allow-move",
            action="store_true",
            help="move a memory whose id exists in another scope to the line's scope (or --scope), "
            "recorded in its history; without it such a line is an error",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON report on stdout")

    def handle(self, *args, **options):
        as_json = options["json"]
        try:
            if options["path"] == "-":
                stream = options.get("stdin") or sys.stdin.buffer
                report = self._import(stream, options)
            else:
                with open(options["path"], "rb") as stream:
                    report = self._import(stream, options)
        except OSError as exc:
            raise CommandError(f"cannot read {options['path']}: {exc.strerror or exc}") from None
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None

        if as_json:
            self.report(report.to_dict())
        else:
            self.stdout.write(
                f"Imported {report.imported}, updated {report.updated}, merged {report.merged}, "
                f"skipped {report.skipped}, errors {len(report.errors)}."
                + (f" Batch {report.batch}." if report.batch else "")
            )
            for error in report.errors:
                self.stderr.write(f"line {error['line']}: {error['error']}")
        if report.errors:
            written = "nothing was written (--atomic)" if options["atomic"] else "those lines were not imported"
            raise CommandError(f"{len(report.errors)} line(s) had errors; {written}")

    def _import(self, stream, options) -> jsonl.ImportReport:
        return jsonl.import_lines(
            stream,
            scope=options["scope"],
            atomic=options["atomic"],
            dedup=options["dedup"],
            allow_move=options["allow_move"],
        )
