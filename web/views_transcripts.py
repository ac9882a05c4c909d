"""Transcript and task pages: the transcripts with what extraction made of each message (and a
dry run of what it would do now), and the background tasks with their progress."""

from __future__ import annotations

import re
import uuid

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from api import throttling
from api.transcripts import transcript_detail as detail_of
from hygiene import decay
from hygiene.tasks import DECAY, enqueue_decay
from ingest import rollup, sessionlogs
from ingest.tasks import DRY_RUN, dry_run_now, enqueue_dry_run, enqueue_extraction
from memoryui import roles, runs
from memoryui.background import BrokerError
from memoryui.models import TaskRun, Transcript
from memoryui.models.transcripts import EXTERNAL_ID_MAX_LENGTH
from memoryui.text import count
from web import access, scopes, shortcuts
from web.forms import TRANSCRIPT_EXAMPLE, PostedTranscript, TranscriptPostForm

TRANSCRIPT_PAGE_SIZE = 50
# What a provider takes as it is: the projection as OpenAI chat messages.
PROVIDER_FORMAT = "openai"
_FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_FILE_TYPES = {"claude-code": ("jsonl", "application/x-ndjson")}  # the others are one JSON document


@access.role_required(roles.Role.EDITOR, unsafe_only=True)
@require_http_methods(["GET", "POST"])
def transcript_list(request):
    """The transcripts, newest first; an editor posts one here (a transcript or a session log,
    pasted or a file), and is taken to its projection. Posted with htmx, problems come back as
    the form alone."""
    form = TranscriptPostForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST":
        if form.is_valid() and (posted := _post(request, form)):
            return shortcuts.go(request, posted.report.transcript.get_absolute_url())
        status = 400
        if shortcuts.wants_fragment(request):
            context = {"form": form, "example": TRANSCRIPT_EXAMPLE, "max_id_length": EXTERNAL_ID_MAX_LENGTH}
            response = shortcuts.render(request, "memoryui/partials/transcript_post_form.html", context, status=status)
            response[shortcuts.STATE_HEADER] = "invalid"  # app.js swaps it in, in place of the form
            return response
    transcripts = Transcript.objects.annotate(message_count=Count("messages")).order_by("-updated_at", "pk")
    scope = scopes.with_chosen(request).get("scope", "").strip()
    if scope:
        transcripts = transcripts.filter(scope=scope)
    page = Paginator(transcripts, TRANSCRIPT_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "scope": scope,
        "scopes": shortcuts.scope_choices(),
        "form": form,
        "example": TRANSCRIPT_EXAMPLE,
        "max_id_length": EXTERNAL_ID_MAX_LENGTH,
    }
    return shortcuts.render(request, "memoryui/transcript_list.html", context, status=status)


def _post(request, form: TranscriptPostForm) -> PostedTranscript | None:
    """Store the posted transcript (and queue its extraction when asked) and say so. A broker that
    refuses the extraction is told, the transcript stays stored (as the API's 503 keeps it): the
    outer transaction holds the task's sending until `form.save` has handed back what it stored."""
    posted, refused = None, None
    try:
        with transaction.atomic():
            posted = form.save(actor=shortcuts.actor(request))
    except BrokerError as exc:
        refused = exc
    if posted:
        _say_posted(request, posted, refused)
    return posted


def _say_posted(request, posted: PostedTranscript, refused: BrokerError | None = None) -> None:
    report = posted.report
    stored = count(report.messages, "message")
    if report.created:
        messages.success(request, f"Stored the transcript, {stored}.")
    elif report.added:
        messages.success(
            request,
            f"This transcript was posted before (id {report.transcript.external_id!r} in {report.transcript.scope}): "
            f"added {count(report.added, 'new message')}, {report.unchanged} were stored already.",
        )
    else:
        messages.info(
            request,
            f"This transcript was posted before (id {report.transcript.external_id!r} in {report.transcript.scope}) "
            f"with all {stored}: nothing changed.",
        )
    if refused is not None:
        messages.error(
            request,
            f"Its extraction was not queued: the {shortcuts.BROKER} is unreachable "
            f"({type(refused).__name__}: {refused}). "
            "Extract it from its page once the broker is back.",
        )
    elif posted.extraction is not None:
        if posted.extraction.reused:
            messages.info(request, f"Its extraction is {posted.extraction.status} already.")
        else:
            messages.success(request, "Extraction queued.")


@shortcuts.login_required_htmx
@require_GET
def transcript_detail(request, pk):
    """A transcript's messages as the projection sees them, each with what extraction made of it;
    `?dry_run=1` shows what an extraction would do now, against the current store."""
    transcript = get_object_or_404(Transcript, pk=pk)
    detail = detail_of(transcript)
    dry_run, dry_run_task = None, None
    if request.GET.get("dry_run_task"):
        try:
            asked = uuid.UUID(request.GET["dry_run_task"])
        except ValueError:
            asked = None
        mine = TaskRun.objects.filter(kind=DRY_RUN, params__transcript=str(transcript.pk))
        dry_run_task = mine.filter(pk=asked).first() if asked else None
        if dry_run_task is not None and dry_run_task.status == TaskRun.Status.SUCCEEDED:
            dry_run = _dry_run(dry_run_task.result, dry_run_task.result.get("outcomes", []))
    elif request.GET.get("dry_run") and not _dry_run_refused(request):
        report = dry_run_now(transcript, actor=shortcuts.actor(request))
        if report is not None:
            dry_run = _dry_run(report.to_dict(), [outcome.to_dict() for outcome in report.outcomes])
    if dry_run:
        for message in detail["messages"]:
            message["dry_run"] = dry_run["by_message"].get(message["index"])
    runs = TaskRun.objects.filter(kind="extract", params__transcript=str(transcript.pk))[:10]
    summary = rollup.current_summary(transcript)
    last_rollup = next((run.result.get("rollup") for run in runs if run.result.get("rollup")), None)
    context = {
        "transcript": transcript,
        "detail": detail,
        "downloads": _downloads(transcript),
        "dry_run": dry_run,
        "dry_run_task": dry_run_task,
        "dry_run_in_background": bool(request.GET.get("dry_run")) and not dry_run,
        "runs": runs,
        "summary": summary,
        "rollup_reason": (last_rollup or {}).get("reason")
        or ("" if settings.MEMORYUI_LLM_BASE_URL and settings.MEMORYUI_LLM_MODEL else "summaries need an LLM"),
    }
    return shortcuts.render(request, "memoryui/transcript_detail.html", context)


def _downloads(transcript: Transcript) -> list[dict]:
    """The projected export's files: the provider-safe messages, and the format the transcript
    came in when that is another."""
    url = reverse("transcript_download", args=[transcript.pk])
    downloads = [
        {
            "format": PROVIDER_FORMAT,
            "label": "Download provider-safe messages",
            "title": "The projection as OpenAI chat messages, the trailing open tool exchange trimmed",
            "url": f"{url}?as={PROVIDER_FORMAT}",
        }
    ]
    original = sessionlogs.original_format(transcript.metadata)
    if original != PROVIDER_FORMAT:
        downloads.append(
            {
                "format": original,
                "label": f"Download as {sessionlogs.FORMAT_LABELS[original]}",
                "title": "The projection in the format the transcript came in, to resume from",
                "url": f"{url}?as={original}",
            }
        )
    return downloads


@shortcuts.login_required_htmx
@require_GET
def transcript_download(request, pk):
    """The projected export as a file (the API's `?projected=true`): provider-safe, the trailing
    open tool exchange trimmed, in the format `?as=` names (default: the one it came in)."""
    transcript = get_object_or_404(Transcript, pk=pk)
    try:
        export = sessionlogs.export(transcript, request.GET.get("as") or None, projected=True)
    except sessionlogs.SessionLogError as exc:
        return HttpResponseBadRequest(f"{exc}\n", content_type="text/plain; charset=utf-8")
    extension, media_type = _FILE_TYPES.get(export.format, ("json", "application/json"))
    stem = _FILE_NAME_UNSAFE.sub("-", transcript.external_id).strip("-.")[:80] or str(transcript.pk)
    response = HttpResponse(export.text(), content_type=f"{media_type}; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=f"{stem}.projected.{export.format}.{extension}"
    )
    return response


def _dry_run_refused(request) -> bool:
    """A dry run from the page counts against the user's expensive rate, as the API's does (and on
    the same count); refused, the page says when to try again."""
    ident = f"user:{request.user.pk}"
    wait = throttling.hit(ident, throttling.API) or throttling.hit(ident, throttling.EXPENSIVE)
    if wait is None:
        return False
    throttling.refusals.note(ident, "page")
    messages.warning(request, f"Too many dry runs and recalls: try again in {wait} s (MEMORYUI_API_EXPENSIVE_RATE).")
    return True


def _dry_run(report: dict, outcomes: list[dict]) -> dict:
    """A dry run's report, with its outcomes by message index, for the page."""
    by_message: dict[int, list[dict]] = {}
    for outcome in outcomes:
        by_message.setdefault(outcome["message"], []).append(outcome)
    return {"report": report, "by_message": by_message}


@shortcuts.login_required_htmx
@require_POST
def transcript_dry_run(request, pk):
    """Start a dry run as a background task (a transcript too long for a request), and show the
    transcript with its progress; its decisions appear there once it is done. Writes nothing, so
    every role may."""
    transcript = get_object_or_404(Transcript, pk=pk)
    if _dry_run_refused(request):
        return redirect(transcript)
    try:
        with transaction.atomic():
            run = enqueue_dry_run(transcript, actor=shortcuts.actor(request))
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what="The dry run", back=transcript.get_absolute_url())
    return redirect(f"{transcript.get_absolute_url()}?dry_run_task={run.pk}")


@access.editor_required
@require_POST
def transcript_extract(request, pk):
    """Queue the extraction (the dry run's Apply) and go to its task; with one queued or running
    already, go to that one."""
    transcript = get_object_or_404(Transcript, pk=pk)
    try:
        with transaction.atomic():
            run = enqueue_extraction(transcript, actor=shortcuts.actor(request))
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what="The extraction", back=transcript.get_absolute_url())
    if run.reused:
        messages.info(request, f"This transcript's extraction is {run.status} already: here it is.")
    else:
        messages.success(request, "Extraction queued.")
    return redirect(run)


@shortcuts.login_required_htmx
@require_GET
def task_list(request):
    runs = TaskRun.objects.all()
    status = request.GET.get("status", "")
    if status in TaskRun.Status.values:
        runs = runs.filter(status=status)
    page = Paginator(runs, TRANSCRIPT_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "status": status, "statuses": TaskRun.Status.values}
    if not shortcuts.wants_fragment(request):  # the rows alone do not show the schedule
        context["schedule"] = {
            "every_minutes": settings.MEMORYUI_DECAY_INTERVAL_MINUTES,
            "last": TaskRun.objects.filter(kind=DECAY).first(),
            "expired": decay.expired().count(),
        }
    return shortcuts.page(request, "memoryui/task_list.html", "memoryui/partials/task_rows.html", context)


@access.editor_required
@require_POST
def task_decay_now(request):
    """Run the scheduled decay now (as a task, like the schedule does)."""
    try:
        with transaction.atomic():
            run = enqueue_decay(actor=shortcuts.actor(request))
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what="The decay", back=reverse("task_list"))
    messages.success(request, "Decay queued.")
    return redirect(run)


@shortcuts.login_required_htmx
@require_GET
def task_detail(request, pk):
    run = get_object_or_404(TaskRun, pk=pk)
    return shortcuts.page(request, "memoryui/task_detail.html", "memoryui/partials/task_progress.html", {"run": run})


@access.editor_required
@require_POST
def task_action(request, pk, action):
    """Retry a failed, stalled or cancelled run, or cancel one that is not finished (memoryui.runs)."""
    run = get_object_or_404(TaskRun, pk=pk)
    act = {"retry": runs.retry, "cancel": runs.cancel}.get(action)
    if act is None:
        raise Http404(f"no task action {action!r}")
    try:
        run = act(run, actor=shortcuts.actor(request))
    except runs.RunStateError as exc:
        messages.error(request, str(exc))
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what="The retry", back=run.get_absolute_url())
    else:
        messages.success(request, "Sent again." if action == "retry" else "Cancelled: it stops at its next step.")
    return redirect(run)
