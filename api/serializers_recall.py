"""Serializers of the read path's REST endpoints (api.recall): requests, answers, traces,
profiles and golden sets, so drf-spectacular documents what each endpoint takes and returns."""

from __future__ import annotations

from collections.abc import Mapping

from rest_framework import serializers

from api import rest
from api.serializers import StrictSerializer, as_plain_dict
from memoryui import memory_ids, rules
from recall import block, golden
from recall.knobs import RecallSettings
from recall.models import DEFAULT_PROFILE, GoldenQuery, GoldenSet, RecallProfile, RecallTrace
from recall.pipeline import DECISIONS
from recall.toolfilter import MAX_RECENT_TOOLS
from searchindex.fusion import SettingsError

MAX_TOOLS_SENT = 200


class RecallRequestSerializer(StrictSerializer):
    """An agent's recall request: an unknown key (a misspelt `tool`) is a 400, not ignored."""

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
    why = serializers.CharField(
        required=False,
        max_length=64,
        help_text=f"A memory's id, or its first {memory_ids.SHORT_ID_MIN} characters as the pages show them: the "
        "answer's `why` follows it through the stages to the one that dropped it (it may be tombstoned or of "
        "another scope: that is the answer).",
    )

    def validate_scope(self, value: str) -> str:
        try:
            return rules.normalize_scope(value)
        except rules.ScopeError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_why(self, value: str) -> str:
        # A token is told nothing about memories outside its scopes: they do not exist for it.
        request = self.context.get("request")
        scopes = rest.visible_scopes(request) if request is not None else []
        try:
            return str(memory_ids.resolve(value, scopes=scopes))
        except memory_ids.MemoryIdError as exc:
            if exc.code == "unknown":
                message = str(exc)
                raise rest.ApiError(404, f"{message[:1].upper()}{message[1:]}.", {"why": [message]}) from None
            raise serializers.ValidationError(str(exc)) from None


class RecallSelectedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    text = serializers.CharField()
    kind = serializers.CharField()
    tier = serializers.CharField()
    score = serializers.FloatField(help_text="The heuristic's score.")
    age = serializers.CharField()


class RecallPlacementSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="Its rank among the candidates the heuristic placed (1: the best).")
    code = serializers.ChoiceField(
        choices=block.CODES,
        help_text="best and close are in the block; the others say why not.",
    )
    share = serializers.FloatField(help_text="Its heuristic score over the best one's.")
    params = serializers.DictField(
        help_text="The numbers behind the code: the cut, the similar memory's rank, the limit."
    )
    kept = serializers.BooleanField()
    reason = serializers.CharField(help_text="The placement in words.")


class RecallCandidateSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    decision = serializers.ChoiceField(choices=DECISIONS, help_text="What the answering path decided.")
    reasons = serializers.ListField(child=serializers.CharField())
    reason_codes = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text='With explain: each of `reasons`, in the same order, as its code and parameters, `{"code": …, '
        "…}`; a reason that holds another (`floored`, `query_not_answered`, `block_left_out`) holds it under `why` "
        "as the same kind of object. `label_reason_codes` and `signal_codes` stand beside `label_reasons` and "
        "`signals` the same way.",
    )
    score = serializers.FloatField(help_text="The heuristic's score.")
    fused_score = serializers.FloatField()
    vector_rank = serializers.IntegerField(allow_null=True)
    bm25_rank = serializers.IntegerField(allow_null=True)
    block = RecallPlacementSerializer(
        allow_null=True,
        help_text="Whether the heuristic put it in the block, and why (null: the heuristic did not rank it).",
    )
    heuristic = serializers.DictField(
        required=False, help_text="With explain: the heuristic's decision, reasons and reason_codes."
    )
    selector = serializers.DictField(
        required=False, allow_null=True, help_text="With explain: the selector's, when it answered."
    )
    adjustments = serializers.DictField(child=serializers.FloatField(), required=False, help_text="With explain.")
    dropped_by = serializers.ListField(child=serializers.CharField(), required=False, help_text="With explain.")


class RecallWhyStageSerializer(serializers.Serializer):
    stage = serializers.CharField(help_text="memory, scope, select, retrieval, answerability, relevance floor, …")
    text = serializers.CharField(help_text="What happened to the memory there.")


class RecallResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    scope = serializers.CharField()
    tools = serializers.ListField(child=serializers.CharField(), help_text="The recent tools as used, bounded.")
    limit = serializers.IntegerField()
    profile = serializers.CharField()
    mode = serializers.ChoiceField(choices=["selector", "heuristic", "select"], help_text="Which path answered.")
    fallback_reason = serializers.CharField(allow_null=True, help_text="Why the selector did not answer.")
    fallback_reason_code = serializers.DictField(
        required=False,
        allow_null=True,
        help_text='With explain: `fallback_reason` as its code and parameters, `{"code": …, …}`.',
    )
    selected = RecallSelectedSerializer(many=True)
    candidates = RecallCandidateSerializer(many=True)
    block = serializers.CharField(help_text="The ephemeral recall block: for this turn only, never store it.")
    notices = serializers.ListField(child=serializers.CharField())
    degraded = serializers.DictField(child=serializers.CharField())
    timings_ms = serializers.DictField(child=serializers.FloatField())
    trace_id = serializers.UUIDField(allow_null=True, help_text="The saved trace, when this recall was traced.")
    why = RecallWhyStageSerializer(
        many=True,
        required=False,
        help_text="With `why`: the stages the memory went through, up to the one that dropped it.",
    )


TRACE_MODES = ("selector", "heuristic", "select")


class RecallTraceSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:recall-trace-detail")
    # Plain strings, not enums: `source` would clash with the memory's SourceEnum in the schema.
    source = serializers.CharField(help_text="Where the recall ran: api, cli, mcp or playground.")
    mode = serializers.CharField(help_text="Which path answered: selector, heuristic or select.")
    answered = serializers.BooleanField(help_text="The answerability decision: false when recall stayed silent.")
    latency_ms = serializers.FloatField(
        allow_null=True, help_text="The whole recall, in milliseconds (null: not timed)."
    )
    block_size = serializers.IntegerField(help_text="How many memories the agent was handed.")

    class Meta:
        model = RecallTrace
        fields = [
            "id", "url", "created_at", "source", "actor", "scope", "query", "tools", "limit", "profile_name",
            "mode", "fallback_reason", "answered", "latency_ms", "block_size", "selected_ids", "note",
        ]  # fmt: skip
        read_only_fields = fields


class RecallTraceDetailSerializer(RecallTraceSerializer):
    knobs = serializers.DictField(help_text="Every knob the recall ran with.")
    result = serializers.DictField(
        help_text="The recall as /api/recall/ answers it with explain: candidates, decisions, block. A trace saved "
        "before reasons had codes holds their words only (no `reason_codes`)."
    )

    class Meta(RecallTraceSerializer.Meta):
        fields = [*RecallTraceSerializer.Meta.fields, "knobs", "result"]
        read_only_fields = fields


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


class GoldenQuerySerializer(StrictSerializer, serializers.ModelSerializer):
    """A golden query. Expected ids (full, or the short ids the pages show) must be active memories of
    the set's scope (checked as the golden pages do); a query recall should stay silent on says so with
    `silent`, never with an empty list alone."""

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
        help_text=f"Memory ids recall should return (the first one recalled counts for top-1): full, or their first "
        f"{memory_ids.SHORT_ID_MIN} characters; answered as full ids. Empty or absent only with `silent`.",
    )
    silent = serializers.BooleanField(
        required=False,
        default=False,
        help_text="true: recall should return nothing for this query (then `expected_ids` is empty or absent).",
    )

    class Meta:
        model = GoldenQuery
        fields = ["id", "query", "tools", "expected_ids", "silent", "note", "created_at"]
        read_only_fields = ["id", "created_at"]

    def to_representation(self, instance: GoldenQuery) -> dict:
        data = super().to_representation(instance)
        data["silent"] = not instance.expected_ids
        return data

    def validate_expected_ids(self, value: list[str]) -> list[str]:
        golden_set: GoldenSet = self.context["golden_set"]
        if golden.says_nothing(value):
            raise serializers.ValidationError(
                f"{golden.NOTHING!r} is not a memory id: send `silent: true` for a query recall should stay silent on"
            )
        visible = rest.visible_scopes(self.context["request"])
        ids, problems = golden.resolve_expected(value, golden_set.scope, visible=visible)
        if any(problem.code != "unknown" for problem in problems):
            raise serializers.ValidationError([str(problem) for problem in problems])
        if problems:
            # Ids of no memory (the caller can see): a 404 naming them, as for any unknown id.
            typed = ", ".join(problem.typed[:40] for problem in problems[:5])
            raise rest.ApiError(404, f"No memory has {typed}.", {"expected_ids": [str(p) for p in problems]})
        return ids

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        expected, silent = attrs.get("expected_ids") or [], attrs.pop("silent", False)
        if silent and expected:
            raise serializers.ValidationError(
                {"silent": ["a query that should stay silent expects no memories: drop `expected_ids` or `silent`"]}
            )
        if not silent and not expected:
            raise serializers.ValidationError(
                {"expected_ids": ["list the memories recall should return, or send `silent: true` if it should "
                 "return nothing"]}
            )  # fmt: skip
        attrs["expected_ids"] = expected
        return attrs


class GoldenSetSerializer(StrictSerializer, serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:recall-golden-detail")
    query_count = serializers.IntegerField(source="queries.count", read_only=True)

    class Meta:
        model = GoldenSet
        fields = ["id", "url", "name", "scope", "description", "query_count", "created_at"]
        read_only_fields = ["id", "created_at"]
        # A name is unique within its scope; the view checks it once it knows the caller may write
        # there, so a name in a scope the caller cannot see is never reported (api.recall).
        validators = []

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
    tools = serializers.ListField(child=serializers.CharField(), help_text="The query's recent tools.")
    passed = serializers.BooleanField(
        help_text="Expected nothing and got nothing, or the first recalled memory is expected."
    )
    unexpected = serializers.ListField(
        child=serializers.CharField(), help_text="Recalled but not expected: what the block should not have held."
    )


class GoldenEvaluationSerializer(serializers.Serializer):
    profile = serializers.CharField()
    limit = serializers.IntegerField(help_text="The profile's limit: the k of recall@k.")
    metrics = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="recall@<limit>, block_precision, top1, no_result_precision, no_result_recall; null when nothing to "
        "average.",
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
