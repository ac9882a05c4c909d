"""`manage.py mcp` over stdio, driven by the mcp SDK's own client, as an agent's MCP client runs it:
the tools are listed with their schemas, `remember` writes through the write path, `search_memory`
finds it, and `recall` with `recent_tools` lets the active-tool filter hold back a stale call format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.mcpserver.support import run_client

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOOL = "mcp__ata__article-list-query"
SCHEMA = "Parameter schema for article-list-query: page_size int ≤ 50, query string, locale enum."
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
STORE = [
    {"scope": "agent:main", "kind": "procedure", "text": SCHEMA},
    {"scope": "agent:main", "kind": "procedure", "text": GOTCHA},
    {"scope": "agent:main", "kind": "fact", "text": "Staging runs on k3s with three nodes."},
    {"scope": "agent:other", "kind": "fact", "text": "The other agent's deploy key is in vault under ops/other."},
]


def environment(data_dir: Path) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(MEMORYUI_DATA_DIR=str(data_dir), CELERY_TASK_ALWAYS_EAGER="1", OMP_NUM_THREADS="1")
    return env


def manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


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
