"""stdio for `manage.py mcp`: the SDK's transport, with an answer to every line that is no message.

The SDK's stdio transport reads a line it cannot decode and drops it, so a client that sent a
request in it waits for an answer for ever. JSON-RPC answers such a line: -32700 (parse error)
when it is not JSON, -32600 (invalid request) when it is JSON but not a JSON-RPC message, with the
request's id when the line has one (the client waits on it), else null. The next line is served
as usual; a blank line carries nothing to answer.

A server started with a token counts each request against the token's rate limits, on the same
counts as the API and `/mcp/` (mcpserver.limits): a refused one is answered -32029 here and never
reaches the server. Without a token the server is its local user, and nothing is counted.
"""

from __future__ import annotations

from typing import Any

import anyio
from asgiref.sync import sync_to_async
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest
from pydantic import ValidationError

from mcpserver import limits
from mcpserver.server import caller, server

REQUEST = "JSONRPCRequest"  # the member of the SDK's message union whose errors say what a request lacks


async def serve() -> None:
    """Serve the MCP server over this process's stdin and stdout until stdin closes."""
    lowlevel = server._lowlevel_server  # the SDK's MCPServer runs its low-level server the same way
    async with stdio_server() as (read_stream, write_stream):
        lines = AnsweringUnreadableLines(read_stream, write_stream)
        await lowlevel.run(lines, write_stream, lowlevel.create_initialization_options())


class AnsweringUnreadableLines:
    """The transport's read stream, minus the lines it could not decode and the requests past the
    token's rate limits, each answered instead."""

    def __init__(self, messages: Any, answers: Any):
        self._messages = messages
        self._answers = answers

    @property
    def last_context(self) -> Any:
        # The server runs each request in its sender's context (the transport's): pass it through.
        return getattr(self._messages, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._messages.receive()
            if isinstance(item, Exception):
                answer = unreadable_line_answer(item)
            else:
                answer = await _refusal(item.message)
                if answer is None:
                    return item
            if answer is not None:
                await self._answers.send(SessionMessage(answer))

    def __aiter__(self) -> AnsweringUnreadableLines:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._messages.aclose()

    async def __aenter__(self) -> AnsweringUnreadableLines:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _refusal(message: Any) -> JSONRPCError | None:
    """The -32029 answering a request past the token's limits; None when it may be served (any
    message of a server without a token, any notification or response)."""
    who = caller.get()
    if who.token is None or not isinstance(message, JSONRPCRequest):
        return None
    sent = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    # In Django's thread, as the tools run: the cache may be the database's, which async code may not touch.
    refused = await sync_to_async(limits.refusal, thread_sensitive=True)(who, sent)
    if refused is None:
        return None
    return JSONRPCError(jsonrpc="2.0", id=message.id, error=ErrorData(**refused))


def unreadable_line_answer(error: Exception) -> JSONRPCError | None:
    """The JSON-RPC error answering a line the transport could not decode (None for a blank line)."""
    if not isinstance(error, ValidationError):
        return _error(None, INVALID_REQUEST, "Invalid request: the line could not be read.")
    problems = error.errors(include_url=False)
    if problems and problems[0]["type"] == "json_invalid":
        if not str(problems[0].get("input", "")).strip():
            return None
        why = problems[0].get("ctx", {}).get("error", "invalid JSON")
        return _error(None, PARSE_ERROR, f"Parse error: the line is not JSON ({why}).")
    if all(len(problem["loc"]) <= 1 for problem in problems):  # refused whole, never looked into
        return _error(None, INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object.")
    wrong = [
        f"{'.'.join(str(part) for part in problem['loc'][1:])}: {problem['msg']}"
        for problem in problems
        if problem["loc"][:1] == (REQUEST,)
    ]
    reason = "; ".join(wrong) or "not a JSON-RPC 2.0 request, notification or response"
    return _error(_request_id(problems), INVALID_REQUEST, f"Invalid request: {reason}.")


def _request_id(problems: list) -> str | int | None:
    """The id of the object the line held, when it has a usable one: pydantic quotes the whole object
    with each field it lacks (a request lacks a response's `result`)."""
    for problem in problems:
        if problem["type"] == "missing" and isinstance(problem.get("input"), dict):
            request_id = problem["input"].get("id")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                return request_id
    return None


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
