"""Transcripts as agents posted them, one Message row per message."""

from __future__ import annotations

import uuid

from django.db import models
from django.urls import reverse
from django.utils import timezone

from memoryui import rules
from memoryui.models.fields import StoredJSONDecoder

EXTERNAL_ID_MAX_LENGTH = 200
NAMED_MAX = 20  # scopes listed when an agent's id names transcripts in several


class TranscriptQuerySet(models.QuerySet):
    def named(self, ref: str) -> list[Transcript]:
        """The transcripts `ref` names: the one whose memoryui id it is, else the ones an agent posted
        with that id (one a scope, by scope; at most NAMED_MAX + 1, enough to say there are more)."""
        try:
            found = self.filter(pk=uuid.UUID(ref)).first()
        except ValueError:
            found = None
        if found is not None:
            return [found]
        return list(self.filter(external_id=ref).order_by("scope")[: NAMED_MAX + 1])


class Transcript(models.Model):
    """An agent's conversation as it was posted; memory is extracted from its projection.

    The agent names a transcript by its own id (`external_id`: any string, a session id, unique
    within its scope); memoryui names it by a UUID of its own. Two scopes may use the same
    external id without either learning of the other.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    scope = models.CharField(max_length=rules.SCOPE_MAX_LENGTH, db_index=True)
    external_id = models.CharField(
        max_length=EXTERNAL_ID_MAX_LENGTH, help_text="the agent's own id for it (a session id), unique in its scope"
    )
    title = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, help_text="last time messages were added")
    extracted_at = models.DateTimeField(null=True, blank=True)

    objects = TranscriptQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["scope", "external_id"], name="transcript_unique_external_id")]

    def __str__(self) -> str:
        return self.title or f"transcript {self.external_id or self.pk}"

    def save(self, *args, **kwargs):
        if not self.external_id:
            self.external_id = str(self.pk)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("transcript_detail", args=[self.pk])


class Message(models.Model):
    """One message of a transcript, at its index; never changed once stored (ingestion is by index)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SYSTEM = "system"

    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="messages")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(decoder=StoredJSONDecoder, default=list, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=40, blank=True)
    source = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    # What the last extraction made of this message: its run, and each outcome (added as
    # kind/tier, merged into a memory, skipped and why).
    extraction = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)

    class Meta:
        ordering = ["transcript", "index"]
        constraints = [models.UniqueConstraint(fields=["transcript", "index"], name="message_unique_index")]

    def __str__(self) -> str:
        return f"{self.transcript_id}#{self.index} {self.role}"

    def as_dict(self) -> dict:
        """The message in the transcript JSON format."""
        data = {"role": self.role, "content": self.content}
        for name in ("tool_calls", "tool_call_id", "channel", "source"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        if self.created_at:
            data["created_at"] = self.created_at.isoformat()
        return data
