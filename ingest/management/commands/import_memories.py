"""Load memories: our JSONL (a faithful restore by default, merged through dedup with --dedup), or
the memory files other agents keep (--format, detected when left out)."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import CommandError

from ingest.memoryfiles import FORMATS, FormatError, SourceFile, detect
from ingest.memoryfiles.importing import FileImportReport, import_files, import_files_in_background
from memoryui import rules
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = (
        "Import memories from PATH (or - for stdin): memoryui JSONL, a markdown memory directory "
        "(one .md per memory with front matter), the added-memories bullets of a CLAUDE.md/GEMINI.md/"
        "QWEN.md context file, or a mem0 get_all JSON export; --format, or detected from PATH. "
        "Duplicates are kept (a faithful restore) unless --dedup; a memory whose id exists is skipped when "
        "identical, updated otherwise, and never moved to another scope unless --allow-move: imported into "
        "another scope, it is copied there (an id of its own, the original in metadata.copied_from). Memories read "
        "from other tools' files get stable ids, so importing them again changes nothing. Bad files and lines "
        "are reported by name and number and the command exits 1. With --background the memories are "
        "searchable by keyword when the command returns and their embedding is spread over the Celery "
        "workers (a task on the Tasks page)."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("path", help="file or directory, or - for standard input")
        parser.add_argument("--format", choices=FORMATS, help="the format of PATH (default: detected)")
        parser.add_argument("--scope", help="put every memory in this scope (a bare id means agent:<id>)")
        parser.add_argument("--atomic", action="store_true", help="all or nothing: any bad line writes nothing")
        parser.add_argument("--dedup", action="store_true", help="merge duplicates through the write path")
        parser.add_argument(
            "--allow-move",
            action="store_true",
            help="move a memory whose id exists in another scope to the line's scope (or --scope), "
            "recorded in its history; without it such a line is imported there as a copy",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="show what would be written (each memory, new/unchanged/updated)"
        )
        parser.add_argument(
            "--background",
            action="store_true",
            help="write the rows and their keyword (BM25) index now and leave the embedding to the Celery "
            "workers, in batches, tracked by a task (its id is printed; --json: 'task')",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON report on stdout")

    def handle(self, *args, **options):
        path = options["path"]
        try:
            files = self._read(path, options)
            format = options["format"] or (
                "jsonl" if path == "-" else detect.detect(files, given_a_directory=_is_dir(path))
            )
            importer = import_files_in_background if options["background"] else import_files
            report = importer(
                files,
                format=format,
                scope=options["scope"],
                atomic=options["atomic"],
                dedup=options["dedup"],
                allow_move=options["allow_move"],
                dry_run=options["dry_run"],
            )
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None
        except FormatError as exc:
            raise CommandError(str(exc)) from None

        if options["json"]:
            self.report(report.to_dict())
        else:
            self._say(report)
        if report.errors:
            written = "nothing was written (--atomic)" if options["atomic"] else "those lines were not imported"
            if options["dry_run"]:
                written = "nothing was written (--dry-run)"
            raise CommandError(f"{len(report.errors)} line(s) had errors; {written}")

    def _read(self, path: str, options) -> list[SourceFile]:
        if path == "-":
            stream = options.get("stdin") or sys.stdin.buffer
            return [SourceFile("stdin", stream.read())]
        return detect.read_path(path)

    def _say(self, report: FileImportReport) -> None:
        if report.dry_run:
            for row in report.preview:
                where = f"{row['file']}:{row['line']}" if "file" in row else f"line {row['line']}"
                memory_id = row["id"] or "(new id)"
                self.stdout.write(
                    f"{row['action']:<9} {row['kind']:<13} {row['tier']:<10} {row['scope']:<20} {memory_id:<36}  "
                    f"{row['text'][:70]!r}  ({where})"
                )
        verb = "Would import" if report.dry_run else "Imported"
        self.stdout.write(
            f"{verb} {report.imported}, updated {report.updated}, merged {report.merged}, "
            f"skipped {report.skipped}, errors {len(report.errors)} ({report.format})."
            + (f" Batch {report.batch}." if report.batch else "")
            + (" Nothing was written (--dry-run)." if report.dry_run else "")
        )
        if report.task:
            searchable = (
                "searchable by keyword now"
                if report.bm25_searchable
                else "not yet searchable by keyword (the BM25 index was unavailable; the task writes it)"
            )
            self.stdout.write(
                f"Task {report.task}: {searchable}; vector search follows as the embedding batches land "
                f"({report.vector_pending} memories to embed; see the Tasks page)."
            )
        for skipped in report.skipped_files:
            self.stdout.write(f"skipped {skipped['file']}:{skipped['line']}: {skipped['reason']}")
        for error in report.errors:
            where = f"{error['file']} line {error['line']}" if "file" in error else f"line {error['line']}"
            self.stderr.write(f"{where}: {error['error']}")


def _is_dir(path: str) -> bool:
    return Path(path).is_dir()
