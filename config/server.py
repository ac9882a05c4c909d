"""The gunicorn worker memoryui is served by (Procfile: `--worker-class config.server.ThreadWorker`).

gunicorn answers a request it cannot parse itself, before Django sees it, with an HTML page. For
the two limits a client can reach on purpose (a request line over `limit_request_line`: 414, and
headers over `limit_request_fields`/`limit_request_field_size`: 431), this worker answers with the
API's JSON error shape instead, so a JSON client never gets an HTML page: there is no path yet to
tell a page from the API, and a browser shows the JSON as well. Every other error is gunicorn's.

`ChunkedBodies` (config.wsgi wraps Django in it) hands Django a body sent in chunks, which Django
alone would read as empty.
"""

from __future__ import annotations

import io
import json

from gunicorn import util
from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.workers import gthread

from memoryui.errors import error_body

_LIMITS = {
    LimitRequestLine: (414, "URI Too Long", "The request line is longer than this server accepts."),
    LimitRequestHeaders: (431, "Request Header Fields Too Large", "The request headers are larger than accepted."),
}


def error_response(status: int, reason: str, message: str, details: dict) -> bytes:
    """A complete HTTP/1.1 response carrying the JSON error shape; the connection is closed after it."""
    body = json.dumps(error_body(status, message, details)).encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's threaded worker, answering its own 414 and 431 as JSON."""

    def handle_error(self, req, client, addr, exc):
        limit = next((answer for kind, answer in _LIMITS.items() if isinstance(exc, kind)), None)
        if limit is None:
            return super().handle_error(req, client, addr, exc)
        status, reason, message = limit
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("", -1))[0], exc)
        details = {"reason": str(exc)}
        if status == 414:
            details["limit_bytes"] = self.cfg.limit_request_line
        try:
            util.write_nonblock(client, error_response(status, reason, message, details))
        except OSError:
            self.log.debug("Failed to send error message.")
        return None


class ChunkedBodies:
    """WSGI middleware for request bodies sent `Transfer-Encoding: chunked` (no Content-Length).

    Django reads as many bytes of a body as CONTENT_LENGTH says, so it reads such a body as empty
    (a POST to the API answered "scope, kind, text: is required"). gunicorn decodes the chunks and
    says so (`wsgi.input_terminated`): this reads at most `limit` + 1 bytes of them into memory and
    sets CONTENT_LENGTH, so Django reads the body, and refuses one over the limit (its
    DATA_UPLOAD_MAX_MEMORY_SIZE) with the 413 it answers any body over it. A server that does not
    decode chunks (Django's runserver) leaves the length unknown: a 411 in the API's error shape.
    """

    def __init__(self, app, limit: int | None):
        self.app = app
        self.limit = limit

    def __call__(self, environ, start_response):
        if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return self.app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            message = "This server cannot read a chunked request body: send it with a Content-Length."
            details = {"transfer_encoding": [environ.get("HTTP_TRANSFER_ENCODING", "")]}
            body = json.dumps(error_body(411, message, details, code="length_required")).encode("utf-8")
            headers = [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ]
            start_response("411 Length Required", headers)
            return [body]
        body = environ["wsgi.input"].read(-1 if self.limit is None else self.limit + 1)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)
