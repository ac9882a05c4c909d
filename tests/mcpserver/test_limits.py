"""Rate limits over MCP at /mcp/: a token's calls count against the API's own limits, on the same counts.

Rates are tiny here (MEMORYUI_API_RATE, MEMORYUI_API_EXPENSIVE_RATE through `settings`); the counts
live in the default cache, emptied around each test (tests/conftest.py). Who is who: the agent token
is alice's and sees every scope; `reader` is bob's read token for agent:main.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from mcp.client import Client as McpClient
from mcp.shared.exceptions import MCPError

from mcpserver import limits
from memoryui.models import ApiToken
from tests.mcpserver.test_http import session

pytestmark = pytest.mark.django_db

HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(autouse=True)
def _tiny_rates(settings):
    settings.MEMORYUI_API_RATE = "3/minute"
    settings.MEMORYUI_API_EXPENSIVE_RATE = "2/minute"


@pytest.fixture
def reader(bob) -> str:
    _, raw = ApiToken.issue(user=bob, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    return raw


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}", **HEADERS})


def rpc(client: Client, method: str, params: dict | None = None, request_id: int | None = 1):
    message = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
    if request_id is not None:
        message["id"] = request_id
    return client.post("/mcp/?scope=agent:main", json.dumps(message), content_type="application/json")


def tool(client: Client, name: str, arguments: dict, request_id: int = 1):
    return rpc(client, "tools/call", {"name": name, "arguments": arguments}, request_id)


def test_mcp_calls_count_against_the_apis_rate_on_the_same_count(agent_token):
    agent = bearer(agent_token)
    assert agent.get("/api/memories/").status_code == 200
    assert agent.get("/api/stats/").status_code == 200
    assert rpc(agent, "ping").status_code == 200  # the third call of the minute, whichever the door

    refused = rpc(agent, "tools/list", request_id=7)

    assert refused.status_code == 429 and refused["Content-Type"] == "application/json"
    seconds = int(refused["Retry-After"])
    assert 1 <= seconds <= 60
    answer = refused.json()
    assert (answer["jsonrpc"], answer["id"], answer["error"]["code"]) == ("2.0", 7, -32029)
    assert answer["error"]["message"] == f"Request was throttled. Expected available in {seconds} seconds."
    assert answer["error"]["data"] == {
        "code": "throttled",
        "message": answer["error"]["message"],
        "details": {"retry_after": seconds},
        "status": 429,
    }
    assert agent.get("/api/memories/").status_code == 429  # and the API refuses the token too


def test_recall_over_mcp_is_expensive_as_it_is_on_the_api(settings, agent_token, indexes):
    settings.MEMORYUI_API_RATE = "100/minute"
    agent = bearer(agent_token)
    recalls = [tool(agent, "recall", {"query": "what does staging run on"}, n) for n in (1, 2)]
    assert [r.status_code for r in recalls] == [200, 200]
    assert all("result" in r.json() for r in recalls)

    third = tool(agent, "recall", {"query": "what does staging run on"}, 3)

    assert third.status_code == 429 and third.json()["error"]["code"] == -32029
    assert tool(agent, "search_memory", {"query": "staging"}).status_code == 200  # other tools go on
    api = agent.post("/api/recall/", {"query": "staging", "scope": "agent:main"}, content_type="application/json")
    assert api.status_code == 429  # the API's recall shares the expensive count


def test_each_token_is_counted_on_its_own(agent_token, reader):
    agent = bearer(agent_token)
    assert [rpc(agent, "ping").status_code for _ in range(4)] == [200, 200, 200, 429]

    assert rpc(bearer(reader), "ping").status_code == 200


def test_notifications_are_not_counted_and_anything_answered_is(agent_token):
    agent = bearer(agent_token)
    notified = [rpc(agent, "notifications/initialized", request_id=None).status_code for _ in range(5)]
    assert notified == [202] * 5  # JSON-RPC answers no notification: none could carry a refusal

    garbage = agent.post("/mcp/?scope=agent:main", "{not json", content_type="application/json")
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
    assert [rpc(agent, "ping").status_code for _ in range(3)] == [200, 200, 429]  # the garbage counted


def test_an_mcp_client_reads_the_refusal_as_an_mcp_error_with_the_wait(live_server, agent_token):
    async def work(client: McpClient) -> MCPError:
        try:
            for _ in range(5):
                await client.list_tools()
        except MCPError as exc:
            return exc
        raise AssertionError("never refused")

    refused = session(f"{live_server.url}/mcp/?scope=agent:main", agent_token, work)

    assert refused.code == -32029
    assert refused.data["code"] == "throttled" and 1 <= refused.data["details"]["retry_after"] <= 60
    assert refused.message.startswith("Request was throttled. Expected available in ")


@pytest.mark.parametrize(
    ("message", "rates"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall"}}, ("api", "expensive")),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_memory"}}, ("api",)),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": {}}}, ("api",)),  # no name at all
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, ()),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, ()),  # a response to the server
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], ("api",)),  # a batch: refused by the SDK, answered
        (None, ("api",)),  # not JSON: answered -32700
    ],
)
def test_what_a_message_counts_against(message, rates):
    assert limits.rates_of(message) == rates
