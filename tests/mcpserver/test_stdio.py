"""`manage.py mcp` over stdio, driven by the mcp SDK's own client, as an agent's MCP client runs it:
the tools are listed with their schemas, `remember` writes through the write path, `search_memory`
finds it, and `recall` with `recent_tools` lets the active-tool filter hold back a stale call format.
A server started with a token checks it on every call; a line that is not JSON-RPC is answered.

Who is who: ed is an editor whose write token for agent:main a long stdio session holds while the
operator changes ed's role, deactivates ed's account and revokes the token."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.mcpserver.support import ROOT, environment, manage, run_client

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

TOOL = "mcp__ata__article-list-query"
SCHEMA = "Parameter schema for article-list-query: page_size int ≤ 50, query string, locale enum."
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
USERS = "from django.contrib.auth import get_user_model as m; m().objects"  # for `manage.py shell -c`
STORE = [
    {"scope": "agent:main", "kind": "procedure", "text": SCHEMA},
    {"scope": "agent:main", "kind": "procedure", "text": GOTCHA},
    {"scope": "agent:main", "kind": "fact", "text": "Staging runs on k3s with three nodes."},
    {"scope": "agent:other", "kind": "fact", "text": "The other agent's deploy key is in vault under ops/other."},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    data_dir = tmp_path_factory.mktemp("mcp-stdio")
    env = environment(data_dir)
    manage(env, "migrate", "-v0")
    lines = data_dir / "store.jsonl"
    lines.write_text("".join(json.dumps(item) + "\n" for item in STORE), encoding="utf-8")
    assert json.loads(manage(env, "import_memories", str(lines), "--json"))["imported"] == len(STORE)
    return env


def call(client: Client, name: str, arguments: dict):
    async def run():
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        return json.loads(result.content[0].text)

    return run()


def test_an_agent_lists_remembers_searches_and_recalls_over_stdio(store):
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--scope", "agent:main"], env=store, cwd=str(ROOT)
    )
    seen: dict = {}

    async def session():
        async with Client(params) as client:
            listed = await client.list_tools()
            seen["tools"] = {tool.name: tool for tool in listed.tools}
            seen["remembered"] = await call(
                client, "remember", {"text": "The release train leaves every Thursday at 14:00.", "kind": "procedure"}
            )
            seen["bogus"] = await client.call_tool("remember", {"text": "Anything at all.", "kind": "bogus"})
            seen["search"] = await call(client, "search_memory", {"query": "when does the release train leave"})
            seen["exact"] = await call(client, "search_memory", {"query": "ops/other"})
            seen["recall_active"] = await call(
                client,
                "recall",
                {"query": "how do I call article-list-query", "recent_tools": ["mcp__web__fetch", TOOL]},
            )
            seen["recall_idle"] = await call(client, "recall", {"query": "how do I call article-list-query"})
            try:
                await client.call_tool("get_memory", {"id": "5b0c9a8e-0000-4000-8000-000000000000"})
            except MCPError as exc:
                seen["error"] = exc
            seen["stats"] = json.loads((await client.read_resource("memoryui://stats")).contents[0].text)
            resource = await client.read_resource(f"memoryui://memories/{seen['remembered']['id']}")
            seen["resource"] = json.loads(resource.contents[0].text)

    run_client(session)

    tools = seen["tools"]
    assert set(tools) == {"search_memory", "recall", "remember", "get_memory", "pin", "tombstone", "list_memories"}
    assert tools["recall"].input_schema["properties"]["recent_tools"]["anyOf"][0]["type"] == "array"
    assert tools["remember"].input_schema["required"] == ["text"]
    assert tools["search_memory"].annotations.read_only_hint is True

    remembered = seen["remembered"]
    assert (remembered["scope"], remembered["kind"], remembered["tier"]) == ("agent:main", "procedure", "working")
    assert seen["bogus"].is_error is True
    assert seen["bogus"].content[0].text.startswith("Invalid input: kind.\nkind: 'bogus' is not one of: entity,")
    assert seen["search"]["results"][0]["id"] == remembered["id"]
    assert seen["exact"]["results"] == []  # another scope's memory is not this connection's

    active = {c["id"]: c for c in seen["recall_active"]["candidates"]}
    by_text = {item["text"]: item["id"] for item in seen["recall_active"]["selected"]}
    schema_id = next(c for c in active.values() if c["decision"] == "filtered")["id"]
    assert active[schema_id]["reasons"] == [f"active tool {TOOL} + marker 'parameter schema'"]
    assert GOTCHA in by_text and SCHEMA not in by_text
    assert SCHEMA not in seen["recall_active"]["block"]
    idle = {c["id"]: c["decision"] for c in seen["recall_idle"]["candidates"]}
    assert idle[schema_id] != "filtered"  # the same memory, with no active tool, is not filtered

    error = seen["error"]
    assert (error.code, error.data["code"], error.data["status"]) == (-32004, "not_found", 404)
    assert seen["stats"]["total"] == 4 and seen["stats"]["scope"] == "agent:main"
    assert seen["resource"]["text"] == remembered["text"] and seen["resource"]["id"] == remembered["id"]

    history = manage(store, "shell", "-c", (
        "from memoryui.models import MemoryEvent;"
        f"print(MemoryEvent.objects.get(memory_id='{remembered['id']}', action='created').actor)"
    ))  # fmt: skip
    assert history.strip().splitlines()[-1] == "mcp:stdio"


def test_the_command_refuses_to_start_without_a_scope_or_with_a_bad_token(store):
    env = store
    for args, message in ((["mcp"], "--scope is required"), (["mcp", "--token", "mui_nope"], "invalid or revoked")):
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0 and message in done.stderr


def test_a_token_changed_during_a_stdio_session_is_refused_from_the_next_call(store):
    manage(store, "shell", "-c", f"{USERS}.create_user('ed')")
    manage(store, "set_role", "ed", "editor")
    issued = json.loads(manage(store, "api_token", "create", "ci", "--user", "ed", "--scope", "agent:main", "--json"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--token", issued["key"], "--scope", "agent:main"],
        env=store,
        cwd=str(ROOT),
    )
    active = f"{USERS}.filter(username='ed').update(is_active={{}})"
    steps = [  # what the operator runs, then what the session writes
        ((), "Ed's token wrote this first."),
        (("set_role", "ed", "viewer"), "Ed's token wrote this as a viewer."),
        (("set_role", "ed", "editor"), "Ed's token wrote this as an editor again."),
        (("shell", "-c", active.format(False)), "Ed's token wrote this while ed was deactivated."),
        (("shell", "-c", active.format(True)), "Ed's token wrote this once ed was back."),
        (("api_token", "revoke", str(issued["id"])), "Ed's token wrote this after it was revoked."),
    ]

    async def session() -> list[str]:
        said = []
        async with Client(params) as client:
            for command, text in steps:
                if command:
                    await anyio.to_thread.run_sync(lambda command=command: manage(store, *command))
                try:
                    result = await client.call_tool("remember", {"text": text})
                except MCPError as exc:
                    said.append(f"{exc.code} {exc.message}")
                else:
                    said.append("tool error" if result.is_error else json.loads(result.content[0].text)["text"])
        return said

    assert run_client(session) == [
        "Ed's token wrote this first.",
        "-32003 This needs the editor role; this token's owner is a viewer.",
        "Ed's token wrote this as an editor again.",
        "-32001 This token's owner's account is deactivated: its tokens are refused.",
        "Ed's token wrote this once ed was back.",
        "-32001 This token was revoked: it may no longer be used.",
    ]
    exported = manage(store, "export_memories", "-", "--scope", "agent:main")
    written = sorted(json.loads(line)["text"] for line in exported.splitlines() if "Ed's token" in line)
    assert written == [
        "Ed's token wrote this as an editor again.",
        "Ed's token wrote this first.",
        "Ed's token wrote this once ed was back.",
    ]


class RawStdio:
    """`manage.py mcp` spoken to line by line, as a client's transport writes it, with a deadline on every answer."""

    def __init__(self, env: dict):
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "mcp", "--scope", "agent:main"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: str) -> dict:
        """Write one line and answer the next message the server writes (a test never waits for ever)."""
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        try:
            return json.loads(self.lines.get(timeout=60))
        except queue.Empty:
            raise AssertionError(f"no answer to {line!r}") from None

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def test_a_line_that_is_not_json_rpc_is_answered_with_an_error_and_the_next_line_is_served(store):
    server = RawStdio(store)
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    try:
        before = server.send("this is not JSON")
        initialized = server.send(json.dumps(hello))
        server.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        truncated = server.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/li')
        no_method = server.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": 42}))
        not_an_object = server.send("[1, 2, 3]")
        listed = server.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
    finally:
        server.close()

    assert (before["id"], before["error"]["code"]) == (None, -32700)
    assert before["error"]["message"].startswith("Parse error")
    assert initialized["id"] == 1 and initialized["result"]["serverInfo"]["name"] == "memoryui"
    assert (truncated["id"], truncated["error"]["code"]) == (None, -32700)
    assert (no_method["id"], no_method["error"]["code"]) == (3, -32600)  # its id is known: the client waits for it
    assert no_method["error"]["message"].startswith("Invalid request")
    assert (not_an_object["id"], not_an_object["error"]["code"]) == (None, -32600)
    assert listed["id"] == 4 and "remember" in {tool["name"] for tool in listed["result"]["tools"]}
