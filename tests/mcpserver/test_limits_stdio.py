"""Rate limits over stdio: a `manage.py mcp` started with a token counts its requests against the
token's limits, on the count every other process of the store shares; one started without a token is
the local user, and nothing is counted.

Who is who: alice is the operator; `agent` is her token. Each server is a real `manage.py mcp`
process on a store of its own, with MEMORYUI_API_RATE=3/minute.
"""

from __future__ import annotations

import json

import pytest

from tests.mcpserver.support import environment, manage
from tests.mcpserver.test_stdio import RawStdio

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    env = environment(tmp_path_factory.mktemp("mcp-limits"))
    env.update(MEMORYUI_API_RATE="3/minute", MEMORYUI_API_EXPENSIVE_RATE="off", MEMORYUI_TOKEN="")
    manage(env, "migrate", "-v0")
    manage({**env, "DJANGO_SUPERUSER_PASSWORD": "alice-password-1"},
           "createsuperuser", "--noinput", "--username", "alice", "--email", "alice@example.com")  # fmt: skip
    return env


@pytest.fixture(scope="module")
def agent(store) -> str:
    return json.loads(manage(store, "api_token", "create", "agent", "--user", "alice", "--json"))["key"]


def started(env: dict, token: str = "") -> RawStdio:
    """`manage.py mcp --scope agent:main`, with the token (MEMORYUI_TOKEN) or none, past its handshake."""
    server = RawStdio({**env, "MEMORYUI_TOKEN": token})
    assert "result" in server.send(json.dumps(HELLO))
    server.process.stdin.write(INITIALIZED + "\n")  # a notification: not counted
    return server


def pings(server: RawStdio, first: int, count: int) -> list[dict]:
    return [server.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"})) for n in range(first, first + count)]


def test_a_server_with_a_token_refuses_past_its_rate_on_the_count_other_processes_share(store, agent):
    server = started(store, agent)  # initialize: the first call of the minute
    try:
        answers = pings(server, 1, 3)
    finally:
        server.close()

    assert ["result" in answer for answer in answers] == [True, True, False]
    refused = answers[2]
    assert (refused["id"], refused["error"]["code"]) == (3, -32029)
    seconds = refused["error"]["data"]["details"]["retry_after"]
    assert 1 <= seconds <= 60 and f"Expected available in {seconds} seconds" in refused["error"]["message"]
    assert refused["error"]["data"]["code"] == "throttled" and refused["error"]["data"]["status"] == 429

    # Another process with the same token (a second agent, or a web worker) finds the count full.
    again = RawStdio({**store, "MEMORYUI_TOKEN": agent})
    try:
        first = again.send(json.dumps(HELLO))
    finally:
        again.close()
    assert first["error"]["code"] == -32029


def test_a_server_without_a_token_is_the_local_user_and_is_never_refused(store):
    server = started(store)
    try:
        answers = pings(server, 1, 6)
    finally:
        server.close()

    assert all("result" in answer for answer in answers)
