"""memoryui's MCP server as a client nobody here wrote calls it: the MCP Inspector's CLI (npm
`@modelcontextprotocol/inspector`, pinned in tests/clients/package-lock.json, installed by
`make test`), over stdio (`manage.py mcp`) and over streamable HTTP (`/mcp/` of the live app).

Each CLI run is one client session: it lists the tools, or calls one, and prints what it got. The
tests read what it prints, as a user of the Inspector would: the tools, a memory remembered and
then found, a bad argument's reason in the tool's content, and a revoked token refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from memoryui.models import ApiToken
from tests.mcpserver.support import ROOT, environment, manage

pytestmark = pytest.mark.e2e

INSPECTOR = ROOT / "tests" / "clients" / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
FACT = "The release job must run on ubuntu-24.04."
TOOL_ERROR = 5  # the Inspector CLI's exit status when the tool answered with isError: true


def inspector(*args: str, env: dict | None = None) -> tuple[int, dict | str]:
    """Run the Inspector's CLI; its exit status and what it printed (JSON when it printed JSON)."""
    assert INSPECTOR.exists(), "the MCP Inspector is not installed: run `make test` (it runs npm ci in tests/clients)"
    entry = json.loads(INSPECTOR.read_text())["bin"]
    script = INSPECTOR.parent / (entry if isinstance(entry, str) else next(iter(entry.values())))
    done = subprocess.run(
        [shutil.which("node") or "node", str(script), "--cli", *args],
        cwd=ROOT,
        env=env or os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = done.stdout.strip() or done.stderr.strip()
    try:
        return done.returncode, json.loads(output)
    except ValueError:
        return done.returncode, output


def text_of(result) -> str:
    assert isinstance(result, dict) and "content" in result, result
    return "\n".join(part.get("text", "") for part in result["content"])


# --- stdio -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_store(tmp_path_factory) -> dict:
    """A migrated store of its own, an editor (ed) and a write token of ed's for agent:ci."""
    data_dir = tmp_path_factory.mktemp("inspector-stdio")
    env = environment(data_dir)
    manage(env, "migrate", "-v0")
    manage(env, "shell", "-c", "from django.contrib.auth import get_user_model as m; m().objects.create_user('ed')")
    manage(env, "set_role", "ed", "editor")
    issued = json.loads(manage(env, "api_token", "create", "ci", "--user", "ed", "--scope", "agent:ci", "--json"))
    return {"env": env, "key": issued["key"], "id": str(issued["id"])}


def stdio(store: dict, *args: str) -> tuple[int, dict | str]:
    """The Inspector starting `manage.py mcp` with the token; it hands the server only the `-e` variables."""
    server = [sys.executable, "manage.py", "mcp", "--token", store["key"], "--scope", "agent:ci"]
    passed = [f"{name}={store['env'][name]}" for name in ("MEMORYUI_DATA_DIR", "CELERY_TASK_ALWAYS_EAGER")]
    options = [option for pair in passed for option in ("-e", pair)]
    return inspector(*options, "--cwd", str(ROOT), *args, "--", *server, env=store["env"])


@pytest.mark.own_database  # the stdio server runs on a SQLite store of its own
def test_the_inspector_lists_the_tools_remembers_and_finds_over_stdio(stdio_store):
    status, listed = stdio(stdio_store, "--method", "tools/list")
    assert status == 0, listed
    names = {tool["name"] for tool in listed["tools"]}
    assert {"remember", "search_memory", "recall", "get_memory", "pin", "tombstone", "list_memories"} <= names

    status, remembered = stdio(
        stdio_store, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", f"text={FACT}", "kind=fact"
    )
    assert status == 0 and not remembered.get("isError"), remembered
    memory = json.loads(text_of(remembered))
    assert memory["text"] == FACT and memory["scope"] == "agent:ci"

    status, found = stdio(
        stdio_store, "--method", "tools/call", "--tool-name", "search_memory", "--tool-arg", "query=release job runner"
    )
    assert status == 0 and not found.get("isError"), found
    assert FACT in text_of(found)

    status, prompts = stdio(stdio_store, "--method", "prompts/list")
    assert status == 0 and {p["name"] for p in prompts["prompts"]} == {"remember", "what_do_you_remember"}, prompts
    asked = ("--prompt-name", "what_do_you_remember", "--prompt-args", "topic=release")
    status, prompt = stdio(stdio_store, "--method", "prompts/get", *asked)
    assert status == 0, prompt
    assert json.dumps(FACT) in prompt["messages"][0]["content"]["text"], prompt


@pytest.mark.own_database  # the stdio server runs on a SQLite store of its own
def test_a_bad_argument_comes_back_as_a_tool_error_whose_text_says_why_over_stdio(stdio_store):
    status, result = stdio(
        stdio_store, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", f"text={FACT}", "kind=bogus"
    )
    assert status == TOOL_ERROR, result
    assert isinstance(result, dict) and result.get("isError") is True, result
    reason = text_of(result)
    assert "kind" in reason and "bogus" in reason and "fact" in reason, reason  # the field, the value, the choices
    assert "pydantic" not in reason and "https://" not in reason


@pytest.mark.own_database  # the stdio server runs on a SQLite store of its own
def test_a_revoked_token_is_refused_on_the_next_call_over_stdio(stdio_store, tmp_path):
    env = stdio_store["env"]
    other = json.loads(manage(env, "api_token", "create", "ci-2", "--user", "ed", "--scope", "agent:ci", "--json"))
    store = {**stdio_store, "key": other["key"]}
    status, listed = stdio(store, "--method", "tools/list")
    assert status == 0 and listed["tools"], listed
    manage(env, "api_token", "revoke", str(other["id"]))
    status, refused = stdio(
        store, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", "text=Revoked tokens write nothing."
    )
    assert status != 0, refused
    assert "invalid or revoked" in str(refused), refused
    assert "Revoked tokens write nothing." not in manage(env, "export_memories", "-", "--scope", "agent:ci")


# --- streamable HTTP -------------------------------------------------------------------------------


@pytest.fixture
def http_token(alice) -> tuple[ApiToken, str]:
    return ApiToken.issue(user=alice, name="inspector", scopes=["agent:ci"])


def http(live_server, key: str, *args: str) -> tuple[int, dict | str]:
    """The Inspector at /mcp/ with the token as its header; --stored-auth-only, as it asks of a run
    without a person at it: a refused token is reported, not answered with an OAuth prompt."""
    url = f"{live_server.url}/mcp/"
    header = f"Authorization: Bearer {key}"
    return inspector(url, "--transport", "http", "--header", header, "--stored-auth-only", *args)


@pytest.mark.django_db(transaction=True)
def test_the_inspector_remembers_and_finds_over_http_and_a_revoked_token_is_refused(live_server, indexes, http_token):
    token, key = http_token
    status, listed = http(live_server, key, "--method", "tools/list")
    assert status == 0, listed
    assert {"remember", "search_memory", "recall"} <= {tool["name"] for tool in listed["tools"]}

    status, remembered = http(
        live_server, key, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", f"text={FACT}", "kind=fact"
    )
    assert status == 0 and not remembered.get("isError"), remembered
    status, found = http(
        live_server, key, "--method", "tools/call", "--tool-name", "search_memory", "--tool-arg", "query=release job"
    )
    assert status == 0 and FACT in text_of(found), found

    status, bad = http(
        live_server,
        key,
        "--method",
        "tools/call",
        "--tool-name",
        "remember",
        "--tool-arg",
        f"text={FACT}",
        "kind=bogus",
    )
    assert status == TOOL_ERROR and bad.get("isError") is True and "kind" in text_of(bad), bad

    token.revoke()
    status, refused = http(live_server, key, "--method", "tools/list")
    assert status != 0, refused
    assert "The token is invalid or revoked." in str(refused), refused  # the API's words, as the client printed them
