"""Reading what was given (a file, a directory, a .zip, an upload) into SourceFiles, and telling
which format it is in when nobody said so."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path, PurePosixPath

from ingest.memoryfiles import FormatError, SourceFile, contextfile, markdown, mem0

MAX_FILES = 2000
MAX_TOTAL_BYTES = 50 * 1024 * 1024  # what a zip may unpack to


def read_path(path: str | os.PathLike) -> list[SourceFile]:
    """A file as itself (a .zip as its members), a directory as its .md files, relative names."""
    target = Path(path)
    if target.is_dir():
        found = sorted(p for p in target.rglob("*") if p.is_file() and p.suffix.lower() == ".md")
        if len(found) > MAX_FILES:
            raise FormatError(f"{len(found)} files; at most {MAX_FILES} are read at once")
        return [SourceFile(p.relative_to(target).as_posix(), p.read_bytes()) for p in found]
    return read_upload(target.name, target.read_bytes())


def read_upload(name: str, data: bytes) -> list[SourceFile]:
    """An uploaded file as itself, or a .zip (of a markdown memory directory) as its .md members."""
    if not name.lower().endswith(".zip"):
        return [SourceFile(name, data)]
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise FormatError(f"{name} is not a readable .zip file") from None
    members = [m for m in archive.infolist() if not m.is_dir() and m.filename.lower().endswith(".md")]
    for member in members:
        path = PurePosixPath(member.filename)
        if path.is_absolute() or ".." in path.parts:
            raise FormatError(f"{name}: {member.filename} points outside the archive")
    # macOS resource forks and hidden files are not memories.
    members = [m for m in members if not any(part.startswith(("__MACOSX", ".")) for part in m.filename.split("/"))]
    if len(members) > MAX_FILES:
        raise FormatError(f"{name} holds {len(members)} .md files; at most {MAX_FILES} are read at once")
    if sum(m.file_size for m in members) > MAX_TOTAL_BYTES:
        raise FormatError(f"{name} unpacks to more than {MAX_TOTAL_BYTES // (1024 * 1024)} MB of .md files")
    names = [PurePosixPath(m.filename) for m in members]
    # A zip of the directory itself holds one top folder: names are relative to it.
    common = (
        names[0].parts[0]
        if names and all(len(n.parts) > 1 and n.parts[0] == names[0].parts[0] for n in names)
        else None
    )
    files = []
    for member, member_name in zip(members, names, strict=True):
        relative = PurePosixPath(*member_name.parts[1:]) if common else member_name
        files.append(SourceFile(relative.as_posix(), archive.read(member)))
    return files


def detect(files: list[SourceFile], *, given_a_directory: bool = False) -> str:
    """The format of the files: a directory (or zip) of .md files is markdown-dir; one .md file is a
    context file when it is named like one (CLAUDE.md, GEMINI.md, QWEN.md, AGENTS.md) or has an
    "added memories" section, else a markdown memory file; .json in mem0's get_all shape is mem0;
    .jsonl is JSONL. FormatError says why when none fits."""
    if given_a_directory or len(files) > 1:
        return markdown.FORMAT
    if not files:
        raise FormatError("no .md files found")
    source = files[0]
    name = source.name.rsplit("/", 1)[-1]
    lower = name.lower()
    if lower.endswith(".jsonl"):
        return "jsonl"
    text = source.data.decode("utf-8-sig", errors="replace")
    if lower.endswith(".md"):
        if name.upper() in {n.upper() for n in contextfile.CONTEXT_FILE_NAMES} or contextfile.has_memory_section(text):
            return contextfile.FORMAT
        return markdown.FORMAT
    if lower.endswith(".json"):
        if mem0.looks_like(text):
            return mem0.FORMAT
        raise FormatError(f'{name} is JSON but not a mem0 export ({{"results": [{{"id", "memory", …}}]}})')
    raise FormatError(f"cannot tell the format of {name}: choose one (markdown-dir, context-file, mem0, jsonl)")
