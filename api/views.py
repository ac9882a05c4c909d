"""REST API views (DRF): a viewset for the uniform memory CRUD, plain views for the rest.

Every error leaves as {"error": {"code", "message", "details"}} (see `api.rest`).
A token limited to scopes sees nothing else: other scopes' memories answer 404, not 403,
so their existence does not leak. Every change needs the editor role (the signed-in user's, or the
token owner's) and, from a token, write access: `memoryui.roles.RolePermission` checks it first.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.urls import Resolver404, resolve
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions, generics, permissions, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from api import rest
from api.filters import EventFilterSet, MemoryFilterSet
from api.serializers import (
    BulkActionSerializer,
    BulkResultSerializer,
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
from ingest import writing
from memoryui import roles
from memoryui.models import ApiToken, ConflictError, Memory, MemoryEvent
from searchindex.search import RETRIEVERS, SearchError, search

# --- memories ----------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="List memories",
        responses={200: MemorySerializer(many=True), **rest.errors(400, 401)},
    ),
    retrieve=extend_schema(summary="Get a memory", responses={200: MemorySerializer, **rest.errors(401, 404)}),
)
class MemoryViewSet(rest.WriteTransactionMixin, viewsets.GenericViewSet):
    serializer_class = MemorySerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = MemoryFilterSet
    lookup_value_converter = "uuid"
    queryset = Memory.objects.all()

    def get_queryset(self):
        return Memory.objects.for_scopes(rest.visible_scopes(self.request))

    def get_object(self, *, lock: bool = False) -> Memory:
        queryset = self.get_queryset()
        if lock:
            queryset = queryset.select_for_update()
        memory = queryset.filter(pk=self.kwargs["pk"]).first()
        if memory is None:
            raise exceptions.NotFound(rest.MEMORY_NOT_FOUND)
        return memory

    def _answer(self, memory: Memory, status_code: int = 200) -> Response:
        return Response(self.get_serializer(memory).data, status=status_code)

    def list(self, request):
        memories = self.filter_queryset(self.get_queryset())
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
            **rest.errors(400, 401, 403),
        },
    )
    def create(self, request):
        serializer = MemoryInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        rest.check_writable_scope(request, fields["scope"])
        fields.setdefault("source", Memory.Source.API)  # an agent's write, not the dashboard's form
        memory, created = writing.write(actor=rest.actor_for(request), **fields)
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
                rest.check_writable_scope(request, fields["scope"])
            try:
                memory.edit(actor=rest.actor_for(request), **fields)
            except ConflictError:
                key, scope = fields.get("entity_key", memory.entity_key), fields.get("scope", memory.scope)
                raise rest.ApiError(
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
        responses={200: MemorySerializer, **rest.errors(400, 401, 403, 404, 409)},
    )
    def update(self, request, pk):
        return self._edit(request, partial=False)

    @extend_schema(
        summary="Edit some fields of a memory",
        request=MemoryInputSerializer(partial=True),
        responses={200: MemorySerializer, **rest.errors(400, 401, 403, 404, 409)},
    )
    def partial_update(self, request, pk):
        return self._edit(request, partial=True)

    @extend_schema(
        summary="Tombstone a memory (soft delete, restorable)",
        description="Never a hard delete. The reason comes from `?reason=` or a JSON body "
        '`{"reason": …}`; default "deleted via API". Answers the tombstoned memory.',
        parameters=[OpenApiParameter("reason", str, description="Why the memory is removed.")],
        request=ReasonSerializer,
        responses={200: MemorySerializer, **rest.errors(400, 401, 403, 404)},
    )
    def destroy(self, request, pk):
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        reason = request.query_params.get("reason") or body.validated_data.get("reason") or "deleted via API"
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.tombstone(reason, actor=rest.actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Pin a memory", request=None, responses={200: MemorySerializer, **rest.errors(401, 403, 404)}
    )
    @action(detail=True, methods=["post"])
    def pin(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.pin(actor=rest.actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Unpin a memory", request=None, responses={200: MemorySerializer, **rest.errors(401, 403, 404)}
    )
    @action(detail=True, methods=["post"])
    def unpin(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            memory.unpin(actor=rest.actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Tombstone a memory with a reason",
        request=TombstoneSerializer,
        responses={200: MemorySerializer, **rest.errors(400, 401, 403, 404)},
    )
    @action(detail=True, methods=["post"])
    def tombstone(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            body = TombstoneSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            memory.tombstone(body.validated_data["reason"], actor=rest.actor_for(request))
        return self._answer(memory)

    @extend_schema(
        summary="Restore a tombstoned memory",
        request=ReasonSerializer,
        responses={
            200: MemorySerializer,
            **rest.errors(400, 401, 403, 404, 409),
        },
    )
    @action(detail=True, methods=["post"])
    def restore(self, request, pk):
        with transaction.atomic():
            memory = self.get_object(lock=True)
            body = ReasonSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            memory.restore(actor=rest.actor_for(request), reason=body.validated_data.get("reason", ""))
        return self._answer(memory)

    @extend_schema(summary="History of a memory", responses={200: EventSerializer(many=True), **rest.errors(401, 404)})
    @action(detail=True, methods=["get"], filter_backends=[])  # the list's filters are not the history's
    def events(self, request, pk):
        memory = self.get_object()
        page = self.paginate_queryset(memory.events.all())
        return self.get_paginated_response(EventSerializer(page, many=True).data)

    @extend_schema(
        summary="Apply one action to many memories, all or nothing",
        description="One transaction and one batch id for every event. If any id is unknown or outside the "
        "caller's scopes, answers 404 listing them in `details.ids` and changes nothing.",
        request=BulkActionSerializer,
        responses={200: BulkResultSerializer, **rest.errors(400, 401, 403, 404, 409)},
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request):
        body = BulkActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        verb, ids = body.validated_data["action"], body.validated_data["ids"]
        actor, batch = rest.actor_for(request), uuid.uuid4()
        changed = 0
        with transaction.atomic():
            memories = {m.pk: m for m in self.get_queryset().select_for_update().filter(pk__in=ids)}
            missing = [str(pk) for pk in ids if pk not in memories]
            if missing:
                raise rest.ApiError(
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
                    raise rest.ApiError(409, f"{exc}; nothing was changed.", {"ids": [str(pk)]}) from None
        return Response({"batch": batch, "action": verb, "changed": changed, "unchanged": len(ids) - changed})


# --- events, stats -----------------------------------------------------------------------


@extend_schema(
    summary="Recent events across the store",
    responses={200: EventSerializer(many=True), **rest.errors(400, 401)},
)
class EventListView(generics.ListAPIView):
    serializer_class = EventSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = EventFilterSet

    def get_queryset(self):
        events = MemoryEvent.objects.all()
        scopes = rest.visible_scopes(self.request)
        if scopes is not None:
            events = events.filter(memory__scope__in=scopes)
        return events


class StatsView(APIView):
    @extend_schema(
        summary="Counts by kind, tier and scope",
        description="Every key is always present; every kind and tier zero-filled.",
        parameters=[OpenApiParameter("scope", str, description="Only this scope; `main` means `agent:main`.")],
        responses={200: StatsSerializer, **rest.errors(400, 401, 503)},
    )
    def get(self, request):
        memories = Memory.objects.for_scopes(rest.visible_scopes(request))
        if scope := request.query_params.get("scope"):
            problems: dict[str, list[str]] = {}
            memories = memories.filter(scope=rest.scope_param(scope, problems))
            if problems:
                raise exceptions.ValidationError(problems)
        return Response(memories.stats())


def _enum(name: str, values, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, str, enum=list(values), description=description)


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
        responses={200: SearchResultSerializer, **rest.errors(400, 401, 503)},
    )
    def get(self, request):
        params = request.query_params
        problems: dict[str, list[str]] = {}
        scopes = rest.visible_scopes(request)
        if wanted := [s for s in params.getlist("scope") if s != ""]:
            wanted = [rest.scope_param(s, problems) for s in wanted]
            scopes = [s for s in dict.fromkeys(wanted) if s and (scopes is None or s in scopes)]
        limit = None
        if (raw := params.get("limit", "").strip()) != "":
            try:
                limit = int(raw)
            except ValueError:
                problems["limit"] = [f"must be a whole number, got {raw!r}"]
        retriever = params.get("retriever") or "hybrid"
        rest.choice_param("retriever", retriever, RETRIEVERS, problems)
        floor = params.get("floor") or "on"
        rest.choice_param("floor", floor, ("on", "off"), problems)
        if problems:
            try:  # the query's own problem is named with the others: searching no scope only checks it
                search(params.get("q"), scopes=[])
            except SearchError as exc:
                problems[exc.field] = [str(exc)]
            raise exceptions.ValidationError(problems)
        # A query search() refuses is a SearchError: a 400 naming `q` (rest.exception_handler).
        found = search(params.get("q"), scopes=scopes, limit=limit, retriever=retriever, floor=floor == "on")
        return Response(found.to_dict())


# --- tokens ------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Your API tokens", responses={200: TokenSerializer(many=True), **rest.errors(401, 403)}),
)
class TokenViewSet(rest.WriteTransactionMixin, viewsets.GenericViewSet):
    """Every role manages its own tokens; what it may mint is `roles.mint_refusal`'s to say."""

    serializer_class = TokenSerializer
    permission_classes = [permissions.IsAuthenticated, rest.IsSessionUser, roles.RolePermission]
    write_role = roles.Role.VIEWER
    pagination_class = None
    lookup_value_converter = "int"
    queryset = ApiToken.objects.none()

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    @extend_schema(
        summary="Issue a token (the raw key is answered once)",
        description="Only an admin issues a token for every scope (no `scopes`); an editor issues read or write "
        "tokens for named scopes, a viewer read tokens for named scopes. A token above the caller's role is a "
        "403 naming the role it needs. Without `access`, the token gets the most the caller may issue.",
        request=TokenCreateSerializer,
        responses={201: TokenIssuedSerializer, **rest.errors(400, 401, 403)},
    )
    def create(self, request):
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data
        fields["access"] = fields.get("access") or roles.default_access(request.user)
        refusal = roles.mint_refusal(request.user, access=fields["access"], scopes=fields.get("scopes") or [])
        if refusal:
            raise rest.ApiError(403, refusal.message, {refusal.field: [f"needs the {refusal.role} role"]})
        token, raw = ApiToken.issue(user=request.user, **fields)
        token.key = raw
        return Response(TokenIssuedSerializer(token).data, status=201)

    @extend_schema(
        summary="Revoke a token", request=None, responses={200: TokenSerializer, **rest.errors(401, 403, 404)}
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk):
        token = self.get_queryset().filter(pk=pk).first()
        if token is None:
            raise exceptions.NotFound("You have no token with this id.")
        token.revoke()
        return Response(self.get_serializer(token).data)


# --- schema, docs, unknown URLs ----------------------------------------------------------


class SchemaView(rest.JsonErrorsMixin, SpectacularAPIView):
    pass


class DocsView(rest.JsonErrorsMixin, SpectacularSwaggerView):
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

    def access_needed(self, request) -> roles.Need:
        return roles.READS  # nothing here changes anything: every caller gets the same 404

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
