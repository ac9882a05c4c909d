"""The MCP tools as plain functions of a caller: the same rules, refusals and history as the API.

Who is who: the stdio caller has no token (the local user, recorded as mcp:stdio); the agent token
(alice's) sees every scope; mallory's write token covers agent:other only; bob's read token is a
viewer's.
"""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from rest_framework import exceptions

from mcpserver import tools
from mcpserver.server import ERROR_CODES, mcp_error
from memoryui.models import ApiToken, Memory, MemoryEvent

pytestmark = pytest.mark.django_db

LOCAL = tools.Caller(scope="agent:main")


def token(raw: str) -> ApiToken:
    return ApiToken.authenticate(raw)


@pytest.fixture
def reader(bob) -> ApiToken:
    item, _ = ApiToken.issue(user=bob, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    return item


def test_remember_writes_through_the_write_path_with_the_caller_as_actor(agent_token):
    caller = tools.Caller(scope="agent:main", token=token(agent_token))
    answer = tools.remember(caller, "The staging database is db-stg-3.", kind="fact")
    memory = Memory.objects.get(pk=answer["id"])
    assert (memory.scope, memory.kind, memory.tier, memory.source) == ("agent:main", "fact", "working", "remember")
    assert answer["merged"] is False
    assert MemoryEvent.objects.get(memory=memory, action="created").actor == "token:agent"


def test_remember_without_a_kind_is_an_explicit_remember_and_dedups_a_repeat():
    first = tools.remember(LOCAL, "Never add Co-Authored-By to commits.")
    again = tools.remember(LOCAL, "  never add  CO-AUTHORED-BY to commits. ")
    assert first["kind"] == "remember"
    assert again["merged"] is True and again["merged_into"] == first["id"]
    assert Memory.objects.count() == 1
    assert MemoryEvent.objects.filter(action="merged", actor="mcp:stdio").count() == 1


def test_a_read_token_may_not_remember_pin_or_tombstone(reader, make_memory):
    memory = make_memory("The user prefers short answers.")
    caller = tools.Caller(scope="agent:main", token=reader)
    for call in (
        lambda: tools.remember(caller, "anything at all"),
        lambda: tools.pin(caller, str(memory.pk)),
        lambda: tools.tombstone(caller, str(memory.pk), "wrong"),
    ):
        with pytest.raises(exceptions.PermissionDenied, match="read-only"):
            call()
    assert tools.get_memory(caller, str(memory.pk))["text"] == "The user prefers short answers."


def test_a_memory_of_another_scope_is_not_found(make_memory):
    other = make_memory("Secrets of another agent.", scope="agent:other")
    with pytest.raises(exceptions.NotFound, match="No memory with this id"):
        tools.get_memory(LOCAL, str(other.pk))
    with pytest.raises(exceptions.NotFound):
        tools.tombstone(LOCAL, str(other.pk), "not mine")
    assert Memory.objects.get(pk=other.pk).status == "active"


def test_pin_and_tombstone_are_in_the_history(make_memory):
    memory = make_memory("The user prefers short answers.")
    assert tools.pin(LOCAL, str(memory.pk))["pinned"] is True
    gone = tools.tombstone(LOCAL, str(memory.pk), "superseded")
    assert (gone["status"], gone["tombstone_reason"]) == ("tombstoned", "superseded")
    actions = list(MemoryEvent.objects.filter(memory=memory, actor="mcp:stdio").values_list("action", flat=True))
    assert sorted(actions) == ["pinned", "tombstoned"]


def test_bad_arguments_are_invalid_naming_the_field(make_memory):
    with pytest.raises(exceptions.ValidationError) as caught:
        tools.remember(LOCAL, "A fine statement.", kind="gossip")
    assert "kind" in caught.value.detail
    with pytest.raises(exceptions.ValidationError) as caught:
        tools.get_memory(LOCAL, "not-a-uuid")
    assert "id" in caught.value.detail
    with pytest.raises(exceptions.ValidationError) as caught:
        tools.tombstone(LOCAL, str(make_memory().pk), "   ")
    assert "reason" in caught.value.detail
    with pytest.raises(exceptions.ValidationError) as caught:
        tools.list_memories(LOCAL, kind="gossip", tier="top", limit=0, cursor="!!")
    assert set(caught.value.detail) == {"kind", "tier", "limit", "cursor"}


def test_list_memories_pages_with_a_cursor_and_filters(make_memory):
    for n in range(5):
        make_memory(f"Fact number {n} about the build farm.", kind="fact")
    make_memory("The user prefers short answers.", kind="preference")
    make_memory("Another agent's fact.", kind="fact", scope="agent:other")
    seen = []
    page = tools.list_memories(LOCAL, kind="fact", limit=2)
    while True:
        seen += [item["text"] for item in page["memories"]]
        if not page["next_cursor"]:
            break
        page = tools.list_memories(LOCAL, kind="fact", limit=2, cursor=page["next_cursor"])
    assert sorted(seen) == sorted(f"Fact number {n} about the build farm." for n in range(5))
    assert len(seen) == len(set(seen))


def test_the_connection_scope_is_the_asked_one_within_the_token(mallory_token, agent_token):
    mallory = token(mallory_token)
    assert tools.connection_scope(None, mallory) == "agent:other"
    assert tools.connection_scope("other", mallory) == "agent:other"
    with pytest.raises(Exception) as caught:
        tools.connection_scope("agent:main", mallory)
    assert tools.error_of(caught.value)[0] == 403
    with pytest.raises(exceptions.ValidationError):
        tools.connection_scope(None, token(agent_token))  # every scope: which one?


def test_an_error_becomes_an_mcp_error_with_the_apis_code_and_message():
    error = mcp_error(exceptions.NotFound(tools.NOT_FOUND))
    assert isinstance(error, MCPError)
    assert (error.code, error.message) == (ERROR_CODES[404], tools.NOT_FOUND)
    assert error.data == {"code": "not_found", "message": tools.NOT_FOUND, "details": {}, "status": 404}
    invalid = mcp_error(exceptions.ValidationError({"kind": ["'gossip' is not a valid choice."]}))
    assert invalid.code == -32602 and invalid.data["code"] == "invalid"
    assert invalid.data["details"] == {"kind": ["'gossip' is not a valid choice."]}


def test_stats_count_the_connection_scope_only(make_memory):
    make_memory("The user prefers short answers.")
    make_memory("Another agent's fact.", kind="fact", scope="agent:other")
    counted = tools.stats(LOCAL)
    assert counted["total"] == 1 and counted["by_kind"]["preference"] == 1


def test_a_blank_or_invisible_query_is_invalid_naming_the_query():
    for query in ("", "   ", "\u200b\u200b"):
        with pytest.raises(exceptions.ValidationError) as caught:
            tools.search_memory(LOCAL, query)
        assert "query" in caught.value.detail


def test_an_unexpected_failure_is_an_internal_error_that_tells_nothing_of_it(caplog):
    error = mcp_error(RuntimeError("connection string postgres://secret@db"))
    assert (error.code, error.data["code"], error.data["status"]) == (-32603, "server_error", 500)
    assert "secret" not in error.message
