"""The one error shape of every JSON answer: `{"error": {"code", "message", "details"}}`
(docs/architecture.md "Error shape").

Free of Django, so the web server's own answers (config.server) use it before Django is loaded.
"""

from __future__ import annotations

ERROR_CODES = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "throttled",
    431: "headers_too_large",
    500: "server_error",
    503: "backend_unavailable",
}


def error_body(status_code: int, message: str, details: dict | None = None, code: str | None = None) -> dict:
    """The one error shape: {"error": {"code", "message", "details"}}, the code named by the status."""
    return {
        "error": {
            "code": code or ERROR_CODES.get(status_code, "error"),
            "message": message,
            "details": details or {},
        }
    }
