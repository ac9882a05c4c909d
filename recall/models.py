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

from memoryui import memory_ids, rules
from memoryui.models.fields import StoredJSONDecoder
from recall import explain
from recall.knobs import RecallSettings
from searchindex.defaults import active_defaults
from searchindex.fusion import SettingsError

if TYPE_CHECKING:
    from recall.pipeline import RecallResult

DEFAULT_PROFILE = "default"


#: The default profile's description: what it is, not what it was tuned for (the profiles page says
#: that, from the profile's calibration and the active embedder).
DEFAULT_DESCRIPTION = "The built-in knobs: every recall uses them unless it names another profile."


class RecallProfileQuerySet(models.QuerySet):
    def resolve(self, name: str | None) -> RecallProfile:
        """The profile called `name` (None or "default": the default one, created on first use)."""
        if not name or name == DEFAULT_PROFILE:
            profile, _ = self.get_or_create(
                name=DEFAULT_PROFILE,
                defaults={"description": DEFAULT_DESCRIPTION, "knobs": {}},
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


# What a trace list filters a trace's outcome by: answered or silent (the answerability decision),
# or the path that answered (the trace's `mode`).
TRACE_OUTCOMES = ("answered", "silent", "selector", "heuristic", "select")


def trace_columns(result: dict) -> dict:
    """The columns a trace list filters and sorts on, read from a recall's JSON (RecallResult.to_dict):
    answered (a recall with no answerability decision, one that picked by id, counts as answered),
    latency_ms (the whole recall, None when not timed) and block_size (memories handed over)."""
    answer = result.get("answer")
    total = (result.get("timings_ms") or {}).get("total")
    timed = isinstance(total, int | float) and not isinstance(total, bool)
    return {
        "answered": bool(answer.get("answered", True)) if isinstance(answer, dict) else True,
        "latency_ms": round(float(total), 2) if timed else None,
        "block_size": len(result.get("selected") or []),
    }


class RecallTraceQuerySet(models.QuerySet):
    def with_outcome(self, outcome: str) -> RecallTraceQuerySet:
        """The traces of one of TRACE_OUTCOMES."""
        if outcome in ("answered", "silent"):
            return self.filter(answered=outcome == "answered")
        return self.filter(mode=outcome)


class RecallTrace(models.Model):
    """One recall with every candidate and both paths' decisions, as it was at the time.

    `answered`, `latency_ms` and `block_size` repeat what `result` holds (trace_columns), as columns
    the trace list filters on in the database.
    """

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
    answered = models.BooleanField(
        default=True, help_text="the answerability decision: false when recall stayed silent"
    )
    latency_ms = models.FloatField(null=True, blank=True, help_text="the whole recall, in milliseconds")
    block_size = models.PositiveSmallIntegerField(default=0, help_text="how many memories the agent was handed")

    objects = RecallTraceQuerySet.as_manager()

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

    @property
    def selected(self) -> list[dict]:
        """The memories handed over, in block order: id, text, kind, tier, score, age."""
        return [s for s in self.result.get("selected") or [] if isinstance(s, dict) and s.get("id")]

    def why_not(self, typed: str) -> tuple[list[tuple[str, str]], uuid.UUID | None]:
        """Why the memory `typed` names (a full or short id) is or is not in this trace's block, read from
        the candidates the trace kept, in the words of the recall page (recall.explain).

        Returns (stages, as the playground's "why not recalled?" lists them; the memory's id when it was
        no candidate of this recall, so that only a new run in the playground can say how close it came).
        """
        try:
            digits = memory_ids.hex_digits(typed)
        except memory_ids.MemoryIdError as exc:
            return [("memory", f"{exc}.")], None
        candidates = [c for c in self.candidates if isinstance(c, dict)]
        named = [c for c in candidates if str(c.get("id", "")).replace("-", "").startswith(digits)]
        if len(named) == 1:
            [candidate] = named
            rows = (row for group in explain.explain(self.result).groups for row in group.rows)
            row = next(row for row in rows if row.candidate is candidate)
            position = candidates.index(candidate) + 1
            decision = explain.DECISION_WORDS.get(candidate.get("decision"), str(candidate.get("decision")))
            return [
                ("candidate", f"#{position} of this recall's {len(candidates)} candidates, in fused order"),
                (decision, row.why),
            ], None
        try:
            memory = memory_ids.lookup(typed)
        except memory_ids.MemoryIdError as exc:
            return [("memory", f"{exc}.")], None
        if memory.scope != self.scope:
            return [("scope", f"It is in scope {memory.scope}; this recall ran in {self.scope}.")], None
        stages = [
            (
                "candidate",
                f"It was not among this recall's {len(candidates)} candidates: neither the vector nor the BM25 "
                "search found it close enough to this query. A new run in the playground says how close it came.",
            )
        ]
        if memory.status != rules.Status.ACTIVE:
            stages.append(("memory", f"It is {memory.status} now: only active memories are recalled."))
        return stages, memory.id

    def compared_with(self, other: RecallTrace) -> dict:
        """This trace (a) beside `other` (b): what each ran with (`settings`: label, a, b, differs), the knobs
        that differ, and each block (`blocks`: a's, then b's) with, for every memory, whether the other block
        has it too and, if not, what the other recall decided about it."""
        settings = [
            ("query", self.query, other.query),
            ("scope", self.scope, other.scope),
            ("profile", self.profile_name, other.profile_name),
            ("recent tools", ", ".join(self.tools) or "none", ", ".join(other.tools) or "none"),
            ("limit", self.limit, other.limit),
        ]
        names = sorted(set(self.knobs or {}) | set(other.knobs or {}))
        knobs = [(name, (self.knobs or {}).get(name), (other.knobs or {}).get(name)) for name in names]
        return {
            "settings": [(label, a, b, a != b) for label, a, b in settings],
            "knobs_differ": [(name, a, b) for name, a, b in knobs if a != b],
            "knobs_same": sum(a == b for _, a, b in knobs),
            "sides": [self, other],
            "blocks": [
                {"name": "a", "other": "b", "rows": self._block_against(other)},
                {"name": "b", "other": "a", "rows": other._block_against(self)},
            ],
        }

    def _block_against(self, other: RecallTrace) -> list[dict]:
        theirs = {str(pk) for pk in other.selected_ids}
        decided = {str(c.get("id")): c.get("decision") for c in other.candidates if isinstance(c, dict)}
        rows = []
        for memory in self.selected:
            pk = str(memory.get("id"))
            decision = decided.get(pk)
            if pk in theirs:
                elsewhere = ""
            elif decision:
                elsewhere = explain.DECISION_WORDS.get(decision, str(decision))
            else:
                elsewhere = "not a candidate"
            rows.append({"memory": memory, "in_both": pk in theirs, "elsewhere": elsewhere})
        return rows

    @staticmethod
    def fields_of(result: RecallResult) -> dict:
        """A recall as the JSON-safe fields of a trace (the playground signs them into its Save form)."""
        data = result.to_dict()
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
            "result": data,
            **trace_columns(data),
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
        # The columns are read from the result again: a run signed before they existed has none.
        values = {
            **fields,
            **trace_columns(fields["result"]),
            "created_at": datetime.fromisoformat(fields["created_at"]),
        }
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


class RecallLogQuerySet(models.QuerySet):
    def record(
        self,
        memory_ids: list,
        *,
        query: str,
        scope: str,
        profile_name: str,
        source: str,
        trace: RecallTrace | None = None,
        created_at: datetime | None = None,
    ) -> list[RecallLogEntry]:
        """One entry for each memory a recall handed over, linked to the recall's trace if it has one."""
        when = created_at or timezone.now()
        return self.bulk_create(
            RecallLogEntry(
                memory_id=pk,
                trace=trace,
                query=RecallLogEntry.capped(query),
                source=source,
                scope=scope,
                profile_name=profile_name,
                created_at=when,
            )
            for pk in dict.fromkeys(memory_ids)
        )

    def record_result(
        self, result: RecallResult, *, source: str, trace: RecallTrace | None = None
    ) -> list[RecallLogEntry]:
        """The entries of a recall whose memories were handed to an agent (beside
        recall.pipeline.record_recall, which counts them)."""
        return self.record(
            [rc.found.memory.pk for rc in result.selected],
            query=result.query,
            scope=result.scope,
            profile_name=result.profile,
            source=source,
            trace=trace,
        )

    def record_trace(self, trace: RecallTrace) -> list[RecallLogEntry]:
        """The entries of a traced recall that recorded none itself (a playground run saved as a trace)."""
        return self.record(
            trace.selected_ids,
            query=trace.query,
            scope=trace.scope,
            profile_name=trace.profile_name,
            source=trace.source,
            trace=trace,
            created_at=trace.created_at,
        )

    def older_than(self, cutoff: datetime) -> RecallLogQuerySet:
        return self.filter(created_at__lt=cutoff)


class RecallLogEntry(models.Model):
    """One memory handed to an agent by one recall: when, for which query, from where, with which profile.

    Which recalls are logged: every recall writes an entry for each memory it handed over, and an
    entry links to its trace only when the recall was traced (sampled at MEMORYUI_RECALL_TRACE_RATE,
    or asked for). Logging only the sampled recalls would leave most recalls out (nine in ten at the
    default rate), so the log could not answer "when was this memory last given to an agent, and for
    what?", and would disagree with the recall count beside it. An entry is a few short columns
    (the query capped at QUERY_MAX_LENGTH), about as big as the `recalled` MemoryEvent written with
    it; the full candidate lists stay in the sampled traces. A playground run hands nothing to an
    agent: its entries are written when a person saves it as a trace.

    Bounded: entries are pruned after MEMORYUI_RECALL_RETENTION_DAYS, the retention of agents'
    traces, by the same daily task (recall.tasks.prune_recall_history).
    """

    QUERY_MAX_LENGTH = 300

    memory = models.ForeignKey("memoryui.Memory", on_delete=models.CASCADE, related_name="+")
    trace = models.ForeignKey(RecallTrace, null=True, blank=True, on_delete=models.SET_NULL, related_name="log_entries")
    query = models.CharField(max_length=QUERY_MAX_LENGTH)
    source = models.CharField(max_length=12, choices=RecallTrace.Source.choices)
    scope = models.CharField(max_length=200)
    profile_name = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RecallLogQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "recall log entries"
        indexes = [
            # A memory's log, newest first, and its recalls per day.
            models.Index(fields=["memory", "-created_at"], name="recall_log_memory_time"),
            # Pruning by age, and recalls per day across the store.
            models.Index(fields=["created_at"], name="recall_log_time"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} for {self.query[:60]!r} ({self.source}, {self.created_at:%Y-%m-%d %H:%M})"

    @classmethod
    def capped(cls, query: str) -> str:
        """The query as the log keeps it: at most QUERY_MAX_LENGTH characters, the cut marked with "…"."""
        query = query or ""
        if len(query) <= cls.QUERY_MAX_LENGTH:
            return query
        return query[: cls.QUERY_MAX_LENGTH - 1] + "…"
