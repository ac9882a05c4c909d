"""One MCP session with the server in-process, through the SDK's client: what a client is told when
its arguments are wrong, when it names no tool of ours, when its token changes under it, and who
the server says it is.

Who is who: the local caller has no token (a stdio server run without one); the writer is erin's
write token for agent:main (erin is an editor), authenticated once when the session starts.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from mcpserver import tools
from mcpserver.server import caller, server
from memoryui import roles
from memoryui.models import ApiToken, Memory
from tests.mcpserver.support import run_client

# The tools run in Django's own thread, on a connection of its own: the test's data must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
LOCAL = tools.Caller(scope="agent:main")


def session(who: tools.Caller, work):
    """Run `work(client)` in one in-process MCP session of `who`; its answer."""
    answer: dict = {}

    async def run():
        caller.set(who)
        async with Client(server) as client:
            answer["value"] = await work(client)

    run_client(run)
    return answer["value"]


def call(who: tools.Caller, name: str, arguments: dict):
    """The tool's result, or the MCP (JSON-RPC) error it answered."""

    async def work(client: Client):
        try:
            return await client.call_tool(name, arguments)
        except MCPError as exc:
            return exc

    return session(who, work)


def test_a_bad_choice_is_a_tool_error_naming_the_field_and_the_choices():
    result = call(LOCAL, "remember", {"text": "The user prefers short answers.", "kind": "bogus"})
    assert result.is_error is True
    text = result.content[0].text
    assert text.startswith("Invalid input: kind.\n")
    assert "kind: 'bogus' is not one of: entity, preference, fact," in text
    assert result.structured_content["error"]["code"] == "invalid"
    assert result.structured_content["error"]["details"]["kind"][0].startswith("'bogus' is not one of")
    assert Memory.objects.count() == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "says"),
    [
        ("list_memories", {"limit": "abc"}, "limit", "Input should be a valid integer"),
        ("list_memories", {"limit": "abc"}, "limit", "got 'abc'."),
        ("remember", {"text": 5}, "text", "Input should be a valid string, got 5."),
        ("remember", {"kind": "fact"}, "text", "This field is required."),
        ("recall", {"query": "deploys", "recent_tools": "web.fetch"}, "recent_tools", "should be a valid list"),
        (
            "get_memory",
            {"id": "not-a-uuid"},
            "id",
            "'not-a-uuid' is not a memory id (a full id, or its first 8 characters)",
        ),
        ("list_memories", {"limit": 0}, "limit", "must be between 1 and 100, got 0"),
    ],
)
def test_a_wrong_type_a_missing_argument_or_a_refused_value_is_a_tool_error_naming_the_field(
    tool, arguments, field, says
):
    """The SDK's argument validation (types, required) and memoryui's own (values) answer alike."""
    result = call(LOCAL, tool, arguments)
    assert result.is_error is True
    text = result.content[0].text
    assert text.splitlines()[0] == f"Invalid input: {field}."
    assert f"\n{field}: " in text and says in text
    assert "pydantic" not in text and "https://" not in text and "Arguments" not in text
    assert result.structured_content["error"]["details"][field]


def test_an_unknown_tool_is_a_protocol_error():
    refused = call(LOCAL, "forget_everything", {})
    assert isinstance(refused, MCPError)
    assert (refused.code, refused.message) == (-32602, "Unknown tool: forget_everything")


def test_a_token_changed_during_the_session_is_refused_from_the_next_call(erin):
    _, raw = ApiToken.issue(user=erin, name="writer", scopes=["agent:main"], access=ApiToken.Access.WRITE)
    writer = tools.Caller(scope="agent:main", token=ApiToken.authenticate(raw))
    users = type(erin).objects

    def deactivate() -> None:
        users.filter(pk=erin.pk).update(is_active=False)

    def reactivate_and_revoke() -> None:
        users.filter(pk=erin.pk).update(is_active=True)
        ApiToken.objects.get(name="writer").revoke()

    steps = [  # what changes (as another process would change it), then what the session writes
        (None, "Written by an editor."),
        (lambda: roles.set_role(users.get(pk=erin.pk), roles.Role.VIEWER), "Written by a viewer."),
        (lambda: roles.set_role(users.get(pk=erin.pk), roles.Role.EDITOR), "Written by an editor again."),
        (deactivate, "Written by a deactivated account."),
        (reactivate_and_revoke, "Written with a revoked token."),
    ]

    async def work(client: Client) -> list[str]:
        said = []
        for change, text in steps:
            if change:
                await sync_to_async(change)()
            try:
                result = await client.call_tool("remember", {"text": text})
            except MCPError as exc:
                said.append(f"{exc.code} {exc.message}")
            else:
                said.append("tool error" if result.is_error else json.loads(result.content[0].text)["text"])
        return said

    assert session(writer, work) == [
        "Written by an editor.",
        "-32003 This needs the editor role; this token's owner is a viewer.",
        "Written by an editor again.",
        "-32001 This token's owner's account is deactivated: its tokens are refused.",
        "-32001 This token was revoked: it may no longer be used.",
    ]
    assert sorted(Memory.objects.values_list("text", flat=True)) == [
        "Written by an editor again.",
        "Written by an editor.",
    ]


def test_the_server_names_memoryuis_version():
    async def work(client: Client):
        return client.server_info

    info = session(LOCAL, work)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (info.name, info.version) == ("memoryui", project["version"])
