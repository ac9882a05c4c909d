"""Memory stores other agents keep, read into ours and written back out.

Formats (`FORMATS`), each a module of plain functions that turn files into JSONL-shaped records
(`Candidate`) and memories back into files:

    markdown-dir   one memory per .md file with YAML front matter (name, description, type), as
                   coding agents keep auto-memory; an index such as MEMORY.md is not a memory
                   (ingest.memoryfiles.markdown)
    context-file   the bullets of the "added memories" sections of CLAUDE.md / GEMINI.md /
                   QWEN.md-style context files (ingest.memoryfiles.contextfile)
    mem0           mem0's get_all JSON export (ingest.memoryfiles.mem0)
    jsonl          memoryui's own memory JSONL (ingest.jsonl), unchanged

Every imported record goes through ingest.jsonl's validation, planning and insert/update
machinery (ingest.memoryfiles.importing), so an import of any format is faithful, reports
bad files and lines, records history events and queues index sync exactly as a JSONL restore.
A memory read from another tool's files gets a stable id (`stable_id`), so importing the same
files again changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

FORMATS = ("markdown-dir", "context-file", "mem0", "jsonl")
EXPORTABLE = ("jsonl", "markdown-dir", "mem0")

# The namespace of every imported memory's stable id (uuid5 of it and the memory's identity).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://memoryui.invalid/import")


class FormatError(ValueError):
    """Input that is not in the format asked for (or none could be detected)."""


@dataclass(frozen=True)
class SourceFile:
    """One file of an import: its name relative to what was given (a directory, a zip) and its bytes."""

    name: str
    data: bytes


@dataclass
class Candidate:
    """One memory read from a file: where it is (file, line) and its JSONL-shaped record."""

    file: str
    line: int
    record: dict


@dataclass
class Parsed:
    """What a format module read: the memories, the problems (file, line, error) and what it
    passed over on purpose (file, line, reason), e.g. an index file."""

    candidates: list[Candidate] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    def error(self, file: str, line: int, message: str) -> None:
        self.errors.append({"file": file, "line": line, "error": message})

    def skip(self, file: str, line: int, reason: str) -> None:
        self.skipped.append({"file": file, "line": line, "reason": reason})


def stable_id(format: str, scope: str, identity: str) -> uuid.UUID:
    """The id of an imported memory: the same format, scope and identity (a file's relative path,
    a bullet's file and normalized text, a mem0 id) always give the same id."""
    return uuid.uuid5(NAMESPACE, f"{format}\n{scope}\n{identity}")


def decode(source: SourceFile, parsed: Parsed) -> str | None:
    """The file's text (UTF-8, a BOM dropped), or None with an error naming the file."""
    try:
        return source.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        parsed.error(source.name, 1, f"not valid UTF-8 (byte {exc.start})")
        return None
