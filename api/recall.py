"""REST endpoints of the read path under /api/recall/.

- `/api/recall/`: the full pipeline, for agents;
- `traces/`: saved recalls, read-only;
- `profiles/`: the tuning knobs; every caller reads them, only a signed-in admin changes them
  (a profile changes every agent's recall);
- `golden/`: golden sets and their queries, and runs scoring a profile (or comparing two) on them
  (editors: a run writes nothing, so a read token of an editor may run one).

A token sees the traces and golden sets of its own scopes only; the others answer 404.

The profiles' and golden sets' writes are one transaction each, as the store's are
(`rest.WriteTransactionMixin`): an error answer, or a database that fails as the answer is made,
leaves nothing of the request behind, and on SQLite a request waits for the write lock before it
starts (a database still locked then is a 503 `backend_unavailable`, never half a change). A name
taken by another request meanwhile is answered as any taken name is, never a 500.
"""

from __future__ import annotations

import random
from dataclasses import asdict

from django.conf import settings
from django.db import IntegrityError, transaction
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, permissions, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from api import rest
from api.filters_recall import RecallTraceFilterSet
from api.serializers import ErrorSerializer
from api.serializers_recall import (
    GoldenQuerySerializer,
    GoldenRunRequestSerializer,
    GoldenRunSerializer,
    GoldenSetDetailSerializer,
    GoldenSetSerializer,
    ProfileSerializer,
    RecallRequestSerializer,
    RecallResponseSerializer,
    RecallTraceDetailSerializer,
    RecallTraceSerializer,
)
from memoryui import roles
from memoryui.models import ApiToken, Memory
from recall import golden
from recall.models import DEFAULT_PROFILE, GoldenQuery, GoldenSet, RecallLogEntry, RecallProfile, RecallTrace
from recall.pipeline import recall, record_recall, why_not
from searchindex.search import SearchError


class RecallView(APIView):
    throttle_scope = "expensive"  # MEMORYUI_API_EXPENSIVE_RATE as well (api.throttling)

    def access_needed(self, request) -> roles.Need:
        return roles.READS  # a POST that reads: every role, read tokens too

    @extend_schema(
        summary="Recall memories for an agent's turn",
        description=(
            "The full recall pipeline: hybrid retrieval with its relevance floor, the model selector when an LLM "
            "is configured (within MEMORYUI_SELECTOR_TIMEOUT_MS, else the heuristic answers and "
            "`fallback_reason` says why), the active-tool filter on both paths, and the recall block to show the "
            "model for this turn only. Every candidate carries its decision and reasons. The recalled memories' "
            "access counts are bumped. With `why` (a memory's full or short id), `why` in the answer follows that "
            "memory to the stage that dropped it."
        ),
        request=RecallRequestSerializer,
        responses={200: RecallResponseSerializer, **rest.errors(400, 401, 403, 404, 503)},
    )
    def post(self, request):
        body = RecallRequestSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        allowed = rest.visible_scopes(request)
        if allowed is not None and data["scope"] not in allowed:
            raise rest.ApiError(
                403,
                f"This token may not read scope {data['scope']}.",
                {"scope": [f"{data['scope']} is outside this token's scopes: {', '.join(allowed)}"]},
            )
        return Response(answer_recall(data, actor=rest.actor_for(request), source=RecallTrace.Source.API))


def answer_recall(data: dict, *, actor: str, source: str) -> dict:
    """Run a validated `RecallRequestSerializer` body for an agent: the profile resolved (404 when
    unknown), the recall run and recorded (access counts), a trace saved when asked or sampled;
    the answer's JSON. The API's and the MCP server's recall both answer through it."""
    try:
        profile = RecallProfile.objects.resolve(data.get("profile"))
    except RecallProfile.DoesNotExist:
        known = ", ".join(RecallProfile.objects.values_list("name", flat=True)) or "default"
        message = f"no profile named {data['profile']!r}; known: {known}"
        raise rest.ApiError(404, message, {"profile": [message]}) from None
    try:
        result = recall(
            data["query"],
            scope=data["scope"],
            tools=data["tools"],
            limit=data.get("limit"),
            settings=profile.settings,
            profile=profile.name,
        )
    except SearchError as exc:
        raise exceptions.ValidationError({"query" if exc.field == "q" else exc.field: [str(exc)]}) from None
    traced = data.get("trace")
    if traced is None:
        traced = random.random() < (settings.MEMORYUI_RECALL_TRACE_RATE or 0.0)
    trace = RecallTrace.record(result, source=source, actor=actor, profile=profile) if traced else None
    with transaction.atomic():  # counted and logged, every recall; the log links the trace when there is one
        record_recall(result, actor=actor)
        RecallLogEntry.objects.record_result(result, source=source, trace=trace)
    answer = {**result.to_dict(full=data.get("explain", False)), "trace_id": str(trace.pk) if trace else None}
    if data.get("why"):  # a full id by now, of a memory the caller may see (RecallRequestSerializer)
        answer["why"] = [{"stage": stage, "text": text} for stage, text in why_not(result, data["why"])]
    return answer


# --- traces ------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        summary="Saved recall traces, newest first",
        description="A token sees the traces of its own scopes only. Filter them as the trace list page does: by "
        "outcome (answered, silent, or the path that answered), source, profile, the query's words, and a time "
        "window (`within`) or range (`since`, `until`); each trace carries `answered`, `latency_ms` and `block_size`.",
        responses={200: RecallTraceSerializer(many=True), **rest.errors(400, 401)},
    ),
    retrieve=extend_schema(
        summary="A recall trace with every candidate and decision",
        responses={200: RecallTraceDetailSerializer, **rest.errors(401, 404)},
    ),
)
class RecallTraceViewSet(viewsets.GenericViewSet):
    serializer_class = RecallTraceSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = RecallTraceFilterSet
    lookup_value_converter = "uuid"
    queryset = RecallTrace.objects.all()

    def get_queryset(self):
        traces = RecallTrace.objects.order_by("-created_at", "-pk")
        scopes = rest.visible_scopes(self.request)
        return traces if scopes is None else traces.filter(scope__in=scopes)

    def list(self, request):
        traces = self.filter_queryset(self.get_queryset().defer("result", "knobs"))
        page = self.paginate_queryset(traces)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request, pk):
        trace = self.get_queryset().filter(pk=pk).first()
        if trace is None:
            raise exceptions.NotFound("No recall trace with this id in the scopes you can see.")
        return Response(RecallTraceDetailSerializer(trace, context=self.get_serializer_context()).data)


# --- profiles ----------------------------------------------------------------------------


class SessionWritesOnly(permissions.BasePermission):
    """Profiles change every agent's recall: tokens may read them, only a signed-in person changes them
    (and only an admin: the viewset's `write_role`)."""

    message = "API tokens may read recall profiles but not change them; sign in to the dashboard instead."

    def has_permission(self, request, view) -> bool:
        return request.method in permissions.SAFE_METHODS or not isinstance(request.auth, ApiToken)


PROFILE_WRITE_ERRORS = {
    **rest.errors(400, 401),
    403: OpenApiResponse(
        ErrorSerializer, description="forbidden: only a signed-in admin changes profiles; API tokens cannot"
    ),
}


@extend_schema_view(
    list=extend_schema(summary="Recall profiles", responses={200: ProfileSerializer(many=True), **rest.errors(401)}),
    retrieve=extend_schema(summary="A recall profile", responses={200: ProfileSerializer, **rest.errors(401, 404)}),
    create=extend_schema(
        summary="Create a recall profile (signed-in admins only)",
        request=ProfileSerializer,
        responses={201: ProfileSerializer, **PROFILE_WRITE_ERRORS},
    ),
    update=extend_schema(
        summary="Replace a recall profile (signed-in admins only)",
        description="The `default` profile keeps its name.",
        request=ProfileSerializer,
        responses={200: ProfileSerializer, **PROFILE_WRITE_ERRORS, **rest.errors(404)},
    ),
    partial_update=extend_schema(
        summary="Change some of a recall profile (signed-in admins only)",
        description="`knobs` are merged into the stored ones; a knob set to null goes back to its default.",
        request=ProfileSerializer(partial=True),
        responses={200: ProfileSerializer, **PROFILE_WRITE_ERRORS, **rest.errors(404)},
    ),
    destroy=extend_schema(
        summary="Delete a recall profile (signed-in admins only)",
        description="Traces that used it keep its name. The `default` profile cannot be deleted.",
        responses={
            204: None,
            **PROFILE_WRITE_ERRORS,
            **rest.errors(404),
            409: OpenApiResponse(ErrorSerializer, description="conflict: the default profile cannot be deleted"),
        },
    ),
)
class RecallProfileViewSet(rest.WriteTransactionMixin, viewsets.GenericViewSet):
    serializer_class = ProfileSerializer
    permission_classes = [permissions.IsAuthenticated, SessionWritesOnly, roles.RolePermission]
    write_role = roles.Role.ADMIN
    pagination_class = None
    lookup_field = "name"
    lookup_value_converter = "str"
    queryset = RecallProfile.objects.all()

    def get_object(self, *, lock: bool = False) -> RecallProfile:
        name = self.kwargs["name"]
        if name == DEFAULT_PROFILE:
            RecallProfile.objects.resolve(DEFAULT_PROFILE)  # exists from the first use on
        profiles = RecallProfile.objects.select_for_update() if lock else RecallProfile.objects.all()
        profile = profiles.filter(name=name).first()
        if profile is None:
            raise exceptions.NotFound(f"No recall profile named {name!r}.")
        return profile

    def list(self, request):
        RecallProfile.objects.resolve(DEFAULT_PROFILE)
        return Response(self.get_serializer(RecallProfile.objects.all(), many=True).data)

    def retrieve(self, request, name):
        return Response(self.get_serializer(self.get_object()).data)

    def create(self, request):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        profile = _saved(body, lambda: self.get_serializer(data=request.data).is_valid(raise_exception=True))
        data = self.get_serializer(profile).data
        return Response(data, status=201, headers={"Location": data["url"]})

    def _edit(self, request, *, partial: bool) -> Response:
        profile = self.get_object(lock=True)
        body = self.get_serializer(profile, data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        again = self.get_serializer(profile, data=request.data, partial=partial)
        profile = _saved(body, lambda: again.is_valid(raise_exception=True))
        return Response(self.get_serializer(profile).data)

    def update(self, request, name):
        return self._edit(request, partial=False)

    def partial_update(self, request, name):
        return self._edit(request, partial=True)

    def destroy(self, request, name):
        if name == DEFAULT_PROFILE:
            raise rest.ApiError(
                409,
                "The default profile cannot be deleted: recalls that name no profile use it.",
                {"name": ["the default profile cannot be deleted"]},
            )
        self.get_object().delete()
        return Response(status=204)


def _saved(body, checked_again):
    """`body.save()`; when another request took the name meanwhile (the unique index refuses it),
    `checked_again()` refuses the name as any taken name is refused, instead of a 500."""
    try:
        with transaction.atomic():  # a savepoint: the request's transaction goes on after a refusal
            return body.save()
    except IntegrityError:
        checked_again()  # against the rows as they are now
        raise


# --- golden sets -------------------------------------------------------------------------


def _evaluation_data(evaluation: golden.Evaluation) -> dict:
    return {
        "profile": evaluation.profile,
        "limit": evaluation.limit,
        "metrics": evaluation.metrics,
        "outcomes": [
            {**asdict(outcome), "passed": outcome.passed, "unexpected": outcome.unexpected}
            for outcome in evaluation.outcomes
        ],
    }


def _check_name_free(name: str, scope: str, *, but: GoldenSet | None = None) -> None:
    """409 when another golden set of `scope` (one the caller may write to) has this name."""
    taken = GoldenSet.objects.filter(scope=scope, name=name)
    if but is not None:
        taken = taken.exclude(pk=but.pk)
    if taken.exists():
        message = f"{scope} already has a golden set named {name!r}"
        raise rest.ApiError(409, message, {"name": [message]})


@extend_schema_view(
    list=extend_schema(
        summary="Golden sets in your scopes", responses={200: GoldenSetSerializer(many=True), **rest.errors(401)}
    ),
    create=extend_schema(
        summary="Create a golden set",
        request=GoldenSetSerializer,
        responses={201: GoldenSetDetailSerializer, **rest.errors(400, 401, 403, 409)},
    ),
    retrieve=extend_schema(
        summary="A golden set with its queries", responses={200: GoldenSetDetailSerializer, **rest.errors(401, 404)}
    ),
    partial_update=extend_schema(
        summary="Change a golden set",
        description="A new scope must hold every expected memory of the set's queries.",
        request=GoldenSetSerializer(partial=True),
        responses={200: GoldenSetDetailSerializer, **rest.errors(400, 401, 403, 404, 409)},
    ),
    destroy=extend_schema(
        summary="Delete a golden set and its queries", responses={204: None, **rest.errors(401, 403, 404)}
    ),
)
class GoldenSetViewSet(rest.WriteTransactionMixin, viewsets.GenericViewSet):
    """Golden sets of the caller's scopes; a token cannot see or touch the others (404)."""

    serializer_class = GoldenSetSerializer
    pagination_class = None
    lookup_value_converter = "int"
    queryset = GoldenSet.objects.all()
    throttle_scope = None  # `run` is "expensive" (api.throttling); the rest count as any call

    def dispatch(self, request, *args, **kwargs):
        if self.action_map.get(request.method.lower()) == "run":
            # A run records nothing and recalls every query of the set (seconds, with an LLM more):
            # it must not hold the write transaction (on SQLite the database's write lock) meanwhile.
            return super(rest.WriteTransactionMixin, self).dispatch(request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)

    def access_needed(self, request) -> roles.Need:
        if self.action == "run":
            return roles.Need(roles.Role.EDITOR, writes=False)  # an editor's, but it records nothing
        return roles.method_need(request)

    def get_queryset(self):
        scopes = rest.visible_scopes(self.request)
        return GoldenSet.objects.all() if scopes is None else GoldenSet.objects.filter(scope__in=scopes)

    def get_object(self, *, lock: bool = False) -> GoldenSet:
        sets = self.get_queryset().select_for_update() if lock else self.get_queryset()
        golden_set = sets.filter(pk=self.kwargs["pk"]).first()
        if golden_set is None:
            raise exceptions.NotFound("No golden set with this id in the scopes you can see.")
        return golden_set

    def _answer(self, golden_set: GoldenSet, status_code: int = 200) -> Response:
        data = GoldenSetDetailSerializer(golden_set, context=self.get_serializer_context()).data
        headers = {"Location": data["url"]} if status_code == 201 else None
        return Response(data, status=status_code, headers=headers)

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    def create(self, request):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        rest.check_writable_scope(request, body.validated_data["scope"])
        name, scope = body.validated_data["name"], body.validated_data["scope"]
        _check_name_free(name, scope)
        return self._answer(_saved(body, lambda: _check_name_free(name, scope)), status_code=201)

    def retrieve(self, request, pk):
        return self._answer(self.get_object())

    def partial_update(self, request, pk):
        golden_set = self.get_object(lock=True)
        body = self.get_serializer(golden_set, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        scope = body.validated_data.get("scope", golden_set.scope)
        if scope != golden_set.scope:
            rest.check_writable_scope(request, scope)
        name = body.validated_data.get("name", golden_set.name)
        _check_name_free(name, scope, but=golden_set)
        if scope != golden_set.scope:
            expected = {pk for query in golden_set.queries.all() for pk in query.expected_ids}
            elsewhere = Memory.objects.filter(pk__in=expected).exclude(scope=scope).count()
            if elsewhere:
                raise exceptions.ValidationError(
                    {"scope": [f"{elsewhere} expected memories of this set's queries are not in {scope}"]}
                )
        return self._answer(_saved(body, lambda: _check_name_free(name, scope, but=golden_set)))

    def destroy(self, request, pk):
        self.get_object().delete()
        return Response(status=204)

    @extend_schema(
        summary="Add a query to a golden set",
        request=GoldenQuerySerializer,
        responses={201: GoldenQuerySerializer, **rest.errors(400, 401, 403, 404)},
    )
    @action(detail=True, methods=["post"])
    def queries(self, request, pk):
        golden_set = self.get_object()
        context = {**self.get_serializer_context(), "golden_set": golden_set}
        body = GoldenQuerySerializer(data=request.data, context=context)
        body.is_valid(raise_exception=True)
        query = body.save(golden_set=golden_set)
        return Response(GoldenQuerySerializer(query, context=context).data, status=201)

    @extend_schema(summary="Remove a query from a golden set", responses={204: None, **rest.errors(401, 403, 404)})
    @action(detail=True, methods=["delete"], url_path="queries/<int:query_id>", url_name="query")
    def delete_query(self, request, pk, query_id):
        deleted, _ = GoldenQuery.objects.filter(golden_set=self.get_object(), pk=query_id).delete()
        if not deleted:
            raise exceptions.NotFound("This golden set has no query with this id.")
        return Response(status=204)

    @extend_schema(
        summary="Score a golden set with a profile (and compare with another)",
        description="Each query is recalled as an agent's would be with the profile's knobs, but nothing is "
        "recorded: no access counts, no events, no traces. `movements` says, per query, which memories moved in "
        "or out going from `profile` to `compare`.",
        request=GoldenRunRequestSerializer,
        responses={200: GoldenRunSerializer, **rest.errors(400, 401, 403, 404, 503)},
    )
    @action(detail=True, methods=["post"], throttle_scope="expensive")
    def run(self, request, pk):
        golden_set = self.get_object()
        body = GoldenRunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        names = {"profile": body.validated_data["profile"], "compare": body.validated_data.get("compare") or None}
        profiles, problems = {}, {}
        for field_name, name in names.items():
            if name is None:
                continue
            try:
                profiles[field_name] = RecallProfile.objects.resolve(name)
            except RecallProfile.DoesNotExist:
                known = ", ".join(RecallProfile.objects.values_list("name", flat=True))
                problems[field_name] = [f"no profile named {name!r}; known: {known}"]
        if problems:
            raise rest.ApiError(404, "No profile of that name.", problems)
        first = golden.evaluate(golden_set, profiles["profile"].settings, profile=profiles["profile"].name)
        answer = {**_evaluation_data(first), "compare": None, "movements": None}
        if second_profile := profiles.get("compare"):
            second = (
                first
                if second_profile.pk == profiles["profile"].pk
                else golden.evaluate(golden_set, second_profile.settings, profile=second_profile.name)
            )
            answer["compare"] = _evaluation_data(second)
            answer["movements"] = [asdict(movement) for movement in golden.compare(first, second)]
        return Response(answer)
