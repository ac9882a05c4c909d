"""A small OpenAI-compatible HTTP server for tests, so the real `openai` client code runs.

    with FakeOpenAIServer(dim=8) as server:
        embedder = OpenAIEmbedder("fake-embed", base_url=server.base_url, api_key="test-key")
        server.mode = "http_500"          # every later request fails this way
        server.script = ["stall", "good"] # or: the next requests, one mode each

Modes (for every route): `good`, `http_500`, `slow_http_500` (the same after
`slow_seconds`: a slow failure), `stall` (wait `stall_seconds` before answering, longer
than any client timeout in the tests), `invalid_json`.
Routes: `POST /v1/embeddings` (deterministic vectors from a hash of each text, see
`fake_embedding`); `POST /v1/chat/completions`, whose assistant message is the next of
`chat_replies` (a string, or a callable given the request body and returning one), else
`chat_reply`. A new route is one `_route_<name>` method plus an entry in `ROUTES`.

`structured_outputs` says which response formats a chat request may ask for, as the three kinds of
OpenAI-compatible servers answer:

- `"json_schema"` (the default, as OpenAI and vLLM): `json_schema` and `json_object`;
- `"json_object"` (as llama-cpp-python's server): `json_object`, with or without a `schema`; a
  `json_schema` request gets an HTTP 500 naming the type;
- `"none"` (a server without structured outputs): any `response_format` gets an HTTP 400 naming it.

Every request's path, headers and JSON body are kept in `requests`.

The server runs on 127.0.0.1, port 0, in a daemon thread; leaving the `with` block wakes
any stalled handler and shuts the server down, so a test can never hang on it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

MODES = ("good", "http_500", "slow_http_500", "stall", "invalid_json")


def fake_embedding(text: str, dim: int) -> np.ndarray:
    """The server's vector for `text`: deterministic, not normalized (clients must normalize)."""
    raw = b""
    counter = 0
    while len(raw) < dim:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    values = np.frombuffer(raw[:dim], dtype=np.uint8).astype(np.float32)
    return (values - 127.5) / 12.75  # spread over about [-10, 10]: far from unit length


class FakeOpenAIServer:
    """Context manager: an OpenAI-compatible server with scripted behaviours."""

    ROUTES = {"/v1/embeddings": "_route_embeddings", "/v1/chat/completions": "_route_chat"}

    def __init__(self, *, dim: int = 8, mode: str = "good", stall_seconds: float = 5.0, slow_seconds: float = 0.5):
        self.dim = dim
        self.mode = mode
        self.script: list[str] = []  # modes for the next requests, consumed first
        self.stall_seconds = stall_seconds
        self.slow_seconds = slow_seconds
        self.chat_replies: list = []  # the next chat answers (str, or callable(body) -> str), consumed first
        self.chat_reply: str = '{"selected": []}'
        self.requests: list[dict] = []  # {"path", "headers" (lower-case names), "body"} of every request
        self.structured_outputs = "json_schema"  # or "json_object", or "none" (see the module)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes on a kept-alive connection: without this,
            # Nagle's algorithm and delayed ACKs hold the body back ~40 ms per answer.
            disable_nagle_algorithm = True

            def do_POST(self):
                server._handle(self)

            def log_message(self, format, *args):  # keep test output clean
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()  # wake stalled handlers first, or shutdown would wait for them
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- request handling --------------------------------------------------------------

    def _next_mode(self) -> str:
        with self._lock:
            mode = self.script.pop(0) if self.script else self.mode
        if mode not in MODES:
            raise ValueError(f"unknown fake server mode {mode!r}")
        return mode

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(
                {"path": handler.path, "headers": {k.lower(): v for k, v in handler.headers.items()}, "body": body}
            )
        route = self.ROUTES.get(handler.path)
        if route is None:
            return self._send(handler, 404, {"error": {"message": f"no route {handler.path}", "type": "not_found"}})
        if body is None:
            return self._send(handler, 400, {"error": {"message": "body is not JSON", "type": "invalid_request"}})
        refusal = self._refusal((body.get("response_format") or {}).get("type"))
        if refusal is not None:
            return self._send(handler, *refusal)
        mode = self._next_mode()
        # A stall answers normally after stall_seconds, unless the test ends first.
        if mode == "stall" and self._stop.wait(self.stall_seconds):
            return  # the test is over: drop the connection without answering
        if mode == "slow_http_500" and self._stop.wait(self.slow_seconds):
            return
        if mode in ("http_500", "slow_http_500"):
            return self._send(handler, 500, {"error": {"message": "fake upstream failure", "type": "server_error"}})
        if mode == "invalid_json":
            return self._send_raw(handler, 200, b'{"object": "list", "data": [')
        return self._send(handler, 200, getattr(self, route)(body))

    def _refusal(self, asked: str | None) -> tuple[int, dict] | None:
        """(status, payload) of a server refusing the response format `asked`, or None."""
        if asked is None or self.structured_outputs == "json_schema":
            return None
        if self.structured_outputs == "json_object" and asked == "json_schema":
            message = f'response_format type must be one of "text" or "json_object", but got: {asked}'
            return 500, {"error": {"code": 500, "message": message, "type": "server_error"}}
        if self.structured_outputs == "none":
            message = f"Invalid parameter: 'response_format' of type '{asked}' is not supported."
            return 400, {"error": {"message": message, "type": "invalid_request_error", "param": "response_format"}}
        return None

    def _route_embeddings(self, body: dict) -> dict:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(str(text), self.dim)
            embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode() if as_base64 else vector.tolist()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(str(text).split()) for text in texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", "fake"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _route_chat(self, body: dict) -> dict:
        with self._lock:
            reply = self.chat_replies.pop(0) if self.chat_replies else self.chat_reply
        content = reply(body) if callable(reply) else reply
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    # --- responses ---------------------------------------------------------------------

    def _send(self, handler: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
        self._send_raw(handler, status, json.dumps(payload).encode())

    def _send_raw(self, handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
