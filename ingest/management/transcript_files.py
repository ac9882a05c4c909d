"""Reading and storing a transcript file, shared by `ingest_transcript` and `extract`."""

from __future__ import annotations

import sys

from django.core.management.base import CommandError

from ingest import sessionlogs
from ingest.ingestion import MAX_FILE_MESSAGES, IngestReport, TranscriptError, ingest
from memoryui.models import ConflictError, Transcript
from memoryui.models.transcripts import NAMED_MAX


def read_text(path: str, stdin=None) -> str:
    """The file's text (`-`: standard input), or a CommandError saying why not."""
    try:
        if path == "-":
            return (stdin or sys.stdin).read()
        with open(path, encoding="utf-8-sig") as stream:
            return stream.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def read_session(
    path: str, stdin=None, *, format: str | None = None, scope: str | None = None, external_id: str | None = None
) -> tuple[sessionlogs.Session, dict]:
    """The session log in `path` (its format detected when not given) as transcript JSON, with the
    scope and id given here in place of the file's; a CommandError when it cannot be read."""
    filename = "" if path == "-" else path
    try:
        session = sessionlogs.read(read_text(path, stdin), format, filename=filename)
    except sessionlogs.SessionLogError as exc:
        what = f"a {format} session log" if format else "JSON (nor a session log memoryui reads)"
        raise CommandError(f"{path} is not {what}: {exc}") from None
    data = session.transcript
    if isinstance(data, dict):
        data = dict(data)
        if scope:
            data["scope"] = scope
        if external_id:
            data["id"] = external_id
        if not data.get("scope") and session.format != "memoryui":  # memoryui's rules name its own
            raise CommandError(f"a {session.format} file names no scope: give --scope (e.g. agent:main)")
    return session, data


def store_transcript(data: dict) -> IngestReport:
    """Store the transcript read from a file (whole, up to MAX_FILE_MESSAGES messages), or a
    CommandError naming every problem (nothing is stored then)."""
    try:
        return ingest(data, max_messages=MAX_FILE_MESSAGES)
    except TranscriptError as exc:
        details = "; ".join(f"{name}: {', '.join(reasons)}" for name, reasons in exc.errors.items())
        raise CommandError(f"transcript not stored: {details}") from None
    except ConflictError as exc:
        raise CommandError(f"transcript not stored: {exc}") from None


def stored_transcript(ref: str, scope: str | None) -> Transcript:
    """The stored transcript `ref` names: memoryui's id for it, or the id the agent posted it with
    (`scope`, normalized, picks one when several scopes use that id); a CommandError otherwise."""
    named = Transcript.objects.filter(scope=scope) if scope else Transcript.objects.all()
    found = named.named(ref)
    if not found:
        raise CommandError(f"no transcript {ref}" + (f" in {scope}" if scope else ""))
    if len(found) > 1:
        scopes = ", ".join(t.scope for t in found[:NAMED_MAX])
        raise CommandError(f"{ref} names transcripts in several scopes ({scopes}): add --scope")
    return found[0]
