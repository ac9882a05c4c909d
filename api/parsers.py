"""Request parsers of the REST API."""

from __future__ import annotations

import codecs

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, parsers

from memoryui import jsontext, untrusted

# A body with thousands of bad strings is answered with the first of them, not a list as long.
PROBLEMS_SHOWN = 20
PATH_MAX_CHARS = 200
BODY = "body"
DECODER_DEPTH = 1000  # Python's default recursion limit: its JSON decoder gave up past about this


class UnstorableBody(exceptions.ParseError):
    """A body that parsed as JSON but holds what cannot be stored: 400 `invalid` with `details`
    naming each place (api.rest.exception_handler answers it)."""

    def __init__(self, message: str, details: dict[str, list[str]]):
        super().__init__(message)
        self.message = message
        self.details = details


def field_path(json_path: str) -> str:
    """A JSON path of `untrusted.json_problems` as the API's error details name it: relative to
    the body (`$.metadata.k` is `metadata.k`, `$.messages[0].content` is `messages[0].content`),
    and the body itself is `body`."""
    path = json_path.removeprefix("$").removeprefix(".") or BODY
    return path if len(path) <= PATH_MAX_CHARS else path[: PATH_MAX_CHARS - 1] + "…"


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, reading the body with memoryui.jsontext (the reader of every JSON text
    memoryui did not write) and refusing at the boundary what no endpoint can store
    (`memoryui.untrusted`).

    A body whose strings (values or keys, at any depth) hold a lone UTF-16 surrogate ("\\udfff" is
    valid JSON) or a NUL, or that is nested more than MAX_JSON_DEPTH levels, is a 400 before any
    view reads it: nothing is written, whichever endpoint it was for. The error details are keyed
    by the place in the body, written as the field it names: `text`, `metadata.k`,
    `messages[2].tool_calls[0].name`; `body` is the body as a whole: one nested deeper than
    Python's own decoder reads (DECODER_DEPTH levels), which no client builds by mistake, is
    refused as that, as it always was. Each names its reason; the message repeats the first one.
    NaN, Infinity and numbers past a float's range are a parse error, as text that is not JSON.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        charset = parsers.get_encoding(parser_context or {})  # a text codec: never bz2_codec and the like
        raw = read_limited(stream)
        try:
            text = raw.decode(charset)
        except UnicodeDecodeError as exc:
            reason = f"is not {charset} text (byte {exc.start})"
            raise UnstorableBody(f"Invalid input: the {BODY} {reason}.", {BODY: [reason]}) from None
        try:
            data = jsontext.loads(text)
        except jsontext.JSONTextError as exc:
            if exc.code == jsontext.TOO_DEEP:
                where = field_path(exc.path) if exc.path and (exc.depth or 0) <= DECODER_DEPTH else BODY
                raise UnstorableBody(f"Invalid input: {_named(where)} {exc.reason}.", {where: [exc.reason]}) from None
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        details: dict[str, list[str]] = {}
        for where, reason in untrusted.json_problems(data):
            if len(details) >= PROBLEMS_SHOWN:
                break
            details.setdefault(field_path(where), []).append(reason)
        if details:
            first, reasons = next(iter(details.items()))
            more = f" ({len(details) - 1} more places in details)" if len(details) > 1 else ""
            raise UnstorableBody(f"Invalid input: {first} {reasons[0]}{more}.", details)
        return data


def _named(where: str) -> str:
    return f"the {BODY}" if where == BODY else where


def read_limited(stream) -> bytes:
    """The body's bytes; RequestDataTooBig (a 413) past DATA_UPLOAD_MAX_MEMORY_SIZE. DRF checks it
    for its own form parsers only: so here, for every parser of ours."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    raw = b"" if stream is None else stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(raw) > limit:
        raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
    return raw


class SessionLogParser(parsers.BaseParser):
    """A body taken as the text it is: an agent's session log posted as it was written
    (`POST /api/transcripts/?as=…`). Claude Code's JSONL is one JSON document a line, not one
    document, so no JSON parser can read it; the session-log readers (ingest.sessionlogs)
    parse it, line by line, and name the line that is broken."""

    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None) -> str:
        raw = read_limited(stream)
        charset = parsers.get_encoding(parser_context or {})  # a text codec: never bz2_codec and the like
        try:
            return raw.decode("utf-8-sig" if codecs.lookup(charset).name == "utf-8" else charset)
        except UnicodeDecodeError as exc:
            reason = f"is not {charset} text (byte {exc.start})"
            raise UnstorableBody(f"Invalid input: the {BODY} {reason}.", {BODY: [reason]}) from None


class JSONLinesParser(SessionLogParser):
    media_type = "application/jsonl"


class PlainTextParser(SessionLogParser):
    media_type = "text/plain"
