"""The MCP tools as plain functions of a caller: the same rules, refusals and history as the API.

Who is who: the stdio caller has no token (the local user, recorded as mcp:stdio); the agent token
(alice's) sees every scope; mallory's write token covers agent:other only; the reader is erin's read
token (erin is an editor, so only the token keeps her from writing); the writer is erin's write
token for agent:main, the one a long stdio session holds while her account changes.
"""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from rest_framework import exceptions

from api import rest
from mcpserver import tools
from mcpserver.server import ERROR_CODES, mcp_error
from memoryui import roles
from memoryui.models import ApiToken, ConflictError, Memory, MemoryEvent

pytestmark = pytest.mark.django_db

LOCAL = tools.Caller(scope="agent:main")


def token(raw: str) -> ApiToken:
    return ApiToken.authenticate(raw)


@pytest.fixture
def reader(erin) -> ApiToken:
    item, _ = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    return item


@pytest.fixture
def writer(erin) -> tools.Caller:
    """A connection holding erin's write token, authenticated once, as `manage.py mcp --token` does."""
    _, raw = ApiToken.issue(user=erin, name="writer", scopes=["agent:main"], access=ApiToken.Access.WRITE)
    caller = tools.Caller(scope="agent:main", token=token(raw))
    tools.remember(caller, "Written while the token was good.")
    return caller


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
    error = mcp_error(exceptions.NotFound(rest.MEMORY_NOT_FOUND))
    assert isinstance(error, MCPError)
    assert (error.code, error.message) == (ERROR_CODES[404], rest.MEMORY_NOT_FOUND)
    assert error.data == {"code": "not_found", "message": rest.MEMORY_NOT_FOUND, "details": {}, "status": 404}
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


def test_a_token_revoked_during_a_session_is_refused_from_the_next_call(writer):
    ApiToken.objects.get(name="writer").revoke()  # as `manage.py api_token revoke` does, in another process
    with pytest.raises(exceptions.AuthenticationFailed, match="This token was revoked"):
        tools.remember(writer, "Written after the token was revoked.")
    with pytest.raises(exceptions.AuthenticationFailed, match="This token was revoked"):
        tools.stats(writer)
    assert list(Memory.objects.values_list("text", flat=True)) == ["Written while the token was good."]


def test_a_token_whose_owner_was_deactivated_during_a_session_is_refused_from_the_next_call(writer, erin):
    type(erin).objects.filter(pk=erin.pk).update(is_active=False)
    with pytest.raises(exceptions.AuthenticationFailed, match="owner's account is deactivated") as caught:
        tools.remember(writer, "Written after erin left.")
    assert tools.error_of(caught.value)[0] == 401
    assert Memory.objects.count() == 1


def test_a_write_token_whose_owner_became_a_viewer_during_a_session_only_reads(writer, erin):
    roles.set_role(type(erin).objects.get(pk=erin.pk), roles.Role.VIEWER)
    with pytest.raises(exceptions.PermissionDenied, match="This needs the editor role; this token's owner is a viewer"):
        tools.remember(writer, "Written after erin became a viewer.")
    assert tools.stats(writer)["total"] == 1


def test_a_token_whose_scopes_no_longer_cover_the_connection_is_refused(writer):
    ApiToken.objects.filter(name="writer").update(scopes=["agent:other"])
    with pytest.raises(exceptions.APIException, match="may not read scope agent:main") as caught:
        tools.stats(writer)
    assert tools.error_of(caught.value)[0] == 403


def test_pin_refuses_a_tombstoned_memory_saying_why(make_memory):
    memory = make_memory("The user prefers short answers.")
    tools.tombstone(LOCAL, str(memory.pk), "superseded")
    with pytest.raises(ConflictError, match="tombstoned") as caught:
        tools.pin(LOCAL, str(memory.pk))
    assert tools.error_of(caught.value)[0] == 409
    assert Memory.objects.get(pk=memory.pk).pinned is False
    assert not MemoryEvent.objects.filter(memory=memory, action="pinned").exists()
