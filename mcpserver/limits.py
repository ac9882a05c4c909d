"""Rate limits over MCP: the API's own per-token limits (api.throttling), on the same counts.

A token's calls count the same whether they come over `/api/`, `/mcp/` or a stdio server started
with that token: every JSON-RPC request against MEMORYUI_API_RATE, and a `tools/call` of `recall`
(the API's `POST /api/recall/`) against MEMORYUI_API_EXPENSIVE_RATE as well. A notification or a
response is not counted: JSON-RPC answers neither, so neither could carry a refusal. Over HTTP a
body that is no message at all is answered (-32700, -32600) and so counted, as the API counts a
refused body. A refused request is answered with the JSON-RPC error -32029 (the API's 429), the
seconds to wait in its message and in `data.details.retry_after`, and is logged in the per-period
summary of refusals, not one line each.

A stdio server run without a token is its local user (who could as well run `manage.py recall`
or open the database): nothing is counted and nothing refused. The transports ask `refusal()`
before they hand a message to the server: `mcpserver.http` for each POST, `mcpserver.stdio` for
each request line.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import Throttled

from api import throttling
from mcpserver import tools
from mcpserver.server import ERROR_CODES
from memoryui.errors import error_body

EXPENSIVE_TOOLS = frozenset({"recall"})  # as `throttle_scope = "expensive"` marks the API's views


def rates_of(message: Any) -> tuple[str, ...]:
    """The limits a message a client sent counts against (the JSON as it was sent)."""
    if isinstance(message, dict):
        if "method" in message and "id" not in message:
            return ()  # a notification
        if "method" not in message and ("result" in message or "error" in message):
            return ()  # a response to a request of the server's
        params = message.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        if message.get("method") == "tools/call" and isinstance(tool, str) and tool in EXPENSIVE_TOOLS:
            return (throttling.API, throttling.EXPENSIVE)
    return (throttling.API,)


def refusal(who: tools.Caller, message: Any) -> dict | None:
    """Count the message against its caller's limits: None when it passes, else the JSON-RPC error
    object answering it (`code`, `message`, `data`), the seconds to wait in `data.details.retry_after`."""
    if who.token is None:
        return None  # a stdio server's local user
    ident = throttling.token_ident(who.token)
    waits = [seconds for scope in rates_of(message) if (seconds := throttling.hit(ident, scope)) is not None]
    if not waits:
        return None
    throttling.refusals.note(ident, "mcp")
    seconds = max(waits)
    error = error_body(429, str(Throttled(seconds).detail), {"retry_after": seconds})["error"]
    return {"code": ERROR_CODES[429], "message": error["message"], "data": {**error, "status": 429}}


def request_id(message: Any) -> str | int | None:
    """The id a refusal answers to: the request's, when it has a usable one."""
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None
