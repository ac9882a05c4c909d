"""Streamable HTTP at /mcp/ in the live app, with the mcp SDK's client and the API's Bearer tokens.

Who is who: reader is bob's read token for agent:main only (bob is a viewer); the agent token
(alice's) may write everywhere.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import httpx2
import pytest
from django import test as django_test
from django.db import connection
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcpserver import http as mcp_http
from memoryui.models import ApiToken, Memory, MemoryEvent
from tests.mcpserver.support import run_client

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def reader(bob) -> str:
    _, raw = ApiToken.issue(user=bob, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    return raw


@pytest.fixture
def memories(indexes, write) -> dict[str, Memory]:
    return {
        "mine": write("The staging cluster runs on k3s with three nodes.", kind="fact"),
        "other": write("The other agent's deploy key is in vault under ops/other.", kind="fact", scope="agent:other"),
    }


def session(url: str, token: str, work):
    """Run `work(client)` in an MCP session over streamable HTTP with this token; its answer."""
    answer: dict = {}

    async def run():
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            answer["value"] = await work(client)

    run_client(run)
    return answer["value"]


async def refused(client: Client, name: str, arguments: dict) -> MCPError:
    try:
        await client.call_tool(name, arguments)
    except MCPError as exc:
        return exc
    raise AssertionError(f"{name} was not refused")


def test_a_scoped_read_token_reads_its_scope_and_may_not_write(live_server, memories, reader):
    other = str(memories["other"].pk)

    async def work(client: Client) -> dict:
        found = await client.call_tool("search_memory", {"query": "how many nodes does staging have"})
        exact = await client.call_tool("search_memory", {"query": "ops/other"})
        return {
            "tools": [tool.name for tool in (await client.list_tools()).tools],
            "found": json.loads(found.content[0].text),
            "exact": json.loads(exact.content[0].text),
            "remember": await refused(client, "remember", {"text": "The user likes tea."}),
            "other": await refused(client, "get_memory", {"id": other}),
            "tombstone": await refused(client, "tombstone", {"id": other, "reason": "not mine"}),
        }

    seen = session(f"{live_server.url}/mcp/", reader, work)
    assert "remember" in seen["tools"]
    assert [item["id"] for item in seen["found"]["results"]] == [str(memories["mine"].pk)]
    assert seen["exact"]["results"] == []
    remember = seen["remember"]
    assert (remember.code, remember.data["code"], remember.data["status"]) == (-32003, "forbidden", 403)
    # The API's own refusal of a viewer's token (bob's role, not only his token's access, forbids it).
    assert remember.message == "This needs the editor role; this token's owner is a viewer."
    assert remember.data["details"] == {"role": ["This needs the editor role; this token's owner is a viewer."]}
    assert (seen["other"].code, seen["other"].data["code"]) == (-32004, "not_found")
    assert seen["tombstone"].data["code"] == "forbidden"
    assert Memory.objects.filter(text__icontains="tea").count() == 0
    assert Memory.objects.get(pk=other).status == "active"


def test_a_write_token_remembers_and_its_name_is_in_the_history(live_server, memories, agent_token):
    async def work(client: Client) -> dict:
        result = await client.call_tool("remember", {"text": "The on-call rotation changes on Mondays."})
        bogus = await client.call_tool("remember", {"text": "Anything at all.", "kind": "bogus"})
        return {"written": json.loads(result.content[0].text), "bogus": bogus}

    seen = session(f"{live_server.url}/mcp/?scope=agent:main", agent_token, work)
    written = seen["written"]
    assert written["scope"] == "agent:main" and written["kind"] == "remember"
    assert seen["bogus"].is_error is True  # as over stdio: the reason is the model's to read
    assert seen["bogus"].content[0].text.startswith("Invalid input: kind.\nkind: 'bogus' is not one of: entity,")
    assert MemoryEvent.objects.get(memory_id=written["id"], action="created").actor == "token:agent"


def test_refusals_before_the_session_are_the_apis_json_errors(live_server, memories, reader, agent_token):
    url = f"{live_server.url}/mcp/"
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    anonymous = httpx.post(url, json=hello)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"
    assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="mcp"'  # no credentials: no error code (RFC 6750)
    revoked = httpx.post(url, json=hello, headers={"Authorization": "Bearer mui_not-a-token"})
    assert revoked.status_code == 401
    assert revoked.headers["WWW-Authenticate"].startswith('Bearer realm="mcp", error="invalid_token"')
    malformed = httpx.post(url, json=hello, headers={"Authorization": "Bearer two words"})
    assert malformed.headers["WWW-Authenticate"] == 'Bearer realm="mcp", error="invalid_request"'
    outside = httpx.post(f"{url}?scope=agent:other", json=hello, headers={"Authorization": f"Bearer {reader}"})
    assert outside.status_code == 403 and outside.json()["error"]["details"]["scope"]
    unscoped = httpx.post(url, json=hello, headers={"Authorization": f"Bearer {agent_token}"})
    assert unscoped.status_code == 400 and "scope" in unscoped.json()["error"]["details"]
    stream = httpx.get(url, headers={"Authorization": f"Bearer {reader}"})
    assert stream.status_code == 405 and stream.headers["Allow"] == "POST"


def test_every_refusal_at_mcp_is_json_in_the_apis_shape(live_server, reader):
    url = f"{live_server.url}/mcp/"
    headers = {"Authorization": f"Bearer {reader}", "Accept": "application/json", "Content-Type": "application/json"}

    def post(body: bytes | str, query: str = "", **changed) -> httpx.Response:
        return httpx.post(url + query, content=body, headers={**headers, **changed}, timeout=120)

    def ping(padding: int) -> bytes:  # a ping of about `padding` bytes, in its _meta
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"pad": "x" * padding}}})

    too_large = post(ping(11 * 1024 * 1024))  # over DATA_UPLOAD_MAX_MEMORY_SIZE, the API's 10 MiB
    between = post(ping(5 * 1024 * 1024))  # over the SDK's own default (4 MiB), under the documented limit
    text = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), **{"Content-Type": "text/plain"})
    nul = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), "?scope=agent:main%00")
    deep = post("[" * 100_000 + "]" * 100_000)  # deeper than any parser recurses

    assert (too_large.status_code, too_large.headers["Content-Type"]) == (413, "application/json")
    assert too_large.json()["error"]["code"] == "too_large"
    assert too_large.json()["error"]["details"] == {"body": ["is larger than 10485760 bytes"]}
    assert (between.status_code, between.json()) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    assert (text.status_code, text.headers["Content-Type"]) == (415, "application/json")
    assert text.json()["error"] == {
        "code": "unsupported_media_type",
        "message": "A JSON-RPC message is JSON: send it with 'Content-Type: application/json'.",
        "details": {"content_type": ["text/plain is not application/json"]},
    }
    assert (nul.status_code, nul.headers["Content-Type"]) == (400, "application/json")
    assert nul.json()["error"]["code"] == "invalid" and "scope" in nul.json()["error"]["details"]
    assert (deep.status_code, deep.json()["error"]["code"]) == (400, -32700)  # JSON-RPC's parse error


def test_an_sdk_answer_in_plain_text_or_a_crash_still_answers_json(monkeypatch, reader):
    """What the SDK answers as text (its 413, its Content-Type check: both pre-empted by the view)
    and anything that breaks in the view come out in the API's shape, never HTML."""
    client = django_test.Client(
        raise_request_exception=False, headers={"Authorization": f"Bearer {reader}", "Accept": "application/json"}
    )
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})

    async def sdk_in_text(*args):
        return 413, [("content-type", "text/plain; charset=utf-8")], b"Request body too large"

    def post():
        # In a thread of its own, as a web server's worker thread: the view bridges to the SDK's
        # async code, which refuses a thread with an event loop running (the browser tests' sync
        # Playwright keeps one in the main thread).
        def in_thread():
            try:
                return client.post("/mcp/", hello, content_type="application/json")
            finally:
                connection.close()

        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(in_thread).result()

    monkeypatch.setattr(mcp_http, "_serve", sdk_in_text)
    plain = post()

    def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(mcp_http.limits, "refusal", broken)
    crashed = post()

    assert (plain.status_code, plain["Content-Type"]) == (413, "application/json")
    assert plain.json()["error"] == {"code": "too_large", "message": "Request body too large", "details": {}}
    assert (crashed.status_code, crashed["Content-Type"]) == (500, "application/json")
    assert crashed.json()["error"]["code"] == "server_error"
