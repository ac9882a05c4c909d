"""Streamable HTTP at `/mcp/`: the MCP server inside the running app, behind the API's Bearer tokens.

The app is served by WSGI workers (gunicorn threads), several processes at once, so the SDK's
streamable HTTP transport runs *stateless* with JSON answers: each POST is one JSON-RPC exchange
answered in full, and any worker can answer any request, with no session to keep between them.
The view authenticates the token and settles the connection's scope the way the API does, reads
the body (at most DATA_UPLOAD_MAX_MEMORY_SIZE, the API's limit; the SDK is given the same one),
refuses a body that is not JSON, counts the call against the token's rate limits (mcpserver.limits),
then hands the request to the SDK as an ASGI request. Every answer is JSON: a refusal before the
SDK is the API's error shape (429 excepted: a JSON-RPC error, which an MCP client reads as one),
the SDK's answers are JSON-RPC, and an SDK answer in plain text is put in the API's shape.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

import anyio
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from api.rest import too_large_body
from mcpserver import limits, tools
from mcpserver.server import caller, server
from memoryui import jsontext
from memoryui.errors import error_body
from memoryui.models import ApiToken

logger = logging.getLogger(__name__)

REALM = 'Bearer realm="mcp"'
JSON = "application/json"


@csrf_exempt
def endpoint(request: HttpRequest) -> HttpResponse:
    try:
        return _exchange(request)
    except Exception as exc:
        # Django's 500 page is HTML: tell its listeners (logging, the test client) and answer JSON.
        signals.got_request_exception.send(sender=None, request=request)
        logger.error("unhandled MCP endpoint error", exc_info=exc)
        return JsonResponse(error_body(500, "Internal server error."), status=500)


def _exchange(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        # Stateless: no session to resume or delete, and no stream for the server to speak first on.
        message = "This MCP endpoint is stateless: send each JSON-RPC message in a POST."
        response = JsonResponse(error_body(405, message, {"method": [request.method]}), status=405)
        response["Allow"] = "POST"
        return response
    token, refusal = _token(request)
    if refusal is not None:
        return refusal
    try:
        who = tools.Caller(scope=tools.connection_scope(request.GET.get("scope"), token), token=token)
    except Exception as exc:
        answered = tools.error_of(exc)
        if answered is None:
            raise
        return JsonResponse(answered[1], status=answered[0])
    try:
        body = request.body
    except RequestDataTooBig:
        return JsonResponse(too_large_body(), status=413)
    if request.content_type.lower() != JSON:
        message = "A JSON-RPC message is JSON: send it with 'Content-Type: application/json'."
        given = request.META.get("CONTENT_TYPE") or "none"
        return JsonResponse(error_body(415, message, {"content_type": [f"{given} is not {JSON}"]}), status=415)
    try:
        message = jsontext.loads(body.decode("utf-8"))  # the project's one guarded reader (depth, size)
    except (ValueError, jsontext.JSONTextError):
        message = None  # the SDK answers it (-32700); it counts as a call all the same
    refused = limits.refusal(who, message)
    if refused is not None:
        answer = {"jsonrpc": "2.0", "id": limits.request_id(message), "error": refused}
        response = JsonResponse(answer, status=429)
        response["Retry-After"] = str(refused["data"]["details"]["retry_after"])
        response._has_been_logged = True  # in the summary of refusals instead (api.throttling)
        return response
    status, headers, answer = async_to_sync(_serve)(_asgi_scope(request), body, who)
    headers = {name.lower(): value for name, value in headers}
    if status >= 400 and not headers.get("content-type", "").startswith(JSON):
        # The SDK's own refusals in plain text: the API's shape, with the SDK's words.
        text = answer.decode("utf-8", errors="replace").strip() or HTTPStatus(status).phrase
        return JsonResponse(error_body(status, text), status=status)
    response = HttpResponse(answer, status=status)
    for name, value in headers.items():
        if name not in {"content-length", "connection", "transfer-encoding"}:
            response[name] = value
    return response


def _token(request: HttpRequest) -> tuple[ApiToken | None, HttpResponse | None]:
    header = request.headers.get("Authorization", "").split()
    if not header:
        return None, _unauthorized(
            "Authentication credentials were not provided: send 'Authorization: Bearer <token>'."
        )
    if len(header) != 2 or header[0].lower() not in {"bearer", "token"}:
        return None, _unauthorized("Authorization header must be 'Bearer <token>'.", "invalid_request")
    token = ApiToken.authenticate(header[1])
    if token is None:
        return None, _unauthorized("The token is invalid or revoked.", "invalid_token")
    return token, None


def _unauthorized(message: str, error: str | None = None) -> HttpResponse:
    """401 with the challenge RFC 6750 asks for: an error code when credentials came and were refused,
    none when none came."""
    response = JsonResponse(error_body(401, message), status=401)
    response["WWW-Authenticate"] = f'{REALM}, error="{error}"' if error else REALM
    return response


def _asgi_scope(request: HttpRequest) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode("utf-8"),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (request.get_host().rsplit(":", 1)[0], int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve(scope: dict, body: bytes, who: tools.Caller) -> tuple[int, list[tuple[str, str]], bytes]:
    """One stateless exchange through the SDK's transport; the answer's status, headers and body."""
    caller.set(who)
    answered = anyio.Event()
    start: dict = {}
    chunks: list[bytes] = []
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    # A manager runs once: each request gets its own (cheap: no sessions are kept). The SDK's
    # manager takes the low-level server the MCPServer wraps.
    manager = StreamableHTTPSessionManager(
        app=server._lowlevel_server,
        stateless=True,
        json_response=True,
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,  # the view read no more: the same limit
    )
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in start.get("headers", [])]
    return start.get("status", 500), headers, b"".join(chunks)
