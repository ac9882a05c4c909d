"""REST API views (DRF): a viewset for the uniform memory CRUD, plain views for the rest.

Every error leaves as {"error": {"code", "message", "details"}} (see `exception_handler`).
A token limited to scopes sees nothing else: other scopes' memories answer 404, not 403,
so their existence does not leak.
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core import signals
from django.db import InterfaceError, OperationalError, transaction
from django.urls import Resolver404, resolve
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions, generics, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView, set_rollback
from rest_framework.views import exception_handler as drf_exception_handler

from memoryui import rules
from memoryui.models import ApiToken, ConflictError, Memory, MemoryEvent
from memoryui.serializers import (
    BulkActionSerializer,
    BulkResultSerializer,
    ErrorSerializer,
    EventSerializer,
    MemoryInputSerializer,
    MemorySerializer,
    MemoryWriteResultSerializer,
    ReasonSerializer,
    SearchResultSerializer,
    StatsSerializer,
    TokenCreateSerializer,
    TokenIssuedSerializer,
    TokenSerializer,
    TombstoneSerializer,
)
from recall.documents import IndexUnavailable
from recall.search import RETRIEVERS, SearchError, clean_query, search

logger = logging.getLogger(__name__)


# --- errors ------------------------------------------------------------------------------

ERROR_CODES = {
    status.HTTP_400_BAD_REQUEST: "invalid",
    status.HTTP_401_UNAUTHORIZED: "unauthorized",
    status.HTTP_403_FORBIDDEN: "forbidden",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
    status.HTTP_409_CONFLICT: "conflict",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
    status.HTTP_500_INTERNAL_SERVER_ERROR: "server_error",
    status.HTTP_503_SERVICE_UNAVAILABLE: "backend_unavailable",
}
BACKEND_RETRY_AFTER_SECONDS = 5


def error_body(status_code: int, message: str, details: dict | None = None, code: str | None = None) -> dict:
    return {
        "error": {
            "code": code or ERROR_CODES.get(status_code, "error"),
            "message": message,
            "details": details or {},
        }
    }


class ApiError(exceptions.APIException):
    """An API error with per-field details, e.g. the ids a bulk action could not find."""

    def __init__(self, status_code: int, message: str, details: dict | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.details = details or {}


def _invalid_message(details: dict) -> str:
    return "Invalid input: " + ", ".join(str(name) for name in details) + "." if details else "Invalid input."


def _json_error(status_code: int, message: str, details: dict | None = None) -> Response:
    set_rollback()
    return Response(error_body(status_code, message, details), status=status_code)


def exception_handler(exc, context):
    """Every API error as {"error": {"code", "message", "details"}}, never an HTML page."""
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        # Session-less requests without a token get 401 with the JSON shape, never a redirect.
        response = Response(status=status.HTTP_401_UNAUTHORIZED)
        response["WWW-Authenticate"] = 'Bearer realm="api"'
        response.data = error_body(401, str(exc.detail))
        return response
    if isinstance(exc, ApiError):
        return _json_error(exc.status_code, exc.message, exc.details)
    if isinstance(exc, rules.MemoryValidationError):
        return _json_error(400, _invalid_message(exc.errors), exc.errors)
    if isinstance(exc, ConflictError):
        return _json_error(409, str(exc))
    if isinstance(exc, SearchError):
        return _json_error(400, _invalid_message({exc.field: [str(exc)]}), {exc.field: [str(exc)]})
    if isinstance(exc, IndexUnavailable):
        logger.warning("search index unavailable: %s", exc)
        response = _json_error(
            503, f"Search is unavailable: {exc}", {"backend": f"{exc.index} index", "reason": str(exc)}
        )
        response["Retry-After"] = str(BACKEND_RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc)
        response = _json_error(503, f"The database is unavailable: {exc}", {"backend": "database", "reason": str(exc)})
        response["Retry-After"] = str(BACKEND_RETRY_AFTER_SECONDS)
        return response
    response = drf_exception_handler(exc, context)
    if response is None:
        if settings.DEBUG:
            return None  # Let Django show the traceback page while developing.
        # Tell Django's listeners (logging, the test client) as an unhandled exception would.
        request = context.get("request")
        signals.got_request_exception.send(sender=None, request=getattr(request, "_request", request))
        logger.error("unhandled API error", exc_info=exc)
        return _json_error(500, "Internal server error.")
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body(response.status_code, _invalid_message(detail), details=detail)
    else:
        response.data = error_body(response.status_code, str(exc.detail))
    return response


ERROR_RESPONSES = {
    400: OpenApiResponse(ErrorSerializer, description="invalid: details name each bad field"),
    401: OpenApiResponse(ErrorSerializer, description="unauthorized: no session, missing/invalid/revoked token"),
    403: OpenApiResponse(ErrorSerializer, description="forbidden: e.g. writing into a scope outside the token's"),
    404: OpenApiResponse(ErrorSerializer, description="not_found: unknown id, or a scope the token cannot see"),
    409: OpenApiResponse(ErrorSerializer, description="conflict: the entity key is already active in the scope"),
    503: OpenApiResponse(ErrorSerializer, description="backend_unavailable: the database did not answer"),
}


def errors(*codes: int) -> dict:
    return {code: ERROR_RESPONSES[code] for code in codes}


# --- who is asking -----------------------------------------------------------------------


def visible_scopes(request) -> list[str] | None:
    """The scopes the caller may see: a token's own, or None (every scope) for a signed-in user."""
    return request.auth.allowed_scopes if isinstance(request.auth, ApiToken) else None


def actor_for(request) -> str:
    if isinstance(request.auth, ApiToken):
        return f"token:{request.auth.name}"
    return f"user:{request.user.get_username()}"


def check_writable_scope(request, scope: str) -> None:
    allowed = visible_scopes(request)
    if allowed is not None and scope not in allowed:
        raise ApiError(
            403,
            f"This token may not write to scope {scope}.",
            {"scope": [f"{scope} is outside this token's scopes: {', '.join(allowed)}"]},
        )


class IsSessionUser(permissions.BasePermission):
    """Token management is for people signed in to the dashboard: a token cannot mint tokens."""

    message = "API tokens cannot manage tokens; sign in to the dashboard instead."

    def has_permission(self, request, view) -> bool:
        return not isinstance(request.auth, ApiToken)


# --- filters -----------------------------------------------------------------------------

MEMORY_ORDERINGS = (
    "created_at", "updated_at", "importance", "confidence", "access_count", "accessed_at", "kind", "tier", "scope",
)  # fmt: skip


def _scope_param(value: str, errors: dict) -> str | None:
    try:
        return rules.normalize_scope(value)
    except rules.ScopeError as exc:
        errors["scope"] = [str(exc)]
        return None


def _choice_param(name: str, value: str, choices: tuple[str, ...], errors: dict) -> str | None:
    if value not in choices:
        errors[name] = [f"{value!r} is not one of: {', '.join(choices)}"]
        return None
    return value


def _uuid_param(name: str, value: str, errors: dict) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        errors[name] = [f"{value!r} is not a UUID"]
        return None


PINNED_PARAMS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def filter_memories(queryset, params):
    """Apply the list filters from query parameters; a bad value is a 400 naming the parameter."""
    errors: dict[str, list[str]] = {}
    status_value = params.get("status") or "active"
    _choice_param("status", status_value, (*rules.STATUSES, "all"), errors)
    filters = {"status": status_value}
    if scope := params.get("scope"):
        filters["scope"] = _scope_param(scope, errors)
    for name, choices in (("kind", rules.KINDS), ("tier", rules.TIERS), ("source", rules.SOURCES)):
        if value := params.get(name):
            filters[name] = _choice_param(name, value, choices, errors)
    if pinned := params.get("pinned"):
        filters["pinned"] = PINNED_PARAMS.get(pinned.lower())
        if filters["pinned"] is None:
            errors["pinned"] = ["must be true or false"]
    filters["text"] = params.get("q", "").strip()
    ordering = [field.strip() for field in params.get("ordering", "").split(",") if field.strip()]
    if "ordering" in params and (not ordering or any(f.removeprefix("-") not in MEMORY_ORDERINGS for f in ordering)):
        errors["ordering"] = [f"order by one of: {', '.join(MEMORY_ORDERINGS)} (prefix - for descending)"]
    if errors:
        raise exceptions.ValidationError(errors)
    queryset = queryset.matching(**filters)
    if ordering:
        queryset = queryset.order_by(*ordering, "-id")  # the id keeps pages stable among ties
    return queryset


def filter_events(queryset, params):
    errors: dict[str, list[str]] = {}
    if memory := params.get("memory"):
        queryset = queryset.filter(memory_id=_uuid_param("memory", memory, errors))
    if batch := params.get("batch"):
        queryset = queryset.filter(batch=_uuid_param("batch", batch, errors))
    if event_action := params.get("action"):
        queryset = queryset.filter(action=_choice_param("action", event_action, MemoryEvent.Action.values, errors))
    if actor := params.get("actor"):
        queryset = queryset.filter(actor=actor)
    if scope := params.get("scope"):
        queryset = queryset.filter(memory__scope=_scope_param(scope, errors))
    if errors:
        raise exceptions.ValidationError(errors)
    return queryset


def _enum(name: str, values, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, str, enum=list(values), description=description)


MEMORY_LIST_PARAMETERS = [
    OpenApiParameter("scope", str, description="Only this scope; normalized, so `main` means `agent:main`."),
    _enum("kind", rules.KINDS, "Only this kind."),
    _enum("tier", rules.TIERS, "Only this tier."),
    _enum("status", (*rules.STATUSES, "all"), "Default `active`; `all` for every status."),
    OpenApiParameter("pinned", bool, description="true or false."),
    _enum("source", rules.SOURCES, "Only memories written by this source."),
    OpenApiParameter("q", str, description="Plain text, case-insensitive, in the text or the entity key."),
    OpenApiParameter(
        "ordering", str, description=f"Comma-separated, `-` for descending: {', '.join(MEMORY_ORDERINGS)}."
    ),
]
EVENT_LIST_PARAMETERS = [
    OpenApiParameter("memory", OpenApiTypes.UUID, description="Only this memory's events."),
    _enum("action", MemoryEvent.Action.values, "Only this action."),
    OpenApiParameter("actor", str, description="e.g. `user:alice`, `token:agent`."),
    OpenApiParameter("batch", OpenApiTypes.UUID, description="Only the events of one bulk action."),
    OpenApiParameter("scope", str, description="Only events of memories in this scope."),
]


# --- memories ----------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="List memories",
        parameters=MEMORY_LIST_PARAMETERS,
        responses={200: MemorySerializer(many=True), **errors(400, 401)},
    ),
    retrieve=extend_schema(summary="Get a memory", responses={200: MemorySerializer, **errors(401, 404)}),
)
class MemoryViewSet(viewsets.GenericViewSet):
    serializer_class = MemorySerializer
    lookup_value_converter = "uuid"
    queryset = Memory.objects.all()

    def get_queryset(self):
        return Memory.objects.for_scopes(visible_scopes(self.request))

    def get_object(self, *, lock: bool = False) -> Memory:
        queryset = self.get_queryset()
        if lock:
            queryset = queryset.select_for_update()
        memory = queryset.filter(pk=self.kwargs["pk"]).first()
        if memory is None:
            raise exceptions.NotFound("No memory with this id in the scopes you can see.")
        return memory

    def _answer(self, memory: Memory, status_code: int = 200) -> Response:
        return Response(self.get_serializer(memory).data, status=status_code)

    def list(self, request):
        memories = filter_memories(self.get_queryset(), request.query_params)
        page = self.paginate_queryset(memories)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request, pk):
        return self._answer(self.get_object())

    @extend_schema(
        summary="Write a memory (validated, placed, deduplicated)",
        request=MemoryInputSerializer,
        responses={
            201: OpenApiResponse(MemoryWriteResultSerializer, description="Created; `merged` is false."),
            200: OpenApiResponse(
                MemoryWriteResultSerializer,
                description="A duplicate (same normalized text or entity key in the scope): nothing was inserted; "
                "the existing memory is answered with `merged: true` and `merged_into` its id.",
            ),
            **errors(400, 401, 403),
        },
    )
    def create(self, request):
        serializer = MemoryInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        check_writable_scope(request, fields["scope"])
        memory, created = Memory.objects.write(actor=actor_for(request), **fields)
        memory.merged = not created
        memory.merged_into = None if created else memory.pk
        data = MemoryWriteResultSerializer(memory, context=self.get_serializer_context()).data
        if created:
            return Response(data, status=201, headers={"Location": data["url"]})
        return Response(data, status=200)

    def _edit(self, request, *, partial: bool) -> Response:
        with transaction.atomic():
            memory = self.get_object(lock=True)
            serializer = MemoryInputSerializer(data=request.data, partial=partial)
            serializer.is_valid(raise_exception=True)
            fields = serializer.validated_data
            if "scope" in fields:
                check_writable_scope(request, fields["scope"])
            try:
                memory.edit(actor=actor_for(request), **fields)
            except ConflictError:
                key, scope = fields.get("entity_key", memory.entity_key), fields.get("scope", memory.scope)
                raise ApiError(
                    409,
                    f"Another active memory in {scope} already has entity_key {key}.",
                    {"entity_key": [f"{key} is already active in {scope}"]},
                ) from None
        return self._answer(memory)

    @extend_schema(
        summary="Edit a memory (scope, kind and text required)",
        description="Applies the given fields; omitted optional fields keep their values. Status changes go "
        "through tombstone/restore.",
        request=MemoryInputSerializer,
        responses={200: MemorySerializer, **errors(400, 401, 403, 404, 409)},
    )
    def update(self, request, pk):
        return self._edit(request, partial=False)

    @extend_schema(
        summary="Edit some fields of a memory",
        request=MemoryInputSerializer(partial=True),
        responses={200: MemorySerializer, **errors(400, 401, 403, 404, 409)},
    )
    def partial_update(self, request, pk):
        return self._edit(request, partial=True)

    @extend_schema(
        summary="Tombstone a memory (soft delete, restorable)",
        description="Never a hard delete. The reason comes from `?reason=` or a JSON body "
        '`{"reason": …}`; default "deleted via API". Answers the tombstoned memory.',
        parameters=[OpenApiParameter("reason", str, description="Why the memory is removed.")],
        request=ReasonSerializer,
        responses={200: MemorySerializer, **errors(400, 401, 403, 404)},
    )
    def destroy(self, request, pk):
        body = ReasonSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        reason = request.query_params.get("reason") or body.validated_data.get("reason") or "deleted via API"
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.tombstone(reason, actor=actor_for(request))
        return self._answer(memory)

    @extend_schema(summary="Pin a memory", request=None, responses={200: MemorySerializer, **errors(401, 404)})
    @action(detail=True, methods=["post"])
    def pin(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.pin(actor=actor_for(request))
        return self._answer(memory)

    @extend_schema(summary="Unpin a memory", request=None, responses={200: MemorySerializer, **errors(401, 404)})
    @action(detail=True, methods=["post"])
    def unpin(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.unpin(actor=actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Tombstone a memory with a reason",
        request=TombstoneSerializer,
        responses={200: MemorySerializer, **errors(400, 401, 404)},
    )
    @action(detail=True, methods=["post"])
    def tombstone(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            body = TombstoneSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            memory.tombstone(body.validated_data["reason"], actor=actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Restore a tombstoned memory",
        request=ReasonSerializer,
        responses={
            200: MemorySerializer,
            **errors(400, 401, 404, 409),
        },
    )
    @action(detail=True, methods=["post"])
    def restore(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            body = ReasonSerializer(data=request.data or {})
            body.is_valid(raise_exception=True)
            memory.restore(actor=actor_for(request), reason=body.validated_data.get("reason", ""))
        return self._answer(memory)

    @extend_schema(summary="History of a memory", responses={200: EventSerializer(many=True), **errors(401, 404)})
    @action(detail=True, methods=["get"])
    def events(self, request, pk):
        memory = self.get_object()
        page = self.paginate_queryset(memory.events.all())
        return self.get_paginated_response(EventSerializer(page, many=True).data)

    @extend_schema(
        summary="Apply one action to many memories, all or nothing",
        description="One transaction and one batch id for every event. If any id is unknown or outside the "
        "caller's scopes, answers 404 listing them in `details.ids` and changes nothing.",
        request=BulkActionSerializer,
        responses={200: BulkResultSerializer, **errors(400, 401, 404, 409)},
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request):
        body = BulkActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        verb, ids = body.validated_data["action"], body.validated_data["ids"]
        actor, batch = actor_for(request), uuid.uuid4()
        changed = 0
        with transaction.atomic():
            memories = {m.pk: m for m in self.get_queryset().select_for_update().filter(pk__in=ids)}
            missing = [str(pk) for pk in ids if pk not in memories]
            if missing:
                raise ApiError(
                    404,
                    f"{len(missing)} of {len(ids)} ids are unknown or outside your scopes; nothing was changed.",
                    {"ids": missing},
                )
            for pk in ids:
                memory = memories[pk]
                try:
                    changed += memory.apply_action(
                        verb,
                        actor=actor,
                        batch=batch,
                        reason=body.validated_data.get("reason", ""),
                        tier=body.validated_data.get("tier", ""),
                    )
                except ConflictError as exc:
                    raise ApiError(409, f"{exc}; nothing was changed.", {"ids": [str(pk)]}) from None
        return Response({"batch": batch, "action": verb, "changed": changed, "unchanged": len(ids) - changed})


# --- events, stats -----------------------------------------------------------------------


@extend_schema(
    summary="Recent events across the store",
    parameters=EVENT_LIST_PARAMETERS,
    responses={200: EventSerializer(many=True), **errors(400, 401)},
)
class EventListView(generics.ListAPIView):
    serializer_class = EventSerializer

    def get_queryset(self):
        events = MemoryEvent.objects.all()
        scopes = visible_scopes(self.request)
        if scopes is not None:
            events = events.filter(memory__scope__in=scopes)
        return filter_events(events, self.request.query_params)


class StatsView(APIView):
    @extend_schema(
        summary="Counts by kind, tier and scope",
        description="Every key is always present; every kind and tier zero-filled.",
        parameters=[OpenApiParameter("scope", str, description="Only this scope; `main` means `agent:main`.")],
        responses={200: StatsSerializer, **errors(400, 401, 503)},
    )
    def get(self, request):
        memories = Memory.objects.for_scopes(visible_scopes(request))
        if scope := request.query_params.get("scope"):
            problems: dict[str, list[str]] = {}
            memories = memories.filter(scope=_scope_param(scope, problems))
            if problems:
                raise exceptions.ValidationError(problems)
        return Response(memories.stats())


class SearchView(APIView):
    @extend_schema(
        summary="Hybrid search over active memories",
        description=(
            "Vector and BM25 retrieval fused into one ranking with a light rerank; each result says why it ranks "
            "where it does and each retriever's contribution to its fused score. Apart from the ranking, the "
            "answerability decision (`answer`) says whether the store answers the query at all and labels every "
            "candidate `strong`, `weak` or `below_floor` with its reasons: `results` hold the strong and weak "
            "candidates of an answered query, and nothing when it is not answered; `below_floor` holds the rest "
            "of the first ranked candidates. `floor=off` returns the raw ranking instead. When one index is down "
            "the other answers alone and `degraded` says so; 503 only when no index can answer."
        ),
        parameters=[
            OpenApiParameter("q", str, required=True, description="The query; longer than 1000 characters is cut."),
            OpenApiParameter(
                "scope", str, many=True, description="Only these scopes (repeatable); default: every scope you can see."
            ),
            OpenApiParameter("limit", int, description="Results, 1..20 (default 5); outside is clamped and stated."),
            _enum("retriever", RETRIEVERS, "Which retrievers answer (default hybrid)."),
            _enum("floor", ("on", "off"), "on (default): apply the answerability decision; off: the raw ranking."),
        ],
        responses={200: SearchResultSerializer, **errors(400, 401, 503)},
    )
    def get(self, request):
        params = request.query_params
        problems: dict[str, list[str]] = {}
        scopes = visible_scopes(request)
        if wanted := [s for s in params.getlist("scope") if s.strip()]:
            wanted = [_scope_param(s, problems) for s in wanted]
            scopes = [s for s in dict.fromkeys(wanted) if s and (scopes is None or s in scopes)]
        limit = None
        if (raw := params.get("limit", "").strip()) != "":
            try:
                limit = int(raw)
            except ValueError:
                problems["limit"] = [f"must be a whole number, got {raw!r}"]
        retriever = params.get("retriever") or "hybrid"
        _choice_param("retriever", retriever, RETRIEVERS, problems)
        floor = params.get("floor") or "on"
        _choice_param("floor", floor, ("on", "off"), problems)
        try:
            clean_query(params.get("q"))
        except SearchError as exc:
            problems[exc.field] = [str(exc)]
        if problems:
            raise exceptions.ValidationError(problems)
        found = search(params.get("q"), scopes=scopes, limit=limit, retriever=retriever, floor=floor == "on")
        return Response(found.to_dict())


# --- tokens ------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Your API tokens", responses={200: TokenSerializer(many=True), **errors(401, 403)}),
)
class TokenViewSet(viewsets.GenericViewSet):
    serializer_class = TokenSerializer
    permission_classes = [permissions.IsAuthenticated, IsSessionUser]
    pagination_class = None
    lookup_value_converter = "int"
    queryset = ApiToken.objects.none()

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    @extend_schema(
        summary="Issue a token (the raw key is answered once)",
        request=TokenCreateSerializer,
        responses={201: TokenIssuedSerializer, **errors(400, 401, 403)},
    )
    def create(self, request):
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, raw = ApiToken.issue(user=request.user, **body.validated_data)
        token.key = raw
        return Response(TokenIssuedSerializer(token).data, status=201)

    @extend_schema(summary="Revoke a token", request=None, responses={200: TokenSerializer, **errors(401, 403, 404)})
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk):
        token = self.get_queryset().filter(pk=pk).first()
        if token is None:
            raise exceptions.NotFound("You have no token with this id.")
        token.revoke()
        return Response(self.get_serializer(token).data)


# --- schema, docs, unknown URLs ----------------------------------------------------------


class JsonErrorsMixin:
    """Answer errors as JSON even from views that render YAML or HTML on success."""

    def handle_exception(self, exc):
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


class SchemaView(JsonErrorsMixin, SpectacularAPIView):
    pass


class DocsView(JsonErrorsMixin, SpectacularSwaggerView):
    url_name = "api:schema"

    def perform_content_negotiation(self, request, force=False):
        # The page is HTML whatever the client asked for; only its errors are JSON.
        return super().perform_content_negotiation(request, force=True)

    def handle_exception(self, exc):
        # A person opening the docs without a session is sent to sign in, not shown a JSON error.
        wants_html = "text/html" in self.request.headers.get("Accept", "")
        if isinstance(exc, exceptions.NotAuthenticated) and wants_html:
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)


@extend_schema(exclude=True)
class ApiNotFoundView(APIView):
    """The last route under /api/: a JSON 404 after authentication (so anonymous callers get 401)."""

    def unknown_endpoint(self, request, *args, **kwargs):
        message = f"No API endpoint at {request.path}."
        if not request.path_info.endswith("/"):
            try:
                if resolve(request.path_info + "/").func.view_class is not ApiNotFoundView:
                    message += f" Did you mean {request.path}/ ?"
            except (Resolver404, AttributeError):
                pass
        raise exceptions.NotFound(message)

    get = post = put = patch = delete = options = unknown_endpoint
