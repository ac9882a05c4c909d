"""REST endpoints of the read path under /api/recall/.

- `/api/recall/`: the full pipeline, for agents;
- `traces/`: saved recalls, read-only;
- `profiles/`: the tuning knobs; every caller reads them, only a signed-in person changes them
  (a profile changes every agent's recall);
- `golden/`: golden sets and their queries, and runs scoring a profile (or comparing two) on them.

A token sees the traces and golden sets of its own scopes only; the others answer 404.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import asdict

from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryui import rules
from memoryui.api import (
    ApiError,
    _choice_param,
    _scope_param,
    actor_for,
    check_writable_scope,
    errors,
    visible_scopes,
)
from memoryui.models import ApiToken, Memory
from memoryui.serializers import ErrorSerializer, StrictSerializer, as_plain_dict
from recall import golden
from recall.fusion import SettingsError
from recall.models import DEFAULT_PROFILE, GoldenQuery, GoldenSet, RecallProfile, RecallTrace
from recall.pipeline import DECISIONS, RecallSettings, recall, record_recall
from recall.search import SearchError
from recall.toolfilter import MAX_RECENT_TOOLS

MAX_TOOLS_SENT = 200


class RecallRequestSerializer(serializers.Serializer):
    query = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="What the agent's turn is about. `select:<id>,<id>` picks memories directly; `+word` is required.",
    )
    scope = serializers.CharField(help_text="The agent's scope, e.g. agent:main (a bare id means agent:<id>).")
    tools = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        max_length=MAX_TOOLS_SENT,
        help_text=f"Tools the agent used recently, most recent last; the last {MAX_RECENT_TOOLS} distinct ones count.",
    )
    limit = serializers.IntegerField(required=False, help_text="Memories recalled, 1..20 (default 5); clamped.")
    profile = serializers.CharField(required=False, help_text="A recall profile's name (default: `default`).")
    explain = serializers.BooleanField(
        required=False,
        default=False,
        help_text="true: every candidate with its full explanation (text, scores, both decisions); "
        "default: the candidates that cleared the floor and the best near misses, compactly.",
    )
    trace = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="true: save this recall as a trace; false: never; absent: the sampling rate decides.",
    )

    def validate_scope(self, value: str) -> str:
        try:
            return rules.normalize_scope(value)
        except rules.ScopeError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RecallSelectedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    text = serializers.CharField()
    kind = serializers.CharField()
    tier = serializers.CharField()
    score = serializers.FloatField(help_text="The heuristic's score.")
    age = serializers.CharField()


class RecallCandidateSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    decision = serializers.ChoiceField(choices=DECISIONS, help_text="What the answering path decided.")
    reasons = serializers.ListField(child=serializers.CharField())
    score = serializers.FloatField(help_text="The heuristic's score.")
    fused_score = serializers.FloatField()
    vector_rank = serializers.IntegerField(allow_null=True)
    bm25_rank = serializers.IntegerField(allow_null=True)
    heuristic = serializers.DictField(required=False, help_text="With explain: the heuristic's decision and reasons.")
    selector = serializers.DictField(
        required=False, allow_null=True, help_text="With explain: the selector's, when it answered."
    )
    adjustments = serializers.DictField(child=serializers.FloatField(), required=False, help_text="With explain.")
    dropped_by = serializers.ListField(child=serializers.CharField(), required=False, help_text="With explain.")


class RecallResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    scope = serializers.CharField()
    tools = serializers.ListField(child=serializers.CharField(), help_text="The recent tools as used, bounded.")
    limit = serializers.IntegerField()
    profile = serializers.CharField()
    mode = serializers.ChoiceField(choices=["selector", "heuristic", "select"], help_text="Which path answered.")
    fallback_reason = serializers.CharField(allow_null=True, help_text="Why the selector did not answer.")
    selected = RecallSelectedSerializer(many=True)
    candidates = RecallCandidateSerializer(many=True)
    block = serializers.CharField(help_text="The ephemeral recall block: for this turn only, never store it.")
    notices = serializers.ListField(child=serializers.CharField())
    degraded = serializers.DictField(child=serializers.CharField())
    timings_ms = serializers.DictField(child=serializers.FloatField())
    trace_id = serializers.UUIDField(allow_null=True, help_text="The saved trace, when this recall was traced.")


class RecallView(APIView):
    @extend_schema(
        summary="Recall memories for an agent's turn",
        description=(
            "The full recall pipeline: hybrid retrieval with its relevance floor, the model selector when an LLM "
            "is configured (within MEMORYUI_SELECTOR_TIMEOUT_MS, else the heuristic answers and "
            "`fallback_reason` says why), the active-tool filter on both paths, and the recall block to show the "
            "model for this turn only. Every candidate carries its decision and reasons. The recalled memories' "
            "access counts are bumped."
        ),
        request=RecallRequestSerializer,
        responses={200: RecallResponseSerializer, **errors(400, 401, 403, 503)},
    )
    def post(self, request):
        body = RecallRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        allowed = visible_scopes(request)
        if allowed is not None and data["scope"] not in allowed:
            raise ApiError(
                403,
                f"This token may not read scope {data['scope']}.",
                {"scope": [f"{data['scope']} is outside this token's scopes: {', '.join(allowed)}"]},
            )
        try:
            profile = RecallProfile.objects.resolve(data.get("profile"))
        except RecallProfile.DoesNotExist:
            known = ", ".join(RecallProfile.objects.values_list("name", flat=True)) or "default"
            raise exceptions.ValidationError(
                {"profile": [f"no profile named {data['profile']!r}; known: {known}"]}
            ) from None
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
        actor = actor_for(request)
        record_recall(result, actor=actor)
        traced = data["trace"]
        if traced is None:
            traced = random.random() < (settings.MEMORYUI_RECALL_TRACE_RATE or 0.0)
        trace = RecallTrace.record(result, source="api", actor=actor, profile=profile) if traced else None
        return Response({**result.to_dict(full=data["explain"]), "trace_id": str(trace.pk) if trace else None})


# --- traces ------------------------------------------------------------------------------

TRACE_MODES = ("selector", "heuristic", "select")


class RecallTraceSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:recall-trace-detail")
    # Plain strings, not enums: `source` would clash with the memory's SourceEnum in the schema.
    source = serializers.CharField(help_text="Where the recall ran: api, cli or playground.")
    mode = serializers.CharField(help_text="Which path answered: selector, heuristic or select.")

    class Meta:
        model = RecallTrace
        fields = [
            "id", "url", "created_at", "source", "actor", "scope", "query", "tools", "limit", "profile_name",
            "mode", "fallback_reason", "selected_ids", "note",
        ]  # fmt: skip
        read_only_fields = fields


class RecallTraceDetailSerializer(RecallTraceSerializer):
    knobs = serializers.DictField(help_text="Every knob the recall ran with.")
    result = serializers.DictField(help_text="The recall as /api/recall/ answered it: candidates, decisions, block.")

    class Meta(RecallTraceSerializer.Meta):
        fields = [*RecallTraceSerializer.Meta.fields, "knobs", "result"]
        read_only_fields = fields


@extend_schema_view(
    list=extend_schema(
        summary="Saved recall traces, newest first",
        description="A token sees the traces of its own scopes only.",
        parameters=[
            OpenApiParameter("scope", str, description="Only this scope; `main` means `agent:main`."),
            OpenApiParameter("source", str, enum=list(RecallTrace.Source.values), description="Only this source."),
            OpenApiParameter("mode", str, enum=list(TRACE_MODES), description="Only recalls this path answered."),
        ],
        responses={200: RecallTraceSerializer(many=True), **errors(400, 401)},
    ),
    retrieve=extend_schema(
        summary="A recall trace with every candidate and decision",
        responses={200: RecallTraceDetailSerializer, **errors(401, 404)},
    ),
)
class RecallTraceViewSet(viewsets.GenericViewSet):
    serializer_class = RecallTraceSerializer
    lookup_value_converter = "uuid"
    queryset = RecallTrace.objects.all()

    def get_queryset(self):
        traces = RecallTrace.objects.order_by("-created_at", "-pk")
        scopes = visible_scopes(self.request)
        return traces if scopes is None else traces.filter(scope__in=scopes)

    def list(self, request):
        params, problems = request.query_params, {}
        traces = self.get_queryset().defer("result", "knobs")
        if scope := params.get("scope"):
            traces = traces.filter(scope=_scope_param(scope, problems))
        if source := params.get("source"):
            traces = traces.filter(source=_choice_param("source", source, tuple(RecallTrace.Source.values), problems))
        if mode := params.get("mode"):
            traces = traces.filter(mode=_choice_param("mode", mode, TRACE_MODES, problems))
        if problems:
            raise exceptions.ValidationError(problems)
        page = self.paginate_queryset(traces)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request, pk):
        trace = self.get_queryset().filter(pk=pk).first()
        if trace is None:
            raise exceptions.NotFound("No recall trace with this id in the scopes you can see.")
        return Response(RecallTraceDetailSerializer(trace, context=self.get_serializer_context()).data)


# --- profiles ----------------------------------------------------------------------------


def stored_knobs(knobs: dict) -> dict:
    """The knobs to store: validated (SettingsError otherwise), only those differing from the defaults."""
    effective, defaults = RecallSettings.from_dict(knobs).to_dict(), RecallSettings().to_dict()
    return {name: effective[name] for name in knobs if effective[name] != defaults[name]}


class ProfileSerializer(StrictSerializer, serializers.ModelSerializer):
    """A profile. Knob errors are reported one knob at a time, as `knobs.<knob>` in the error details."""

    url = serializers.HyperlinkedIdentityField(view_name="api:recall-profile-detail", lookup_field="name")
    knobs = serializers.DictField(
        required=False,
        help_text="The knobs that differ from the built-in defaults. Writing: a knob set to null takes its "
        "default; on PATCH the given knobs are merged into the stored ones, on PUT they replace them.",
    )
    settings = serializers.DictField(
        source="settings.to_dict", read_only=True, help_text="Every knob, as recalls with this profile use it."
    )

    class Meta:
        model = RecallProfile
        fields = ["name", "url", "description", "knobs", "settings", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate_name(self, value: str) -> str:
        if self.instance and self.instance.name == DEFAULT_PROFILE and value != DEFAULT_PROFILE:
            raise serializers.ValidationError(
                "The default profile cannot be renamed: recalls that name no profile use it."
            )
        return value

    def to_internal_value(self, data):
        data = as_plain_dict(data)
        problems: dict = {}
        try:
            values = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            problems, values = dict(exc.detail), None
        knobs = data.get("knobs")
        if isinstance(knobs, Mapping) and "knobs" not in problems:
            base = dict(self.instance.knobs or {}) if self.instance and self.partial else {}
            merged = {name: value for name, value in {**base, **knobs}.items() if value is not None}
            try:
                knobs = stored_knobs(merged)
            except SettingsError as exc:
                problems.update({f"knobs.{name}": messages for name, messages in exc.errors.items()})
            else:
                if values is not None:
                    values["knobs"] = knobs
        if problems:
            raise serializers.ValidationError(problems)
        return values


class SessionWritesOnly(permissions.BasePermission):
    """Profiles change every agent's recall: tokens may read them, only a signed-in person changes them."""

    message = "API tokens may read recall profiles but not change them; sign in to the dashboard instead."

    def has_permission(self, request, view) -> bool:
        return request.method in permissions.SAFE_METHODS or not isinstance(request.auth, ApiToken)


PROFILE_WRITE_ERRORS = {
    **errors(400, 401),
    403: OpenApiResponse(ErrorSerializer, description="forbidden: API tokens cannot change profiles"),
}


@extend_schema_view(
    list=extend_schema(summary="Recall profiles", responses={200: ProfileSerializer(many=True), **errors(401)}),
    retrieve=extend_schema(summary="A recall profile", responses={200: ProfileSerializer, **errors(401, 404)}),
    create=extend_schema(
        summary="Create a recall profile (signed-in users only)",
        request=ProfileSerializer,
        responses={201: ProfileSerializer, **PROFILE_WRITE_ERRORS},
    ),
    update=extend_schema(
        summary="Replace a recall profile (signed-in users only)",
        description="The `default` profile keeps its name.",
        request=ProfileSerializer,
        responses={200: ProfileSerializer, **PROFILE_WRITE_ERRORS, **errors(404)},
    ),
    partial_update=extend_schema(
        summary="Change some of a recall profile (signed-in users only)",
        description="`knobs` are merged into the stored ones; a knob set to null goes back to its default.",
        request=ProfileSerializer(partial=True),
        responses={200: ProfileSerializer, **PROFILE_WRITE_ERRORS, **errors(404)},
    ),
    destroy=extend_schema(
        summary="Delete a recall profile (signed-in users only)",
        description="Traces that used it keep its name. The `default` profile cannot be deleted.",
        responses={
            204: None,
            **PROFILE_WRITE_ERRORS,
            **errors(404),
            409: OpenApiResponse(ErrorSerializer, description="conflict: the default profile cannot be deleted"),
        },
    ),
)
class RecallProfileViewSet(viewsets.GenericViewSet):
    serializer_class = ProfileSerializer
    permission_classes = [permissions.IsAuthenticated, SessionWritesOnly]
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
        profile = body.save()
        data = self.get_serializer(profile).data
        return Response(data, status=201, headers={"Location": data["url"]})

    def _edit(self, request, *, partial: bool) -> Response:
        self.get_object()  # outside the transaction: the default profile exists even if this edit fails
        with transaction.atomic():
            body = self.get_serializer(self.get_object(lock=True), data=request.data, partial=partial)
            body.is_valid(raise_exception=True)
            profile = body.save()
        return Response(self.get_serializer(profile).data)

    def update(self, request, name):
        return self._edit(request, partial=False)

    def partial_update(self, request, name):
        return self._edit(request, partial=True)

    def destroy(self, request, name):
        if name == DEFAULT_PROFILE:
            raise ApiError(
                409,
                "The default profile cannot be deleted: recalls that name no profile use it.",
                {"name": ["the default profile cannot be deleted"]},
            )
        self.get_object().delete()
        return Response(status=204)


# --- golden sets -------------------------------------------------------------------------


class GoldenQuerySerializer(StrictSerializer, serializers.ModelSerializer):
    """A golden query. Expected ids must be memories of the set's scope (checked as the golden pages do)."""

    tools = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=MAX_TOOLS_SENT,
        help_text="Recent tools, most recent last.",
    )
    expected_ids = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        max_length=100,
        help_text="Memory ids recall should return (the first one recalled counts for top-1); empty: recall "
        "should return nothing.",
    )

    class Meta:
        model = GoldenQuery
        fields = ["id", "query", "tools", "expected_ids", "note", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate_expected_ids(self, value: list[str]) -> list[str]:
        golden_set: GoldenSet = self.context["golden_set"]
        ids, problems = [], []
        for raw in value:
            try:
                ids.append(str(uuid.UUID(raw)))
            except ValueError:
                problems.append(f"{raw[:40]!r} is not a memory id")
        # A token is told nothing about memories outside its scopes: they do not exist for it.
        memories = Memory.objects.for_scopes(visible_scopes(self.context["request"]))
        found = {str(pk): scope for pk, scope in memories.filter(pk__in=ids).values_list("pk", "scope")}
        for pk in ids:
            scope = found.get(pk)
            if scope is None:
                problems.append(f"no memory has the id {pk}")
            elif scope != golden_set.scope:
                problems.append(f"{pk} is in {scope}, not in this set's scope {golden_set.scope}")
        if problems:
            raise serializers.ValidationError(problems)
        return list(dict.fromkeys(ids))


class GoldenSetSerializer(StrictSerializer, serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:recall-golden-detail")
    query_count = serializers.IntegerField(source="queries.count", read_only=True)

    class Meta:
        model = GoldenSet
        fields = ["id", "url", "name", "scope", "description", "query_count", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate_scope(self, value: str) -> str:
        try:
            return rules.normalize_scope(value)
        except rules.ScopeError as exc:
            raise serializers.ValidationError(str(exc)) from None


class GoldenSetDetailSerializer(GoldenSetSerializer):
    queries = GoldenQuerySerializer(many=True, read_only=True)

    class Meta(GoldenSetSerializer.Meta):
        fields = [*GoldenSetSerializer.Meta.fields, "queries"]


class GoldenRunRequestSerializer(StrictSerializer):
    profile = serializers.CharField(required=False, default=DEFAULT_PROFILE, help_text="Default: `default`.")
    compare = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="A second profile to compare with."
    )


class GoldenOutcomeSerializer(serializers.Serializer):
    query_id = serializers.IntegerField()
    query = serializers.CharField()
    expected = serializers.ListField(child=serializers.CharField())
    recalled = serializers.ListField(child=serializers.CharField(), help_text="Memory ids, in recall order.")
    mode = serializers.CharField(help_text="Which path answered (empty when the query could not run).")
    fallback_reason = serializers.CharField(allow_null=True)
    error = serializers.CharField(help_text="Why the query could not run, else empty.")
    passed = serializers.BooleanField(
        help_text="Expected nothing and got nothing, or the first recalled memory is expected."
    )


class GoldenEvaluationSerializer(serializers.Serializer):
    profile = serializers.CharField()
    limit = serializers.IntegerField(help_text="The profile's limit: the k of recall@k.")
    metrics = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="recall@<limit>, top1, no_result_precision, no_result_recall; null when nothing to average.",
    )
    outcomes = GoldenOutcomeSerializer(many=True)


class GoldenMovementSerializer(serializers.Serializer):
    query_id = serializers.IntegerField()
    query = serializers.CharField()
    moved_in = serializers.ListField(child=serializers.CharField(), help_text="Recalled by `compare` only.")
    moved_out = serializers.ListField(child=serializers.CharField(), help_text="Recalled by `profile` only.")
    passed_a = serializers.BooleanField(help_text="Passed with `profile`.")
    passed_b = serializers.BooleanField(help_text="Passed with `compare`.")


class GoldenRunSerializer(GoldenEvaluationSerializer):
    compare = GoldenEvaluationSerializer(allow_null=True, help_text="The second profile's run, when compared.")
    movements = GoldenMovementSerializer(many=True, allow_null=True, help_text="Per query, when compared.")


def _evaluation_data(evaluation: golden.Evaluation) -> dict:
    return {
        "profile": evaluation.profile,
        "limit": evaluation.limit,
        "metrics": evaluation.metrics,
        "outcomes": [{**asdict(outcome), "passed": outcome.passed} for outcome in evaluation.outcomes],
    }


@extend_schema_view(
    list=extend_schema(
        summary="Golden sets in your scopes", responses={200: GoldenSetSerializer(many=True), **errors(401)}
    ),
    create=extend_schema(
        summary="Create a golden set",
        request=GoldenSetSerializer,
        responses={201: GoldenSetDetailSerializer, **errors(400, 401, 403)},
    ),
    retrieve=extend_schema(
        summary="A golden set with its queries", responses={200: GoldenSetDetailSerializer, **errors(401, 404)}
    ),
    partial_update=extend_schema(
        summary="Change a golden set",
        description="A new scope must hold every expected memory of the set's queries.",
        request=GoldenSetSerializer(partial=True),
        responses={200: GoldenSetDetailSerializer, **errors(400, 401, 403, 404)},
    ),
    destroy=extend_schema(summary="Delete a golden set and its queries", responses={204: None, **errors(401, 404)}),
)
class GoldenSetViewSet(viewsets.GenericViewSet):
    """Golden sets of the caller's scopes; a token cannot see or touch the others (404)."""

    serializer_class = GoldenSetSerializer
    pagination_class = None
    lookup_value_converter = "int"
    queryset = GoldenSet.objects.all()

    def get_queryset(self):
        scopes = visible_scopes(self.request)
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
        check_writable_scope(request, body.validated_data["scope"])
        return self._answer(body.save(), status_code=201)

    def retrieve(self, request, pk):
        return self._answer(self.get_object())

    def partial_update(self, request, pk):
        with transaction.atomic():
            golden_set = self.get_object(lock=True)
            body = self.get_serializer(golden_set, data=request.data, partial=True)
            body.is_valid(raise_exception=True)
            scope = body.validated_data.get("scope", golden_set.scope)
            if scope != golden_set.scope:
                check_writable_scope(request, scope)
                expected = {pk for query in golden_set.queries.all() for pk in query.expected_ids}
                elsewhere = Memory.objects.filter(pk__in=expected).exclude(scope=scope).count()
                if elsewhere:
                    raise exceptions.ValidationError(
                        {"scope": [f"{elsewhere} expected memories of this set's queries are not in {scope}"]}
                    )
            golden_set = body.save()
        return self._answer(golden_set)

    def destroy(self, request, pk):
        self.get_object().delete()
        return Response(status=204)

    @extend_schema(
        summary="Add a query to a golden set",
        request=GoldenQuerySerializer,
        responses={201: GoldenQuerySerializer, **errors(400, 401, 404)},
    )
    @action(detail=True, methods=["post"])
    def queries(self, request, pk):
        golden_set = self.get_object()
        context = {**self.get_serializer_context(), "golden_set": golden_set}
        body = GoldenQuerySerializer(data=request.data, context=context)
        body.is_valid(raise_exception=True)
        query = body.save(golden_set=golden_set)
        return Response(GoldenQuerySerializer(query, context=context).data, status=201)

    @extend_schema(summary="Remove a query from a golden set", responses={204: None, **errors(401, 404)})
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
        responses={200: GoldenRunSerializer, **errors(400, 401, 404, 503)},
    )
    @action(detail=True, methods=["post"])
    def run(self, request, pk):
        golden_set = self.get_object()
        body = GoldenRunRequestSerializer(data=request.data or {})
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
            raise exceptions.ValidationError(problems)
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
