"""What the MCP tools and resources do, as plain functions of a `Caller` and the tool's arguments.

Each function does what its REST endpoint does, with the same serializers, domain calls and
refusals, so an agent gets the same answer over MCP as over `/api/`. Errors are raised as the
API raises them (DRF exceptions, `rest.ApiError`); `error_of()` turns one into the API's JSON
error shape and status, which the server sends as an MCP error (invalid arguments as a tool
execution error).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from rest_framework import exceptions

from api import rest
from api.recall import answer_recall
from api.serializers import MemoryInputSerializer, MemorySerializer
from api.serializers_recall import RecallRequestSerializer
from ingest import writing
from memoryui import memory_ids, roles, rules
from memoryui.models import ApiToken, ConflictError, Memory
from recall.models import RecallTrace
from searchindex.search import SearchError, search

LIST_LIMIT = 20
LIST_MAX = 100
REVOKED = "This token was revoked: it may no longer be used."
DEACTIVATED = "This token's owner's account is deactivated: its tokens are refused."


@dataclass(frozen=True)
class Caller:
    """Who is calling, over which connection: one scope, and a token (HTTP, or stdio given one) or none.

    A stdio server without a token runs as its local user: it reads and writes its scope, and its
    changes are recorded as `mcp:stdio`. With a token, the token's scopes, its read or write access
    and its owner's role apply as they do on the API, as they stand at each call, and its changes
    are recorded as `token:<name>`.
    """

    scope: str
    token: ApiToken | None = None

    @property
    def actor(self) -> str:
        return f"token:{self.token.name}" if self.token else "mcp:stdio"

    def check_reads(self) -> None:
        self._check(roles.READS)

    def check_writes(self) -> None:
        self._check(roles.EDITS)

    def _check(self, need: roles.Need) -> None:
        if self.token is None:
            return
        token = token_now(self.token)
        connection_scope(self.scope, token)  # its scopes may have been changed in the back office
        refused = roles.role_refusal(token.user, need, token)
        if refused:
            raise roles.Forbidden(refused)  # as the API: the field at fault in `details`


def token_now(token: ApiToken) -> ApiToken:
    """The token as it stands now, or the API's 401 saying why it is refused.

    A stdio server authenticates its token once and may serve for hours: a revocation, a deactivated
    owner or a changed role must count from the next call, as on HTTP, where every request
    authenticates again.
    """
    current = ApiToken.objects.select_related("user").filter(pk=token.pk).first()
    if current is None or current.is_revoked:
        raise exceptions.AuthenticationFailed(REVOKED)
    if not current.user.is_active:
        raise exceptions.AuthenticationFailed(DEACTIVATED)
    current.mark_used()
    return current


def connection_scope(scope: str | None, token: ApiToken | None) -> str:
    """The scope a connection works in: the one asked for (which the token must cover), or the
    token's only scope. Raises the API's 400 or 403 otherwise."""
    allowed = token.allowed_scopes if token else None
    if scope:
        problems: dict[str, list[str]] = {}
        normalized = rest.scope_param(scope, problems)
        if problems:
            raise exceptions.ValidationError(problems)
        if allowed is not None and normalized not in allowed:
            raise rest.ApiError(
                403,
                f"This token may not read scope {normalized}.",
                {"scope": [f"{normalized} is outside this token's scopes: {', '.join(allowed)}"]},
            )
        return normalized
    if allowed is not None and len(allowed) == 1:
        return allowed[0]
    message = "Name the scope this connection works in (e.g. ?scope=agent:main)."
    if allowed:
        message += f" This token covers: {', '.join(allowed)}."
    raise exceptions.ValidationError({"scope": [message]})


def error_of(exc: Exception) -> tuple[int, dict] | None:
    """The API's status and JSON error body for an exception, or None when it is not one the API answers."""
    response = rest.exception_handler(exc, {})
    return None if response is None else (response.status_code, response.data)


def memory_dict(memory: Memory) -> dict:
    """A memory as the API shows it, without the API's own URL."""
    return dict(_PlainMemory(memory).data)


class _PlainMemory(MemorySerializer):
    class Meta(MemorySerializer.Meta):
        fields = [name for name in MemorySerializer.Meta.fields if name != "url"]
        read_only_fields = fields


def _memory(caller: Caller, memory_id: str, *, lock: bool = False) -> Memory:
    try:  # the full id, or the short id the pages show, of a memory of this connection's scope
        pk = memory_ids.resolve(str(memory_id), scopes=caller.scope)
    except memory_ids.MemoryIdError as exc:
        if exc.code == "unknown":
            raise exceptions.NotFound(rest.MEMORY_NOT_FOUND) from None
        raise exceptions.ValidationError({"id": [str(exc)]}) from None
    queryset = Memory.objects.filter(scope=caller.scope, pk=pk)
    if lock:
        queryset = queryset.select_for_update()
    memory = queryset.first()
    if memory is None:
        raise exceptions.NotFound(rest.MEMORY_NOT_FOUND)
    return memory


def search_memory(caller: Caller, query: str, limit: int | None = None) -> dict:
    caller.check_reads()
    try:
        found = search(query, scopes=[caller.scope], limit=limit)
    except SearchError as exc:  # the query: the tool's argument is `query`
        raise exceptions.ValidationError({"query": [str(exc)]}) from None
    data = found.to_dict()
    return {
        "query": data["query"],
        "scope": caller.scope,
        "answer": data["answer"],
        "results": [_found(item) for item in data["results"]],
        "notices": data["notices"],
        "degraded": data["degraded"],
    }


def _found(item: dict) -> dict:
    keep = ("id", "text", "kind", "tier", "pinned", "score", "label", "vector_rank", "bm25_rank", "reasons")
    return {key: item[key] for key in keep if key in item}


def recall(caller: Caller, query: str, recent_tools: list[str] | None = None, limit: int | None = None) -> dict:
    caller.check_reads()
    body = {"query": query, "scope": caller.scope, "tools": recent_tools or []}
    if limit is not None:
        body["limit"] = limit
    request = RecallRequestSerializer(data=body)
    request.is_valid(raise_exception=True)
    return answer_recall(request.validated_data, actor=caller.actor, source=RecallTrace.Source.MCP)


def remember(caller: Caller, text: str, kind: str | None = None, entity_key: str | None = None) -> dict:
    """Write through the write path: validated, placed by kind, deduplicated."""
    caller.check_writes()
    body = {"scope": caller.scope, "text": text, "kind": kind or rules.Kind.REMEMBER, "source": "remember"}
    if entity_key:
        body["entity_key"] = entity_key
    serializer = MemoryInputSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    with transaction.atomic():
        memory, created = writing.write(actor=caller.actor, **serializer.validated_data)
    return {**memory_dict(memory), "merged": not created, "merged_into": None if created else str(memory.pk)}


def get_memory(caller: Caller, memory_id: str) -> dict:
    caller.check_reads()
    return memory_dict(_memory(caller, memory_id))


def pin(caller: Caller, memory_id: str) -> dict:
    """Pin an active memory. A tombstoned one is refused (409): an agent pinning it believes it is still
    recalled, and is told it is not."""
    caller.check_writes()
    with transaction.atomic():
        memory = _memory(caller, memory_id, lock=True)
        if memory.status == Memory.Status.TOMBSTONED:
            raise ConflictError(
                f"This memory is tombstoned ({memory.tombstone_reason}): it is not recalled, and pinning it "
                "would not bring it back. Restore it in the dashboard first."
            )
        memory.pin(actor=caller.actor)
    return memory_dict(memory)


def tombstone(caller: Caller, memory_id: str, reason: str) -> dict:
    caller.check_writes()
    if not (reason or "").strip():
        raise exceptions.ValidationError({"reason": ["This field may not be blank."]})
    with transaction.atomic():
        memory = _memory(caller, memory_id, lock=True)
        memory.tombstone(reason.strip(), actor=caller.actor)
    return memory_dict(memory)


def list_memories(
    caller: Caller,
    kind: str | None = None,
    tier: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> dict:
    """Active memories of the scope, newest first, a page at a time; `next_cursor` asks for the next page."""
    caller.check_reads()
    problems: dict[str, list[str]] = {}
    if kind:
        rest.choice_param("kind", kind, rules.KINDS, problems)
    if tier:
        rest.choice_param("tier", tier, rules.TIERS, problems)
    size = LIST_LIMIT if limit is None else limit
    if not 1 <= size <= LIST_MAX:
        problems["limit"] = [f"must be between 1 and {LIST_MAX}, got {size}"]
    after = _read_cursor(cursor, problems) if cursor else None
    if problems:
        raise exceptions.ValidationError(problems)
    memories = Memory.objects.active().filter(scope=caller.scope).order_by("-created_at", "-id")
    if kind:
        memories = memories.filter(kind=kind)
    if tier:
        memories = memories.filter(tier=tier)
    if after:
        created_at, pk = after
        memories = memories.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=pk))
    page = list(memories[: size + 1])
    more = len(page) > size
    page = page[:size]
    return {
        "scope": caller.scope,
        "memories": [memory_dict(memory) for memory in page],
        "next_cursor": _cursor_of(page[-1]) if more else None,
    }


def _cursor_of(memory: Memory) -> str:
    raw = f"{memory.created_at.isoformat()}|{memory.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_cursor(cursor: str, problems: dict) -> tuple[datetime, uuid.UUID] | None:
    """The (created_at, id) a cursor of `_cursor_of` holds. Only what it writes is taken: a time
    in UTC (+00:00), as the database gives it; any other offset, or none, names `cursor`, so no
    crafted time reaches the query (year 1 at +14:00 is before year 1 in UTC, which no datetime
    holds, and a naive one would be read in the server's zone)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, pk = raw.split("|")
        created_at = datetime.fromisoformat(when)
        if created_at.utcoffset() != timedelta(0):
            raise ValueError("a cursor's time is in UTC")
        return created_at, uuid.UUID(pk)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        problems["cursor"] = ["is not a cursor this server gave (pass next_cursor as it came)"]
        return None


def stats(caller: Caller) -> dict:
    caller.check_reads()
    return {"scope": caller.scope, **Memory.objects.filter(scope=caller.scope).stats()}
