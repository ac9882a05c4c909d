"""The API against its own schema: schemathesis generates requests from /api/schema/ (a fixed
seed, a bounded number of examples per operation), positive and negative, and sends them with
a token to the real gunicorn serving memoryui (the Procfile's worker class, so its own 414 is
JSON too). Every check is on: no 5xx, every status documented, every answer as the schema
describes it, and every request the schema allows accepted and every one it forbids refused.
The one setting that differs from schemathesis' defaults is in schemathesis.toml beside this file.

The MCP endpoint too: a schema of its JSON-RPC bodies (`mcp_schema`: each method a client sends,
each tool's call with the arguments its own input schema names, as the server lists them) drives
schemathesis at `/mcp/`, a few hundred requests: no 5xx, and every answer JSON as the schema says
(a JSON-RPC response, or an error in the API's shape or JSON-RPC's). The same server reads bodies
sent in chunks, on the API and at /mcp/ alike, and answers its own refusals as JSON.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from config.server import ChunkedBodies

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).with_name("schemathesis.toml")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database(env: dict) -> str | None:
    """A database of the test's own on the PostgreSQL of DATABASE_URL, or None on SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return None
    name = f"memoryui_fuzz_{uuid.uuid4().hex[:8]}"
    subprocess.run(_psql(url, f'CREATE DATABASE "{name}"'), check=True, capture_output=True)
    parts = urlsplit(url)
    env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    return name


def _psql(url: str, sql: str) -> list[str]:
    parts = urlsplit(url)
    return ["psql", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432), "-U",
            parts.username or "postgres", "-d", "postgres", "-c", sql]  # fmt: skip


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers (401 without a token)
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)


@dataclass
class Served:
    """memoryui under gunicorn on a store of its own: its address, and tokens of the fuzzing superuser."""

    base: str
    token: str  # every scope
    mcp_token: str  # agent:main only, so /mcp/ needs no ?scope=
    dir: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("fuzz")
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        MEMORYUI_DATA_DIR=str(tmp_path / "data"),
        CELERY_TASK_DEFAULT_QUEUE=f"memoryui-fuzz-{uuid.uuid4().hex[:8]}",
        # The fuzzer sends a few thousand requests in a minute: the throttles are tested elsewhere.
        MEMORYUI_API_RATE="1000000/min",
        MEMORYUI_API_EXPENSIVE_RATE="1000000/min",
    )
    database = _database(env)
    port = _free_port()
    server = None
    try:
        _manage(env, "migrate", "-v0")
        _manage(env, "seed_demo", "--json")
        _manage(env, "shell", "-c", "from django.contrib.auth import get_user_model as m; "
                "m().objects.create_superuser('fuzz', 'fuzz@example.com', 'fuzz-password-1')")  # fmt: skip
        token = json.loads(_manage(env, "api_token", "create", "fuzz", "--user", "fuzz", "--json"))["key"]
        mcp_token = json.loads(
            _manage(env, "api_token", "create", "fuzz mcp", "--user", "fuzz", "--scope", "agent:main", "--json")
        )["key"]
        # The server's log goes to a file: a pipe nobody reads would fill up and block it.
        log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed with the server below
        server = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi", "--worker-class", "config.server.ThreadWorker",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4", "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/", server, tmp_path / "server.log")
        yield Served(base, token, mcp_token, tmp_path)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
            log.close()
        if database:
            subprocess.run(_psql(os.environ["DATABASE_URL"], f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'),
                           capture_output=True)  # fmt: skip
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def _schemathesis(served: Served, location: str, token: str, *args: str) -> str:
    """Run schemathesis against the server; what it printed (the test fails, with it, when it fails)."""
    run = subprocess.run(
        [str(BIN / "schemathesis"), "--config-file", str(CONFIG), "run", location,
         "-H", f"Authorization: Bearer {token}", "--seed", "7", "--phases", "examples,coverage,fuzzing",
         "--no-color", *args],
        cwd=served.dir, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-8000:]
    return output


def test_the_api_answers_every_generated_request_as_its_schema_says(served):
    output = _schemathesis(
        served, f"{served.base}/api/schema/", served.token, "--checks", "all", "--max-examples", "20"
    )

    tested = re.search(r"Tested: (\d+)", output)
    assert tested and int(tested.group(1)) >= 40, output[-3000:]  # every operation of the API


# --- /mcp/ ----------------------------------------------------------------------------------------

JSON_RPC_ID = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
API_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}},
            "required": ["code", "message", "details"],
        }
    },
    "required": ["error"],
}
JSON_RPC_ERROR = {
    "type": "object",
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"anyOf": [*JSON_RPC_ID["anyOf"], {"type": "null"}]},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    "required": ["jsonrpc", "id", "error"],
}
JSON_RPC_RESULT = {
    "type": "object",
    "properties": {"jsonrpc": {"const": "2.0"}, "id": JSON_RPC_ID, "result": {"type": "object"}},
    "required": ["jsonrpc", "id", "result"],
}


def _rpc(served: Served, method: str) -> dict:
    connection = http.client.HTTPConnection(*urlsplit(served.base).netloc.split(":"), timeout=60)
    headers = {"Authorization": f"Bearer {served.mcp_token}", "Content-Type": "application/json",
               "Accept": "application/json"}  # fmt: skip
    connection.request("POST", "/mcp/", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}), headers)
    answer = json.loads(connection.getresponse().read())
    connection.close()
    return answer["result"]


def _request(method: str, params: dict | None = None, *, params_required: bool = False) -> dict:
    properties = {"jsonrpc": {"const": "2.0"}, "id": JSON_RPC_ID, "method": {"const": method}}
    if params is not None:
        properties["params"] = {"type": "object", "additionalProperties": False, **params}
    required = ["jsonrpc", "id", "method", *(["params"] if params_required else [])]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def mcp_schema(served: Served) -> dict:
    """An OpenAPI document of POST /mcp/: the JSON-RPC messages a client sends, each tool's call with
    the arguments of its input schema and each prompt's with its arguments, as the server lists them."""
    tools = _rpc(served, "tools/list")["tools"]
    prompts = _rpc(served, "prompts/list")["prompts"]
    page = {"properties": {"cursor": {"type": "string"}}}
    messages = [
        _request("ping"),
        _request(
            "initialize",
            {
                "properties": {
                    "protocolVersion": {"enum": ["2025-11-25", "2025-06-18", "2025-03-26"]},
                    "capabilities": {"type": "object"},
                    "clientInfo": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
                        "required": ["name", "version"],
                    },
                },
                "required": ["protocolVersion", "capabilities", "clientInfo"],
            },
            params_required=True,
        ),
        *(_request(f"{listed}/list", page) for listed in ("tools", "resources", "resources/templates", "prompts")),
        _request(
            "resources/read",
            {
                "properties": {
                    "uri": {
                        "anyOf": [{"const": "memoryui://stats"}, {"type": "string", "pattern": "^memoryui://memories/"}]
                    }
                },
                "required": ["uri"],
            },
            params_required=True,
        ),
        *(
            _request(
                "tools/call",
                {
                    "properties": {"name": {"const": tool["name"]}, "arguments": tool["inputSchema"]},
                    "required": ["name", "arguments"],
                },
                params_required=True,
            )
            for tool in tools
        ),
        *(
            _request(
                "prompts/get",
                {
                    "properties": {
                        "name": {"const": prompt["name"]},
                        "arguments": {
                            "type": "object",
                            "properties": {
                                argument["name"]: {"type": "string"} for argument in prompt.get("arguments", [])
                            },
                            "required": [a["name"] for a in prompt.get("arguments", []) if a.get("required")],
                            "additionalProperties": False,
                        },
                    },
                    "required": ["name"],
                },
                params_required=True,
            )
            for prompt in prompts
        ),
        {
            "type": "object",
            "properties": {"jsonrpc": {"const": "2.0"}, "method": {"const": "notifications/initialized"}},
            "required": ["jsonrpc", "method"],
            "additionalProperties": False,
        },
    ]
    json_answer = lambda schema: {"description": "JSON", "content": {"application/json": {"schema": schema}}}  # noqa: E731
    return {
        "openapi": "3.1.0",
        "info": {"title": "memoryui MCP (streamable HTTP, stateless, JSON answers)", "version": "1"},
        "paths": {
            "/mcp/": {
                "post": {
                    "operationId": "mcp",
                    "parameters": [
                        {"name": "scope", "in": "query", "required": False, "schema": {"enum": ["agent:main", "main"]}},
                        {
                            "name": "Accept",
                            "in": "header",
                            "required": True,
                            "schema": {"enum": ["application/json, text/event-stream", "application/json"]},
                        },
                    ],  # fmt: skip
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"oneOf": messages}}}},
                    "responses": {
                        "200": json_answer({"anyOf": [JSON_RPC_RESULT, JSON_RPC_ERROR]}),
                        "202": {"description": "a notification, accepted: no body"},
                        "4XX": json_answer({"anyOf": [API_ERROR, JSON_RPC_ERROR]}),
                    },
                }
            }
        },
    }


def test_the_mcp_endpoint_answers_every_generated_message_with_json(served):
    schema = served.dir / "mcp-schema.json"
    schema.write_text(json.dumps(mcp_schema(served), indent=1))

    output = _schemathesis(
        served, str(schema), served.mcp_token, "--url", served.base, "--max-examples", "150",
        "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
    )  # fmt: skip

    cases = re.search(r"(\d+) generated", output)
    assert cases and 150 <= int(cases.group(1)) <= 1000, output[-3000:]  # a few hundred requests


# --- what the web server itself answers ------------------------------------------------------------


def _post_chunked(served: Served, path: str, body: bytes, token: str) -> tuple[int, str, dict]:
    """POST `body` with `Transfer-Encoding: chunked` (no Content-Length); the status, type and JSON answer."""
    connection = http.client.HTTPConnection(*urlsplit(served.base).netloc.split(":"), timeout=120)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json",
               "Transfer-Encoding": "chunked"}  # fmt: skip
    chunks = (body[start : start + 65536] for start in range(0, len(body), 65536))
    connection.request("POST", path, body=chunks, headers=headers, encode_chunked=True)
    response = connection.getresponse()
    answer = (response.status, response.getheader("Content-Type"), json.loads(response.read()))
    connection.close()
    return answer


def test_a_body_sent_in_chunks_is_read_on_the_api_and_at_mcp(served):
    memory = json.dumps({"scope": "agent:main", "kind": "note", "text": "Sent in chunks, read whole."}).encode()
    ping = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode()
    remember = {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"text": "The user sends bodies in chunks."}}}  # fmt: skip

    status, content_type, created = _post_chunked(served, "/api/memories/", memory, served.token)
    assert (status, content_type, created["text"]) == (201, "application/json", "Sent in chunks, read whole.")
    assert _post_chunked(served, "/mcp/", ping, served.mcp_token)[::2] == (
        200,
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    )
    status, _, called = _post_chunked(served, "/mcp/", json.dumps(remember).encode(), served.mcp_token)
    assert (
        status == 200
        and json.loads(called["result"]["content"][0]["text"])["text"] == remember["params"]["arguments"]["text"]
    )


def test_a_chunked_body_over_the_limit_is_the_same_413_as_any_other(served):
    padding = b" " * (10 * 1024 * 1024)  # with the message: just over DATA_UPLOAD_MAX_MEMORY_SIZE (10 MiB)
    for path, token in (("/api/memories/", served.token), ("/mcp/", served.mcp_token)):
        status, content_type, refused = _post_chunked(served, path, b'{"jsonrpc": "2.0"}' + padding, token)
        assert (status, content_type, refused["error"]["code"]) == (413, "application/json", "too_large"), path
        assert refused["error"]["details"] == {"body": ["is larger than 10485760 bytes"]}


def test_a_server_that_cannot_decode_chunks_answers_411_in_the_apis_shape():
    """What memoryui's WSGI application does under a server that leaves chunks undecoded (Django's
    runserver): it cannot know where the body ends, and says so, never reading it as empty."""
    reached, started = [], []
    wrapped = ChunkedBodies(lambda environ, start_response: reached.append(environ), limit=100)
    environ = {"REQUEST_METHOD": "POST", "HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": None}

    body = json.loads(b"".join(wrapped(environ, lambda status, headers: started.append((status, dict(headers))))))

    assert not reached
    assert started[0][0] == "411 Length Required" and started[0][1]["Content-Type"] == "application/json"
    assert body["error"]["code"] == "length_required" and "Content-Length" in body["error"]["message"]


def test_the_web_servers_own_refusals_are_json_too(served):
    """gunicorn answers a request line or headers over its limits before Django sees them: with
    memoryui's worker class, in the API's error shape (414, 431), never an HTML page."""
    answers = {}
    for name, request in {
        "long line": urllib.request.Request(f"{served.base}/api/memories/?q={'a' * 5000}"),
        "big headers": urllib.request.Request(f"{served.base}/api/memories/", headers={"X-Big": "b" * 9000}),
    }.items():
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        answers[name] = (refused.value.code, refused.value.headers["Content-Type"], json.load(refused.value))
    code, content_type, body = answers["long line"]
    assert (code, content_type, body["error"]["code"]) == (414, "application/json", "uri_too_long")
    assert body["error"]["details"]["limit_bytes"] == 4094
    code, content_type, body = answers["big headers"]
    assert (code, content_type, body["error"]["code"]) == (431, "application/json", "headers_too_large")
