"""Recall profiles (named tuning knobs) and recall traces (one recall, every decision, kept for debugging)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from memoryui.models.fields import StoredJSONDecoder
from recall.knobs import RecallSettings
from searchindex.defaults import active_defaults
from searchindex.fusion import SettingsError

if TYPE_CHECKING:
    from recall.pipeline import RecallResult

DEFAULT_PROFILE = "default"


class RecallProfileQuerySet(models.QuerySet):
    def resolve(self, name: str | None) -> RecallProfile:
        """The profile called `name` (None or "default": the default one, created on first use)."""
        if not name or name == DEFAULT_PROFILE:
            profile, _ = self.get_or_create(
                name=DEFAULT_PROFILE,
                defaults={"description": "The built-in knobs, calibrated for the default embedder.", "knobs": {}},
            )
            return profile
        return self.get(name=name)


class RecallProfile(models.Model):
    """A named set of recall knobs (recall.knobs.RecallSettings), stored as the knobs that differ."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9._-]*$", "use lower-case letters, digits, '.', '_' and '-'")],
    )
    description = models.TextField(blank=True)
    knobs = models.JSONField(
        decoder=StoredJSONDecoder, default=dict, blank=True, help_text="knobs that differ from the built-in defaults"
    )
    embedder = models.CharField(
        max_length=200, blank=True, help_text="the embedder the knobs were calibrated for (blank: not calibrated)"
    )
    calibration = models.JSONField(
        decoder=StoredJSONDecoder,
        default=dict,
        blank=True,
        help_text="the last calibration: golden sets, metrics before and after",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RecallProfileQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            RecallSettings.from_dict(self.knobs or {})
        except SettingsError as exc:
            raise ValidationError(
                {"knobs": [f"{knob}: {'; '.join(msgs)}" for knob, msgs in exc.errors.items()]}
            ) from None

    @property
    def settings(self) -> RecallSettings:
        """The stored knobs over the defaults of the configured embedder (searchindex.defaults)."""
        return RecallSettings.from_dict({**active_defaults(), **(self.knobs or {})})


class RecallTrace(models.Model):
    """One recall with every candidate and both paths' decisions, as it was at the time."""

    class Source(models.TextChoices):
        PLAYGROUND = "playground"
        API = "api"
        CLI = "cli"
        MCP = "mcp"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    source = models.CharField(max_length=12, choices=Source.choices)
    actor = models.CharField(max_length=200)
    scope = models.CharField(max_length=200, db_index=True)
    query = models.TextField()
    tools = models.JSONField(decoder=StoredJSONDecoder, default=list, blank=True)
    limit = models.PositiveSmallIntegerField()
    profile = models.ForeignKey(RecallProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    profile_name = models.CharField(max_length=64)
    knobs = models.JSONField(decoder=StoredJSONDecoder, default=dict, help_text="every knob the recall ran with")
    mode = models.CharField(max_length=10)
    fallback_reason = models.TextField(blank=True)
    selected_ids = models.JSONField(decoder=StoredJSONDecoder, default=list)
    result = models.JSONField(
        decoder=StoredJSONDecoder, help_text="the recall as its API answer: candidates, decisions, block, timings"
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.query[:60]} ({self.scope}, {self.created_at:%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("recall:trace", args=[self.pk])

    @property
    def block(self) -> str:
        return self.result.get("block", "")

    @property
    def candidates(self) -> list[dict]:
        return self.result.get("candidates", [])

    @staticmethod
    def fields_of(result: RecallResult) -> dict:
        """A recall as the JSON-safe fields of a trace (the playground signs them into its Save form)."""
        return {
            "created_at": result.created_at.isoformat(),
            "scope": result.scope,
            "query": result.query,
            "tools": result.tools,
            "limit": result.limit,
            "profile_name": result.profile,
            "knobs": result.settings.to_dict(),
            "mode": result.mode,
            "fallback_reason": str(result.fallback_reason or ""),
            "selected_ids": [rc.id for rc in result.selected],
            "result": result.to_dict(),
        }

    @classmethod
    def record(
        cls, result: RecallResult, *, source: str, actor: str, profile: RecallProfile | None = None, note: str = ""
    ) -> RecallTrace:
        return cls.create_from(cls.fields_of(result), source=source, actor=actor, profile=profile, note=note)

    @classmethod
    def create_from(
        cls, fields: dict, *, source: str, actor: str, profile: RecallProfile | None = None, note: str = ""
    ) -> RecallTrace:
        values = {**fields, "created_at": datetime.fromisoformat(fields["created_at"])}
        return cls.objects.create(**values, source=source, actor=actor, profile=profile, note=note)


class GoldenSet(models.Model):
    """Golden queries for one scope: what recall should find (or, with no expected id, stay silent on)."""

    name = models.CharField(max_length=100, help_text="unique within its scope")
    scope = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "scope"]
        # Unique per scope, not across scopes: a name taken in one scope is neither refused nor
        # reported in another, so names can be neither probed nor squatted across scopes.
        constraints = [models.UniqueConstraint(fields=["scope", "name"], name="goldenset_unique_name_per_scope")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("recall:golden_detail", args=[self.pk])


class GoldenQuery(models.Model):
    golden_set = models.ForeignKey(GoldenSet, on_delete=models.CASCADE, related_name="queries")
    query = models.TextField()
    tools = models.JSONField(
        decoder=StoredJSONDecoder, default=list, blank=True, help_text="recent tools, most recent last"
    )
    expected_ids = models.JSONField(
        decoder=StoredJSONDecoder,
        default=list,
        blank=True,
        help_text="memory ids recall should return; empty: it should return nothing",
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["golden_set", "id"]
        verbose_name_plural = "golden queries"

    def __str__(self) -> str:
        return self.query[:80]
