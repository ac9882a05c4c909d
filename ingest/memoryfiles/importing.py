"""Import memory files of any format through ingest.jsonl's machinery: each format module reads
its files into JSONL-shaped records; here they are validated (`jsonl.parse_record`), planned
against the store and written (`jsonl.import_records`), and every problem and preview row is
given back its file and line."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field

from ingest import jsonl
from ingest.memoryfiles import FORMATS, FormatError, Parsed, SourceFile, contextfile, markdown, mem0
from memoryui import rules
from memoryui.models import announcements_held
from searchindex.tasks import index_in_background

PARSERS = {markdown.FORMAT: markdown.parse, contextfile.FORMAT: contextfile.parse, mem0.FORMAT: mem0.parse}


@dataclass
class FileImportReport(jsonl.ImportReport):
    """An import's report, with the format read and what was passed over on purpose and why
    (`skipped_files`: an index file, a repeated bullet; counted in `skipped` too)."""

    format: str = ""
    skipped_files: list[dict] = field(default_factory=list, metadata={"omit_empty": True})
    # An import in the background: the TaskRun embedding its memories, and whether every row
    # written was searchable by keyword when the import answered.
    task: str | None = field(default=None, metadata={"omit_empty": True})
    bm25_searchable: bool | None = field(default=None, metadata={"omit_empty": True})
    vector_pending: int | None = field(default=None, metadata={"omit_empty": True})


def import_files_in_background(files: list[SourceFile], *, format: str, **options) -> FileImportReport:
    """`import_files`, then its BM25 entries written at once and its vectors left to the workers
    (searchindex.tasks.index_in_background): the rows are searchable by keyword when this returns,
    and by meaning as the embedding batches of the report's `task` land."""
    with announcements_held() as held:
        report = import_files(files, format=format, **options)
    if options.get("dry_run"):
        return report
    run = index_in_background(held.ids, actor=options.get("actor", jsonl.IMPORT_ACTOR))
    report.task = str(run.pk)
    report.bm25_searchable = bool(run.params.get("bm25_searchable"))
    report.vector_pending = run.progress_total - run.progress_done
    return report


def import_files(
    files: list[SourceFile],
    *,
    format: str,
    scope: str | None = None,
    atomic: bool = False,
    dedup: bool = False,
    allow_move: bool = False,
    actor: str = jsonl.IMPORT_ACTOR,
    dry_run: bool = False,
) -> FileImportReport:
    """Import (or with `dry_run`, preview) the files as `format`. `scope` (normalized here; a
    rules.ScopeError when it is not a scope) puts every memory in that scope. Errors carry the
    file and line they are about (JSONL: the line only, as ever)."""
    if format not in FORMATS:
        raise FormatError(f"unknown format {format!r}; one of {', '.join(FORMATS)}")
    if scope is not None:
        scope = rules.normalize_scope(scope)
    options = {"atomic": atomic, "dedup": dedup, "allow_move": allow_move, "actor": actor, "dry_run": dry_run}
    if format == "jsonl":
        if len(files) != 1:
            raise FormatError("a JSONL import reads one file")
        report = jsonl.import_lines(io.BytesIO(files[0].data), scope=scope, **options)
        return FileImportReport(**vars(report), format=format)
    parsed = PARSERS[format](files, scope=scope)
    return _import_parsed(parsed, format=format, **options)


def _import_parsed(parsed: Parsed, *, format: str, atomic: bool, **options) -> FileImportReport:
    where: list[tuple[str, int]] = []  # position - 1 → (file, line)
    valid: list[tuple[int, dict]] = []
    invalid: list[dict] = []
    first_of: dict[uuid.UUID, tuple[str, int]] = {}
    for candidate in parsed.candidates:
        where.append((candidate.file, candidate.line))
        position = len(where)
        try:
            fields = jsonl.parse_record(candidate.record)
        except ValueError as exc:  # MemoryValidationError is one
            invalid.append({"line": position, "error": str(exc)})
            continue
        memory_id = fields.get("id")  # every reader gives one, but a hand-written export may not
        if memory_id in first_of:
            file, line = first_of[memory_id]
            invalid.append({"line": position, "error": f"id: {memory_id} is already used in {file} line {line}"})
            continue
        if memory_id is not None:
            first_of[memory_id] = (candidate.file, candidate.line)
        valid.append((position, fields))

    if atomic and parsed.errors:
        report = jsonl.ImportReport(errors=invalid, dry_run=options["dry_run"] or None)
    else:
        report = jsonl.import_records(valid, invalid, atomic=atomic, **options)

    def located(entry: dict) -> dict:
        file, line = where[entry["line"] - 1]
        return {"file": file, **entry, "line": line}

    result = FileImportReport(**vars(report), format=format, skipped_files=parsed.skipped)
    result.errors = sorted(
        [located(error) for error in report.errors] + parsed.errors, key=lambda e: (e["file"], e["line"])
    )
    result.preview = [located(row) for row in report.preview]
    result.skipped += len(parsed.skipped)
    return result
