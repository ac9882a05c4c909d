"""TaskRun: one background job, from queue to outcome (memoryui.background keeps it)."""

from __future__ import annotations

import uuid

from django.db import models
from django.urls import reverse
from django.utils import timezone

from memoryui.models.fields import StoredJSONDecoder


class TaskRun(models.Model):
    """One background job (an extraction, a reindex): what it was asked, how far it got, how it ended."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        # No progress within its limit, or its worker is gone (memoryui.runs): sent again, waiting for a worker.
        STALLED = "stalled"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    # Not finished: a worker has it, or will (a queued or stalled run is in a queue).
    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.STALLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=40, db_index=True)
    params = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)
    actor = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    counts = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)
    result = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When it started or last advanced (for a queued or stalled run: when it was last sent): how the
    # sweeps tell a stalled run from a slow one.
    progressed_at = models.DateTimeField(null=True, blank=True)
    # The Celery task that does it, sent the run's id: how a stalled or retried run is sent again.
    task_name = models.CharField(max_length=200, blank=True)
    # The process running it, "host/pid/start" (memoryui.runs.holder): whether it is still alive.
    worker = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} ({self.created_at:%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("task_detail", args=[self.pk])

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 100 if self.status == self.Status.SUCCEEDED else 0
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    def start(self, total: int) -> None:
        self.status, self.started_at, self.progress_total = self.Status.RUNNING, timezone.now(), total
        self.progressed_at = self.started_at
        self.attempts += 1
        self.error = ""
        self.save(update_fields=["status", "started_at", "progressed_at", "progress_total", "attempts", "error"])

    def advance(self, done: int, counts: dict) -> None:
        """Record progress; `Withdrawn` when the run is no longer this process's to do (cancelled, or
        found stalled and handed to another worker), so the work stops at its next step."""
        now = timezone.now()
        mine = self._mine().filter(status=self.Status.RUNNING) if self.worker else self._mine()
        if not mine.update(progress_done=done, counts=counts, progressed_at=now):
            raise Withdrawn(self.pk)
        self.progress_done, self.counts, self.progressed_at = done, counts, now

    def finish(self, result: dict) -> None:
        self.status, self.finished_at, self.result = self.Status.SUCCEEDED, timezone.now(), result
        self.progress_done = self.progress_total
        self._settle(["status", "finished_at", "result", "progress_done", "counts"])

    def fail(self, error: str) -> None:
        self.status, self.finished_at, self.error = self.Status.FAILED, timezone.now(), error[:5000]
        self._settle(["status", "finished_at", "error", "counts"])

    def _settle(self, fields: list[str]) -> None:
        """Store the outcome, unless the run was withdrawn from this process meanwhile (its outcome
        is then the cancellation's, or the worker's that took it over)."""
        values = {name: getattr(self, name) for name in fields}
        mine = self._mine().exclude(status=self.Status.CANCELLED) if self.worker else self._mine()
        if not mine.update(**values):
            raise Withdrawn(self.pk)

    def _mine(self):
        """This run's row while this process holds it. A run no single process holds (an embedding
        run, whose batches land from any worker) is everyone's."""
        return TaskRun.objects.filter(pk=self.pk, worker=self.worker)


class Withdrawn(Exception):
    """The run was cancelled, or taken over by another worker, while this process worked on it."""
