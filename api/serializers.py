"""REST API serializers.

Memory input is validated by `rules.clean_memory_fields`, the single source of truth for the
write rules; the fields declared on the input serializers only describe it in the schema.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from rest_framework import serializers

from memoryui import rules
from memoryui.models import ApiToken, Memory, MemoryEvent

BULK_MAX_IDS = 1000
BULK_ACTIONS = Memory.BULK_ACTIONS


def as_plain_dict(data) -> dict:
    """A request body as a plain dict, or a validation error when it is not a JSON object."""
    if not isinstance(data, Mapping):
        raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
    return data.dict() if hasattr(data, "dict") else dict(data)


def not_strings(fields: Mapping[str, serializers.Field], data: Mapping) -> dict[str, list[str]]:
    """Where a text field (or a list of texts) of `fields` was given something else than a string,
    or a boolean field something else than true or false.

    DRF's CharField turns a number into its digits: `"scope": 123` would become the scope
    agent:123. Text is only ever taken from a JSON string.
    """
    problems: dict[str, list[str]] = {}
    for name, field in fields.items():
        value = data.get(name)
        if field.read_only or value is None:
            continue  # absent, or null (which the field's allow_null decides)
        if isinstance(field, serializers.CharField) and not isinstance(value, str):
            problems[name] = [f"must be a string, got {type(value).__name__}"]
        elif isinstance(field, serializers.BooleanField) and not isinstance(value, bool):
            # DRF reads 0, 1, "yes" and "off" as booleans too; JSON has true and false.
            problems[name] = [f"must be true or false, got {type(value).__name__}"]
        elif isinstance(field, serializers.ListField) and isinstance(field.child, serializers.CharField):
            bad = [i for i, item in enumerate(value) if not isinstance(item, str)] if isinstance(value, list) else []
            if bad:
                problems[name] = [f"item {i} must be a string, got {type(value[i]).__name__}" for i in bad[:5]]
    return problems


class StrictSerializer(serializers.Serializer):
    """Rejects keys it does not declare instead of dropping them silently, and anything but a
    string where it takes text."""

    def to_internal_value(self, data):
        data = as_plain_dict(data)
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["is not an accepted field"] for name in unknown})
        if problems := not_strings(self.fields, data):
            raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


class MemorySerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:memory-detail")

    class Meta:
        model = Memory
        fields = [
            "id", "url", "scope", "kind", "tier", "text", "importance", "confidence", "pinned", "status",
            "tombstone_reason", "tombstoned_at", "source", "entity_key", "content_hash", "access_count",
            "accessed_at", "expires_at", "metadata", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class MemoryWriteResultSerializer(MemorySerializer):
    """The memory a POST produced: new (201), or the existing one a duplicate was merged into (200)."""

    merged = serializers.BooleanField(
        read_only=True, help_text="True when the write was a duplicate and was merged into an existing memory."
    )
    merged_into = serializers.UUIDField(
        read_only=True, allow_null=True, help_text="The id of the memory the duplicate was merged into, else null."
    )

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "merged", "merged_into"]
        read_only_fields = fields


class MemoryInputSerializer(serializers.Serializer):
    """Writable memory fields. On create scope, kind and text are required; on PATCH nothing is.
    Only entity_key and expires_at take null (no key, no expiry); a null anywhere else is refused,
    never read as "unchanged"."""

    scope = serializers.CharField(help_text="e.g. agent:main, user:42, global; a bare id means agent:<id>.")
    kind = serializers.ChoiceField(choices=Memory.Kind.choices)
    text = serializers.CharField(help_text="One self-contained statement; at most MEMORYUI_TEXT_MAX_LENGTH chars.")
    tier = serializers.ChoiceField(
        choices=Memory.Tier.choices, required=False, help_text="Derived from kind if omitted."
    )
    importance = serializers.FloatField(min_value=0, max_value=1, required=False)
    confidence = serializers.FloatField(min_value=0, max_value=1, required=False)
    pinned = serializers.BooleanField(required=False)
    source = serializers.ChoiceField(choices=Memory.Source.choices, required=False)
    entity_key = serializers.CharField(
        required=False, allow_null=True, help_text="type:value, e.g. phone:186…; null removes the key."
    )
    metadata = serializers.DictField(required=False)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)

    def to_internal_value(self, data):
        try:
            return rules.clean_memory_fields(
                as_plain_dict(data),
                partial=self.partial,
                text_max_length=settings.MEMORYUI_TEXT_MAX_LENGTH,
                refuse_null=True,
            )
        except rules.MemoryValidationError as exc:
            raise serializers.ValidationError(exc.errors) from None


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, trim_whitespace=True)


class TombstoneSerializer(StrictSerializer):
    reason = serializers.CharField(help_text="Why the memory is removed; kept in its history.")


class BulkActionSerializer(StrictSerializer):
    action = serializers.ChoiceField(choices=BULK_ACTIONS)
    ids = serializers.ListField(
        child=serializers.UUIDField(), allow_empty=False, max_length=BULK_MAX_IDS, help_text="At most 1000 ids."
    )
    reason = serializers.CharField(required=False, allow_blank=True, help_text="Required for tombstone.")
    tier = serializers.ChoiceField(choices=Memory.Tier.choices, required=False, help_text="Required for set_tier.")

    def to_internal_value(self, data):
        ids = data.get("ids") if isinstance(data, Mapping) else None
        # Refuse an oversized list before validating each of its items.
        if isinstance(ids, list) and len(ids) > BULK_MAX_IDS:
            raise serializers.ValidationError(
                {"ids": [f"at most {BULK_MAX_IDS} ids per request, got {len(ids)}; split the batch"]}
            )
        return super().to_internal_value(data)

    def validate(self, attrs):
        if attrs["action"] == "tombstone" and not attrs.get("reason", "").strip():
            raise serializers.ValidationError({"reason": ["is required to tombstone"]})
        if attrs["action"] == "set_tier" and not attrs.get("tier"):
            raise serializers.ValidationError({"tier": ["is required for set_tier"]})
        attrs["ids"] = list(dict.fromkeys(attrs["ids"]))
        return attrs


class BulkResultSerializer(serializers.Serializer):
    batch = serializers.UUIDField(help_text="Every event of this bulk action carries this batch id.")
    action = serializers.ChoiceField(choices=BULK_ACTIONS)
    changed = serializers.IntegerField()
    unchanged = serializers.IntegerField(help_text="Memories that were already in the requested state.")


class EventSerializer(serializers.ModelSerializer):
    memory = serializers.UUIDField(source="memory_id", read_only=True)

    class Meta:
        model = MemoryEvent
        fields = ["id", "memory", "action", "actor", "before", "after", "reason", "batch", "created_at"]
        read_only_fields = fields


def _counts_serializer(name: str, keys: tuple[str, ...]) -> type[serializers.Serializer]:
    fields = {key: serializers.IntegerField() for key in keys}
    return type(name, (serializers.Serializer,), fields)


class StatsSerializer(serializers.Serializer):
    """Counts over active memories; every kind and tier is always present (zero-filled)."""

    total = serializers.IntegerField(help_text="Active memories.")
    by_kind = _counts_serializer("KindCountsSerializer", rules.KINDS)()
    by_tier = _counts_serializer("TierCountsSerializer", rules.TIERS)()
    by_scope = serializers.DictField(child=serializers.IntegerField(), help_text="Active memories per scope.")
    pinned = serializers.IntegerField()
    tombstoned = serializers.IntegerField()


class TokenSerializer(serializers.ModelSerializer):
    is_revoked = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id", "name", "key_prefix", "scopes", "access", "created_at", "last_used_at", "revoked_at", "is_revoked",
        ]  # fmt: skip
        read_only_fields = fields


class TokenIssuedSerializer(TokenSerializer):
    key = serializers.CharField(read_only=True, help_text="The raw token: shown once, never stored.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "key"]
        read_only_fields = fields


class TokenCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=ApiToken._meta.get_field("name").max_length)
    scopes = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Scopes the token may see; empty = every scope (admins only).",
    )
    access = serializers.ChoiceField(
        choices=ApiToken.Access.choices,
        required=False,
        help_text="read: reads and recalls only; write (editors and admins): may also change memories. "
        "Default: the most the caller may issue.",
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="invalid, unauthorized, forbidden, not_found, conflict, …")
    message = serializers.CharField()
    details = serializers.DictField(help_text="For `invalid`: field name → list of reasons.")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


class SearchHitSerializer(serializers.Serializer):
    """One ranked candidate with why it ranks where it does and how far it can be trusted."""

    id = serializers.UUIDField()
    text = serializers.CharField()
    kind = serializers.ChoiceField(choices=Memory.Kind.choices)
    tier = serializers.ChoiceField(choices=Memory.Tier.choices)
    scope = serializers.CharField()
    pinned = serializers.BooleanField()
    importance = serializers.FloatField()
    score = serializers.FloatField(help_text="Ranking score: the fused score plus the rerank adjustments.")
    label = serializers.ChoiceField(
        choices=["strong", "weak", "below_floor"], help_text="The answerability decision's label for this candidate."
    )
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Why it has its label, with the values.")
    vector_rank = serializers.IntegerField(allow_null=True, help_text="1-based; null when the vector index missed it.")
    vector_similarity = serializers.FloatField(allow_null=True, help_text="Cosine similarity to the query.")
    vector_anchor = serializers.FloatField(
        allow_null=True, help_text="The query's similarity to unrelated everyday text in the memory's script."
    )
    vector_margin = serializers.FloatField(allow_null=True, help_text="Similarity minus the anchor.")
    bm25_rank = serializers.IntegerField(allow_null=True, help_text="1-based; null when BM25 missed it.")
    bm25_score = serializers.FloatField(allow_null=True)
    bm25_coverage = serializers.FloatField(
        allow_null=True, help_text="Share of the query's terms (weighted by rarity) the memory holds."
    )
    fused = serializers.FloatField(help_text="The fusion function's score: the sum of the contributions.")
    contributions = serializers.DictField(
        child=serializers.FloatField(), help_text="Each retriever's share of the fused score: vector, bm25."
    )
    adjustments = serializers.DictField(
        child=serializers.FloatField(), help_text="Rerank adjustments: tier, pinned, importance, recency."
    )


class AnswerSerializer(serializers.Serializer):
    answered = serializers.BooleanField(help_text="Whether the store answers the query at all.")
    reason = serializers.CharField()
    signals = serializers.DictField(help_text="What the decision read: strong and weak counts, best margin, coverage.")


class SearchResultSerializer(serializers.Serializer):
    query = serializers.CharField(help_text="The query as searched (whitespace collapsed, truncated if too long).")
    scopes = serializers.ListField(child=serializers.CharField(), allow_null=True, help_text="null: every scope.")
    retriever = serializers.ChoiceField(choices=["hybrid", "vector", "bm25"])
    limit = serializers.IntegerField(help_text="Results asked for, after clamping to 1..20.")
    floor = serializers.BooleanField(help_text="false: `results` are the raw ranking (floor=off).")
    answer = AnswerSerializer(allow_null=True)
    results = SearchHitSerializer(many=True)
    below_floor = SearchHitSerializer(
        many=True, help_text="The first ranked candidates that are not results: below the floor, or not answered."
    )
    fusion = serializers.DictField(help_text="The fusion function, in words, and each retriever's weight.")
    thresholds = serializers.DictField(help_text="The answerability thresholds applied.")
    notices = serializers.ListField(
        child=serializers.CharField(), help_text="What was changed or degraded: truncation, clamping, a missing index."
    )
    degraded = serializers.DictField(
        child=serializers.CharField(), help_text="Indexes that could not answer, with the reason."
    )
    timings_ms = serializers.DictField(child=serializers.FloatField(), help_text="Milliseconds per stage.")
    vector_searched = serializers.DictField(
        child=serializers.ChoiceField(choices=["exact", "hnsw"]),
        help_text="How each scope's vectors were searched: `exact` (every vector of a small scope) or `hnsw` "
        "(its graph).",
    )
