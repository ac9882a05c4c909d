"""REST endpoints for transcripts, their extraction, and background tasks (`/api/transcripts/`, `/api/tasks/`)."""

from __future__ import annotations

import json

from django.db import transaction
from django.db.models import Count
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import exceptions, generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from api import filters, parsers, rest
from api.serializers import StrictSerializer
from ingest import extraction, sessionlogs
from ingest.ingestion import MAX_FILE_MESSAGES, MAX_MESSAGES, TranscriptError, ingest
from ingest.tasks import dry_run_now, enqueue_dry_run, enqueue_extraction
from memoryui import roles, rules
from memoryui.models import ConflictError, TaskRun, Transcript
from memoryui.models.transcripts import EXTERNAL_ID_MAX_LENGTH, NAMED_MAX


class TranscriptSummarySerializer(serializers.ModelSerializer):
    messages = serializers.IntegerField(source="message_count", read_only=True)

    class Meta:
        model = Transcript
        fields = ["id", "external_id", "scope", "title", "created_at", "updated_at", "extracted_at", "messages"]


class IngestReportSerializer(serializers.Serializer):
    transcript_id = serializers.UUIDField(help_text="memoryui's own id for it")
    external_id = serializers.CharField(help_text="the id it was posted with (its UUID when it was posted without one)")
    scope = serializers.CharField()
    created = serializers.BooleanField(help_text="false: the transcript existed; only new messages were added")
    messages = serializers.IntegerField(help_text="messages the transcript holds now")
    added = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    task_id = serializers.UUIDField(required=False, help_text="with ?extract=true: the queued extraction task")
    format = serializers.ChoiceField(
        choices=sessionlogs.FORMATS, required=False, help_text="with ?as=: the format the body was read as"
    )
    notes = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="with ?as=: what the log held that was left out"
    )


class TaskRunSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    duration_ms = serializers.SerializerMethodField()

    class Meta:
        model = TaskRun
        fields = [
            "id", "kind", "params", "actor", "status", "progress_done", "progress_total", "percent", "counts",
            "result", "error", "attempts", "created_at", "started_at", "finished_at", "duration_ms",
        ]  # fmt: skip

    def get_duration_ms(self, run: TaskRun) -> float | None:
        return round(run.duration.total_seconds() * 1000, 1) if run.duration is not None else None


class ToolCallSerializer(serializers.Serializer):
    accepts_unknown_keys = True  # a tool call's other keys are the agent's own, and kept out of the way

    id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.JSONField(help_text="JSON text or an object")


class MessageInSerializer(serializers.Serializer):
    """Documents one message of the transcript JSON (validation is ingest.ingestion's)."""

    role = serializers.ChoiceField(choices=["user", "assistant", "tool", "system"])
    content = serializers.CharField(allow_blank=True)
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_call_id = serializers.CharField(required=False, help_text="on tool results")
    channel = serializers.CharField(required=False, help_text="chat, heartbeat, cron, system, …")
    source = serializers.ChoiceField(choices=["user", "internal", "banner", "repair", "compaction"], required=False)
    created_at = serializers.DateTimeField(required=False)


class TranscriptInSerializer(serializers.Serializer):
    id = serializers.CharField(
        required=False,
        max_length=EXTERNAL_ID_MAX_LENGTH,
        help_text=(
            "the agent's own id for the transcript (any string, e.g. a session id), unique within its scope: "
            "give it to post the same transcript again"
        ),
    )
    scope = serializers.CharField()
    title = serializers.CharField(required=False)
    metadata = serializers.DictField(required=False)
    messages = MessageInSerializer(many=True, allow_empty=False, max_length=MAX_MESSAGES)
    start = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text=(
            f"a part of a longer transcript (at most {MAX_MESSAGES} messages a post): the index of its first "
            "message, where the stored messages end or earlier (409 otherwise); with the transcript's id"
        ),
    )


class MessageOutSerializer(MessageInSerializer):
    index = serializers.IntegerField()
    round = serializers.IntegerField(allow_null=True)
    round_state = serializers.ChoiceField(choices=["complete", "in_flight", "interrupted", "open"], allow_null=True)
    in_focus = serializers.BooleanField()
    trimmed = serializers.BooleanField(
        help_text="part of the trailing open tool exchange (calls and their partial results) the projection leaves out"
    )
    extraction = serializers.ListField(
        child=serializers.DictField(), allow_null=True, help_text="what the last extraction made of it"
    )


class TranscriptDetailSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    scope = serializers.CharField()
    title = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    extracted_at = serializers.DateTimeField(allow_null=True)
    projection = serializers.DictField(help_text="notes, rounds, in_flight and focus round numbers, trimmed indexes")
    messages = MessageOutSerializer(many=True)


class ProjectedTranscriptSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    external_id = serializers.CharField()
    scope = serializers.CharField()
    format = serializers.ChoiceField(
        choices=sessionlogs.FORMATS, help_text="the format of `messages`: the one it came in, or `?as=`"
    )
    messages = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "the projection in that format, provider-safe: OpenAI messages, Claude Code events, Gemini contents, "
            "or memoryui messages"
        ),
    )
    trimmed = serializers.ListField(
        child=serializers.IntegerField(), help_text="indexes of the stored messages the projection left out"
    )
    notes = serializers.ListField(child=serializers.CharField(), help_text="what was trimmed and why, and the rounds")


class ExtractionReportSerializer(serializers.Serializer):
    transcript_id = serializers.UUIDField()
    dry_run = serializers.BooleanField()
    added = serializers.ListField(child=serializers.DictField(), help_text="{id, kind, tier, text, message}")
    merged = serializers.ListField(child=serializers.DictField(), help_text="{id, into, text, layer, similarity}")
    skipped = serializers.ListField(child=serializers.DictField(), help_text="{text, reason, message}")
    counts = serializers.DictField(child=serializers.IntegerField())
    notes = serializers.ListField(child=serializers.CharField())
    complete = serializers.BooleanField(
        help_text="false: a dry run that stopped at its time limit before deciding every user message (notes say "
        "how far it got); ask again with background: true"
    )


class ExtractRequestSerializer(StrictSerializer):
    dry_run = serializers.BooleanField(default=False, help_text="true: the decisions, written nowhere")
    background = serializers.BooleanField(
        default=False,
        help_text="with dry_run: run it as a task (202) whose result is the decisions; a transcript of more user "
        "messages than MEMORYUI_DRY_RUN_INLINE_MESSAGES is always a task",
    )
    l1 = serializers.ChoiceField(
        choices=extraction.L1_MODES,
        default="auto",
        help_text="the LLM extractor: auto (the turns L0 found nothing in), always, off",
    )


def _flag(params, name: str) -> bool:
    """A boolean query parameter: true/1/yes or false/0/no (or absent or empty: false); else a 400."""
    raw = params.get(name, "")
    if raw == "":
        return False
    if (value := filters.PINNED_SPELLINGS.get(raw.lower())) is not None:
        return value
    raise exceptions.ValidationError({name: [f"must be true or false, got {raw[:40]!r}"]})


def _transcripts(request):
    transcripts = Transcript.objects.all()
    scopes = rest.visible_scopes(request)
    return transcripts if scopes is None else transcripts.filter(scope__in=scopes)


def _transcript(request, ref: str) -> Transcript:
    """The transcript `ref` names among those the caller may see: memoryui's UUID for it, or the
    id the agent posted it with (`?scope=` picks one when several scopes use that id)."""
    visible = _transcripts(request)
    scopes = request.query_params.getlist("scope")
    if len(scopes) > 1:
        raise exceptions.ValidationError({"scope": ["give one scope"]})
    if scopes and scopes[0]:
        problems: dict = {}
        visible = visible.filter(scope=rest.scope_param(scopes[0], problems))
        if problems:
            raise exceptions.ValidationError(problems)
    found = visible.named(ref)
    if not found:
        raise exceptions.NotFound("No transcript with this id in your scopes.")
    if len(found) > 1:
        scopes = ", ".join(t.scope for t in found[:NAMED_MAX])
        raise rest.ApiError(
            409,
            f"Transcript id {ref!r} names transcripts in several scopes: add ?scope=.",
            {"scope": [f"one of {scopes}"]},
        )
    return found[0]


def transcript_detail(transcript: Transcript) -> dict:
    """A transcript with every message, its projection, and what extraction made of each message."""
    stored = list(transcript.messages.all())
    projection = extraction.projection_of(transcript)
    trimmed = {msg.index for msg in projection.trimmed}
    rounds = {}
    for round_ in projection.rounds:
        for msg in round_.messages:
            rounds[msg.index] = round_
    messages = []
    for message in stored:
        round_ = rounds.get(message.index)
        messages.append(
            {
                "index": message.index,
                **message.as_dict(),
                "round": round_.number if round_ else None,
                "round_state": round_.state if round_ else None,
                "in_focus": bool(round_ and round_.in_focus),
                "trimmed": message.index in trimmed,
                "extraction": message.extraction.get("outcomes") if message.extraction else None,
            }
        )
    return {
        "id": str(transcript.pk),
        "external_id": transcript.external_id,
        "scope": transcript.scope,
        "title": transcript.title,
        "created_at": transcript.created_at,
        "updated_at": transcript.updated_at,
        "extracted_at": transcript.extracted_at,
        "projection": {
            "notes": projection.notes,
            "rounds": len(projection.rounds),
            "in_flight": [r.number for r in projection.rounds if r.state == "in_flight"],
            "focus_rounds": [r.number for r in projection.rounds if r.in_focus],
            "trimmed": sorted(trimmed),
        },
        "messages": messages,
    }


SESSION_LOG_AS = ("auto", *sessionlogs.FORMATS)


def _session_log(request) -> tuple[sessionlogs.Session, dict]:
    """The body read as the session log `?as=` names (`auto`: detected), as transcript JSON with
    `?scope=` and `?id=` filling in what the log has none of; a 400 naming the body, the line or
    the parameter otherwise."""
    params = request.query_params
    problems: dict = {}
    wanted = rest.choice_param("as", params.get("as") or "auto", SESSION_LOG_AS, problems)
    given = {key: params.get(key, "") for key in ("scope", "id")}
    if given["scope"]:
        rest.scope_param(given["scope"], problems)
    if problems:
        raise exceptions.ValidationError(problems)
    body = request.data
    # A JSON body (gemini, OpenAI, memoryui) arrives parsed, and its boundary checks done.
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False) if body else ""
    if not text.strip():
        raise exceptions.ValidationError({parsers.BODY: ["is empty: post the session log as the request body"]})
    try:
        session = sessionlogs.read(text, None if wanted == "auto" else wanted)
    except sessionlogs.SessionLogError as exc:
        reason = str(exc) if wanted == "auto" else f"is not a {sessionlogs.FORMAT_LABELS[wanted]}: {exc}"
        raise rest.ApiError(400, f"Invalid input: the {parsers.BODY} {reason}.", {parsers.BODY: [reason]}) from None
    data = session.transcript
    if not isinstance(data, dict):
        return session, data  # the ingestion rules say what is wrong with it
    data = dict(data)
    for key, value in given.items():
        if not value:
            continue
        # A session log's own id is only a default; memoryui's JSON names its own id and scope.
        own = data.get(key) if key == "scope" or session.format == "memoryui" else None
        if own not in (None, "") and not _same(key, own, value):
            problems[key] = [f"the body's {key} is {str(own)[:80]!r}: leave ?{key}= out, or make them match"]
        data[key] = value
    if not data.get("scope") and session.format != "memoryui":  # memoryui's rules name its own
        problems["scope"] = [f"a {session.format} session log names no scope: add ?scope= (e.g. agent:main)"]
    if problems:
        raise exceptions.ValidationError(problems)
    return session, data


def _same(key: str, own: object, given: str) -> bool:
    if not isinstance(own, str):
        return False
    if key == "scope":
        try:
            return rules.normalize_scope(own) == rules.normalize_scope(given)
        except rules.ScopeError:
            return False
    return own == given


class TranscriptListView(rest.WriteTransactionMixin, APIView):
    # JSON as everywhere; the text types only carry a session log (`?as=`).
    parser_classes = [parsers.JSONParser, parsers.SessionLogParser, parsers.JSONLinesParser, parsers.PlainTextParser]

    @extend_schema(
        summary="Transcripts in your scopes, newest first",
        parameters=[OpenApiParameter("scope", str, description="Only this scope.")],
        responses={200: TranscriptSummarySerializer(many=True), **rest.errors(401)},
    )
    def get(self, request):
        transcripts = _transcripts(request).annotate(message_count=Count("messages")).order_by("-updated_at", "pk")
        if scope := request.query_params.get("scope"):
            problems: dict = {}
            transcripts = transcripts.filter(scope=rest.scope_param(scope, problems))
            if problems:
                raise exceptions.ValidationError(problems)
        return Response(TranscriptSummarySerializer(transcripts[:200], many=True).data)

    @extend_schema(
        summary="Post a transcript (or new messages of one), or an agent's session log",
        description=(
            'The transcript JSON (docs/architecture.md "File formats"): `{id?, scope, title?, metadata?, '
            "messages: [...]}`. Idempotent by "
            "transcript id and message index: posting it again stores only the messages it did not have. A "
            "malformed message is a 400 naming `messages[i].field`, and nothing is stored; a stored message that "
            "differs is a 409. Add `?extract=true` to queue its extraction.\n\n"
            "With `?as=` the body is instead a session log as the agent wrote it (a text body without `?as=` is "
            "read as `?as=auto`): `claude-code` (the session "
            "JSONL, posted as `application/x-ndjson`, `application/jsonl` or `text/plain`), `gemini` (a gemini-cli "
            "or qwen-code chat checkpoint), `openai` (chat messages), `memoryui`, or `auto` to detect which. A "
            "session log names no scope: `?scope=` gives it; `?id=` takes the place of the log's own id (Claude "
            "Code's session id, a checkpoint has none). The rules, the idempotency and the answer are the same, "
            "with `format` and `notes` (what the log held that was left out) added; a line that is not a session "
            "event is a 400 naming it in `details.body`."
        ),
        # The schema describes the transcript JSON only: what a session log may be depends on `?as=`,
        # which a schema cannot say, so the session-log form of this endpoint is in the description.
        request={"application/json": TranscriptInSerializer},
        examples=[
            OpenApiExample(
                "A session with a tool call",
                request_only=True,
                media_type="application/json",
                value={
                    "id": "session-2026-11-25-7f3a",
                    "scope": "agent:main",
                    "title": "Deploy questions",
                    "messages": [
                        {"role": "user", "content": "I deploy on Fridays; remember that."},
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [{"id": "c1", "name": "calendar::list", "arguments": {"day": "friday"}}],
                        },
                        {"role": "tool", "tool_call_id": "c1", "content": "2 deploys on Friday"},
                        {"role": "assistant", "content": "Noted: you deploy on Fridays."},
                    ],
                },
            ),
        ],
        parameters=[
            OpenApiParameter("extract", bool, description="queue an extraction task after storing"),
        ],
        responses={201: IngestReportSerializer, 200: IngestReportSerializer, **rest.errors(400, 401, 403, 409)},
    )
    def post(self, request):
        allowed = rest.visible_scopes(request)
        session = None
        if request.query_params.get("as") or isinstance(request.data, str):
            session, data = _session_log(request)
        else:
            data = request.data
        try:
            with transaction.atomic():
                # A raw session log is a file: stored whole; transcript JSON comes in parts.
                limit = MAX_FILE_MESSAGES if session is not None else MAX_MESSAGES
                report = ingest(data, allowed_scopes=allowed, max_messages=limit)
                body = report.to_dict()
                if session is not None:
                    body.update(format=session.format, notes=session.notes)
                if _flag(request.query_params, "extract"):
                    body["task_id"] = str(enqueue_extraction(report.transcript, actor=rest.actor_for(request)).pk)
        except TranscriptError as exc:
            if allowed is not None and list(exc.errors) == ["scope"] and "outside this token" in exc.errors["scope"][0]:
                raise rest.ApiError(403, "This token may not write to that scope.", exc.errors) from None
            raise exceptions.ValidationError(exc.errors) from None
        except ConflictError as exc:
            raise rest.ApiError(409, str(exc)) from None
        return Response(body, status=status.HTTP_201_CREATED if report.created else status.HTTP_200_OK)


class TranscriptDetailView(APIView):
    @extend_schema(
        summary="A transcript with its projection and what extraction made of each message",
        description=(
            "`id` is memoryui's UUID for the transcript or the id it was posted with; when that names "
            "transcripts in several of your scopes, `?scope=` picks one (else 409). With `?projected=true` the "
            "answer is instead the provider-safe message list every consumer sees — the trailing open tool "
            "exchange trimmed — written in the format the transcript came in (`openai`, `claude-code`, `gemini` "
            "or `memoryui`), or in the one `?as=` names. `?as=` alone writes every stored message in that format, "
            "in the same shape."
        ),
        parameters=[
            OpenApiParameter("scope", str, description="The scope, when the id is used in several."),
            OpenApiParameter(
                "projected",
                bool,
                description="true: only the projected message list, ready to send to a provider or resume from",
            ),
            OpenApiParameter(
                "as",
                str,
                enum=list(sessionlogs.FORMATS),
                description="the format to write the messages in (default: the one the transcript came in); "
                "without projected=true, every stored message",
            ),
        ],
        responses={
            200: PolymorphicProxySerializer(
                component_name="TranscriptDetailOrProjection",
                serializers=[TranscriptDetailSerializer, ProjectedTranscriptSerializer],
                resource_type_field_name=None,
            ),
            **rest.errors(400, 401, 404, 409),
        },
    )
    def get(self, request, pk):
        transcript = _transcript(request, pk)
        # `as`, not `format`: DRF reads `?format=` as the response's own format.
        wanted = request.query_params.get("as", "")
        projected = _flag(request.query_params, "projected")
        if not projected and not wanted:
            return Response(transcript_detail(transcript))
        if wanted:
            problems: dict = {}
            wanted = rest.choice_param("as", wanted, sessionlogs.FORMATS, problems)
            if problems:
                raise exceptions.ValidationError(problems)
        export = sessionlogs.export(transcript, wanted or None, projected=projected)
        return Response(
            {
                "id": str(transcript.pk),
                "external_id": transcript.external_id,
                "scope": transcript.scope,
                "format": export.format,
                "messages": export.items,
                "trimmed": export.trimmed,
                "notes": export.notes,
            }
        )


class TranscriptExtractView(APIView):
    throttle_scope = "expensive"  # MEMORYUI_API_EXPENSIVE_RATE as well (api.throttling)

    def access_needed(self, request) -> roles.Need:
        # A dry run (or a body the view will refuse with a 400) writes nothing: every role, read tokens too.
        body = ExtractRequestSerializer(data=request.data)
        return roles.EDITS if body.is_valid() and not body.validated_data["dry_run"] else roles.READS

    @extend_schema(
        summary="Extract memories from a transcript",
        description=(
            "`dry_run: true` answers with the decisions (added as which kind and tier, merged into which "
            "memory, skipped and why) and writes nothing: at once, within a time limit (`complete` false and a note "
            "when it stopped there), or as a task (202) whose result holds the decisions and their `outcomes`: for "
            "a transcript of more user messages than the inline limit, with `background: true`, or while the server "
            "does as many dry runs as it may at once. Otherwise the extraction is queued as a task: 202 with the "
            "task, whose progress `/api/tasks/<id>/` shows. One extraction of a transcript at a time: while one "
            "is queued or running, asking again answers 202 with that task (same id, its own `params`) and queues "
            "nothing. Extracting needs the editor role (and a write token); a dry run is open to every role."
        ),
        request=ExtractRequestSerializer,
        responses={200: ExtractionReportSerializer, 202: TaskRunSerializer, **rest.errors(400, 401, 403, 404, 503)},
    )
    def post(self, request, pk):
        transcript = _transcript(request, pk)
        body = ExtractRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        l1 = body.validated_data["l1"]
        if body.validated_data["dry_run"]:
            report = None
            if not body.validated_data["background"]:
                report = dry_run_now(transcript, actor=rest.actor_for(request), l1=l1)
            if report is not None:
                return Response(report.to_dict())
            with transaction.atomic():
                run = enqueue_dry_run(transcript, actor=rest.actor_for(request), l1=l1)
            return Response(TaskRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
        with transaction.atomic():
            run = enqueue_extraction(transcript, actor=rest.actor_for(request), l1=l1)
        return Response(TaskRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


def _tasks(request):
    runs = TaskRun.objects.all()
    scopes = rest.visible_scopes(request)
    return runs if scopes is None else runs.filter(params__scope__in=scopes)


@extend_schema(
    summary="Background tasks, newest first",
    parameters=[
        OpenApiParameter("kind", str, description="e.g. extract"),
        OpenApiParameter(
            "status",
            str,
            enum=TaskRun.Status.values,
            description="queued, running, stalled, succeeded, failed or cancelled",
        ),
    ],
    responses={200: TaskRunSerializer(many=True), **rest.errors(401)},
)
class TaskListView(generics.ListAPIView):
    serializer_class = TaskRunSerializer

    def get_queryset(self):
        runs = _tasks(self.request)
        params = self.request.query_params
        if kind := params.get("kind"):
            runs = runs.filter(kind=kind)
        if wanted := params.get("status"):
            problems: dict = {}
            runs = runs.filter(status=rest.choice_param("status", wanted, tuple(TaskRun.Status.values), problems))
            if problems:
                raise exceptions.ValidationError(problems)
        return runs


class TaskDetailView(APIView):
    @extend_schema(summary="One background task", responses={200: TaskRunSerializer, **rest.errors(401, 404)})
    def get(self, request, pk):
        run = _tasks(request).filter(pk=pk).first()
        if run is None:
            raise exceptions.NotFound("No task with this id in your scopes.")
        return Response(TaskRunSerializer(run).data)
