"""Export the store as another tool's memory files: a markdown memory directory or a mem0 export
(JSONL stays ingest.jsonl's). Each carries every field of ours, so importing it back is exact."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ingest import jsonl
from ingest.memoryfiles import FormatError, markdown, mem0


def export(path: str | os.PathLike, *, format: str, scope: str | None = None, include_tombstoned: bool = False) -> int:
    """Write the memories to `path` in `format`; return how many. A file is written through a
    temporary file and a rename, a directory through a temporary directory; files are 0600."""
    if format == "jsonl":
        return jsonl.write_export(path, jsonl.export_lines(scope=scope, include_tombstoned=include_tombstoned))
    records = list(jsonl.export_records(scope=scope, include_tombstoned=include_tombstoned))
    if format == mem0.FORMAT:
        jsonl.write_export(path, [mem0.export_document(records)])
        return len(records)
    if format == markdown.FORMAT:
        write_directory(Path(path), markdown.export_files(records))
        return len(records)
    raise FormatError(f"cannot export as {format!r}; one of jsonl, markdown-dir, mem0")


def write_directory(target: Path, files: dict[str, str]) -> None:
    """Create `target` (which must not exist, or be empty) holding `files`, all at once."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FormatError(f"{target} exists and is not an empty directory")
    temp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        for name, text in files.items():
            jsonl.write_export(temp / name, [text])
        if target.exists():
            target.rmdir()
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
