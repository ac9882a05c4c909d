"""HTML views (function-based); each renders the full page or, for htmx, its partial.

Every data panel shows one of: its data; empty (with what to do); unauthorized (the session
expired: a 401 partial, never a redirect into the panel); unavailable (which backend, the
status and the message, and a Retry). A panel's data is loaded inside `_load`, so a
failing backend degrades that panel and never the page.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import EmptyPage, Paginator
from django.db import DatabaseError, transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.template import loader
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from memoryui import decay, extraction, rollup, rules
from memoryui.api import error_body
from memoryui.api_transcripts import transcript_detail as detail_of
from memoryui.forms import SORT_FIELDS, BulkActionForm, MemoryFilterForm, MemoryForm, TokenForm
from memoryui.models import ApiToken, ConflictError, IndexOutbox, Memory, MemoryEvent, TaskRun, Transcript
from memoryui.tasks import DECAY, enqueue_decay, enqueue_extraction
from recall.documents import IndexUnavailable
from recall.fusion import LIMIT_MAX
from recall.search import search

logger = logging.getLogger(__name__)

STATE_HEADER = "X-Memoryui-State"  # app.js swaps 4xx/5xx responses that carry it
ALERTS = "#alerts"  # where errors of POST actions go: the row or form stays as it was
SCOPE_BARS = 15
ACTIVITY_SIZE = 10
HISTORY_LIMIT = 500
LIST_COLUMNS = ("id", "text", "kind", "tier", "scope", "importance", "pinned", "status", "entity_key", "updated_at")


# --- plumbing: partial or page, panel states -----------------------------------------------


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.username}"


def _wants_fragment(request: HttpRequest) -> bool:
    """An htmx request for a panel. A history restore (cache miss) needs the whole page."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def _render(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    response = render(request, template, context, status=status)
    # The page and its fragment share a URL: caches must keep them apart.
    patch_vary_headers(response, ["HX-Request"])
    return response


def _with_state(request: HttpRequest, response: HttpResponse, state: str) -> HttpResponse:
    response[STATE_HEADER] = state
    if request.method != "GET":
        # A failed action must not replace the row or form it came from.
        retarget(response, ALERTS)
        reswap(response, "innerHTML")
    return response


@dataclass(frozen=True)
class Unavailable:
    backend: str
    status: int
    message: str


def _load(loader_: Callable, *, backend: str = "database"):
    """Run one panel's data load: (value, None), or (None, Unavailable) when the backend fails."""
    try:
        return loader_(), None
    except DatabaseError as exc:
        logger.warning("%s unavailable while loading a panel: %s", backend, exc)
        message = (str(exc) or exc.__class__.__name__).splitlines()[0][:300]
        return None, Unavailable(backend=backend, status=503, message=message)


def _retry(request: HttpRequest, target: str) -> dict:
    """How the Retry button re-issues this request: the same URL into the same panel."""
    url = request.get_full_path()
    if request.method == "GET":
        return {"method": "get", "url": url, "href": url, "target": target, "swap": "innerHTML", "vals": ""}
    vals = {key: value for key, value in request.POST.items() if key != "csrfmiddlewaretoken"}
    return {
        "method": "post",
        "url": url,
        "href": _current_page(request),
        "target": target,
        "swap": "outerHTML" if target.startswith("#row-") else "innerHTML",
        "vals": json.dumps(vals),
    }


def _reload(request: HttpRequest, url: str | None = None) -> dict:
    """A Retry that reloads the page (for panels the page cannot render without)."""
    return {"method": "", "url": "", "href": url or request.get_full_path(), "target": "", "swap": "", "vals": ""}


def _fragment(request: HttpRequest, template: str, panel: dict) -> HttpResponse:
    """Render one panel's partial; a failed state answers 4xx/5xx with the state header."""
    if panel.get("unavailable"):
        return _with_state(request, _render(request, template, {"panel": panel}, 503), "unavailable")
    if panel.get("invalid"):
        return _with_state(request, _render(request, template, {"panel": panel}, 400), "invalid")
    return _render(request, template, {"panel": panel})


def _alert(request: HttpRequest, *, status: int, state: str, **panel) -> HttpResponse:
    """A state partial on its own: into the panel for a GET, into the page's alerts for an action."""
    panel.setdefault("dismissible", request.method != "GET")
    template = f"memoryui/partials/state_{state}.html"
    return _with_state(request, _render(request, template, {"panel": panel}, status), state)


def _flash(request: HttpRequest, unavailable: Unavailable | None, error: str | None, success: Callable) -> None:
    """The outcome of a plain (non-htmx) POST, shown on the page it redirects to."""
    if unavailable:
        messages.error(request, f"The {unavailable.backend} is unavailable: {unavailable.message}")
    elif error:
        messages.error(request, error)
    else:
        messages.success(request, success())


def _validation_message(exc: rules.MemoryValidationError) -> str:
    return "; ".join(f"{field}: {', '.join(reasons)}" for field, reasons in exc.errors.items())


def _current_page(request: HttpRequest) -> str:
    """The page the user is on (for htmx requests, the page that issued it)."""
    htmx = getattr(request, "htmx", None)
    page = htmx.current_url_abs_path if htmx else None
    return page or request.get_full_path()


def _safe_next(request: HttpRequest, default: str) -> str:
    candidate = request.POST.get("next") or ""
    if url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()}, require_https=False):
        return candidate
    return default


def login_required_htmx(view):
    """login_required for the UI: a page redirects to sign in; an htmx request gets a 401
    unauthorized partial (a redirect would swap the whole login page into a panel)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if not _wants_fragment(request):
            return redirect_to_login(request.get_full_path())
        login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': _current_page(request)})}"
        return _alert(request, status=401, state="unauthorized", login_url=login_url)

    return wrapper


# --- dashboard ---------------------------------------------------------------------------


def _bars(counts: dict[str, int], param: str, limit: int | None = None) -> dict:
    top = max(counts.values(), default=0)
    items = list(counts.items())
    shown, rest = (items[:limit], items[limit:]) if limit else (items, [])
    list_url = reverse("memory_list")
    return {
        "bars": [
            {
                "label": label,
                "count": count,
                "width": f"{100 * count / top:.1f}" if top else "0",
                "url": f"{list_url}?{urlencode({param: label})}",
            }
            for label, count in shown
        ],
        "more": len(rest),
        "more_count": sum(count for _, count in rest),
    }


def _stats_panel(request: HttpRequest) -> dict:
    stats, unavailable = _load(Memory.objects.stats)
    context = {"retry": _retry(request, "#stats-panel"), "unavailable": unavailable, "stats": stats}
    if stats:
        context["breakdowns"] = [
            ("Kind", _bars(stats["by_kind"], "kind")),
            ("Tier", _bars(stats["by_tier"], "tier")),
            ("Scope", _bars(stats["by_scope"], "scope", limit=SCOPE_BARS)),
        ]
    return context


def _activity_panel(request: HttpRequest) -> dict:
    events, unavailable = _load(
        lambda: list(
            MemoryEvent.objects.select_related("memory").only(
                "action", "actor", "reason", "created_at", "memory", "memory__text", "memory__scope"
            )[:ACTIVITY_SIZE]
        )
    )
    return {"retry": _retry(request, "#activity"), "unavailable": unavailable, "events": events}


def _index_panel(request: HttpRequest) -> dict:
    """Index health: each index beside the database, pending work, the last checks, repair."""
    from recall import health

    status, unavailable = _load(health.status)
    context = {"retry": _retry(request, "#index-health"), "unavailable": unavailable, "health": status}
    if status:
        context["last_verify"] = health.summary(status.last_verify) if status.last_verify else ""
        context["last_check"] = health.summary(status.last_check) if status.last_check else ""
        context["mismatch"] = next((i.mismatch for i in status.indexes if i.mismatch), None)
    return context


DASHBOARD_PANELS = {
    "stats-panel": ("memoryui/partials/stats.html", _stats_panel),
    "activity": ("memoryui/partials/activity.html", _activity_panel),
    "index-health": ("memoryui/partials/index_health.html", _index_panel),
}
INDEX_ACTIONS = ("verify", "repair", "rebuild")


@login_required_htmx
@require_POST
def index_action(request, action: str):
    """Verify the indexes now, or queue a repair or a rebuild; htmx gets the panel back."""
    from recall import health
    from recall.tasks import rebuild_indexes, repair_indexes

    if action not in INDEX_ACTIONS:
        raise Http404("no such index action")
    actor = _actor(request)
    error = None

    outcome = {"level": "success"}

    def act() -> str:
        if action == "verify":
            check = health.run("verify", actor=actor)
            outcome["level"] = "success" if check.ok else "warning"
            return "Verified: " + health.summary(check)
        task = repair_indexes if action == "repair" else rebuild_indexes
        result = task.delay(actor=actor)
        if result.ready():  # tasks run inline (CELERY_TASK_ALWAYS_EAGER)
            if result.failed():
                raise IndexUnavailable(action, str(result.result))
            return f"{action.capitalize()} finished."
        return f"{action.capitalize()} queued as task {result.id}; refresh to follow it."

    notice = unavailable = None
    try:
        notice, unavailable = _load(act)
    except IndexUnavailable as exc:
        error = f"{action.capitalize()} failed: {exc}"
    if not _wants_fragment(request):
        _flash(request, unavailable, error, lambda: notice)
        return redirect("dashboard")
    if unavailable:
        return _alert(
            request, status=503, state="unavailable", unavailable=unavailable, retry=_retry(request, "#index-health")
        )
    panel = _index_panel(request)
    panel["notice"], panel["notice_level"], panel["error"] = notice, outcome["level"], error
    return _fragment(request, "memoryui/partials/index_health.html", panel)


@login_required_htmx
@require_GET
def dashboard(request):
    if _wants_fragment(request):
        template, panel = DASHBOARD_PANELS.get(request.htmx.target, DASHBOARD_PANELS["stats-panel"])
        return _fragment(request, template, panel(request))
    return _render(
        request,
        "memoryui/dashboard.html",
        {
            "stats_panel": _stats_panel(request),
            "activity_panel": _activity_panel(request),
            "index_panel": _index_panel(request),
        },
    )


# --- memory list and bulk actions ----------------------------------------------------------


def _sort_headers(current: str) -> dict:
    """For each sort key: the sort its column header applies (flip the current one, else
    descending first) and the arrow showing the current order."""
    descending = current.startswith("-")
    headers = {}
    for key in SORT_FIELDS:
        active = current.lstrip("-") == key
        headers[key] = {
            "sort": key if active and descending else f"-{key}",
            "arrow": ("↓" if descending else "↑") if active else "",
        }
    return headers


def _list_url(request: HttpRequest) -> str:
    query = request.GET.urlencode()
    return reverse("memory_list") + (f"?{query}" if query else "")


def _results_panel(request: HttpRequest, form: MemoryFilterForm) -> dict:
    context = {
        "retry": _retry(request, "#results"),
        "list_url": _list_url(request),
        "page": None,
        "unavailable": None,
        "invalid": None,
        "invalid_title": "These filters are not valid",
        "clear_url": reverse("memory_list"),
    }
    if not form.is_valid():
        context["invalid"] = [
            f"{name}: {message}" if name != "__all__" else message
            for name, errors in form.errors.items()
            for message in errors
        ]
        return context
    context["has_filters"] = form.has_filters()
    if form.hybrid():
        context["search"], context["unavailable"] = _search_results(form)
        return context
    if form.cleaned_data["q"].strip() and form.cleaned_data["match"] == "hybrid":
        context["match_notice"] = (
            f"Hybrid search covers active memories; these are plain-text matches among "
            f"{form.cleaned_data['status']} memories."
        )
    context["sort_headers"] = _sort_headers(form.cleaned_data["sort"])
    paginator = Paginator(form.queryset().only(*LIST_COLUMNS), settings.MEMORYUI_LIST_PAGE_SIZE)
    number = form.cleaned_data["page"] or 1

    def load_page():
        page = paginator.page(number)
        page.object_list = list(page.object_list)  # query here, inside the guard
        return page

    try:
        context["page"], context["unavailable"] = _load(load_page)
    except EmptyPage:
        pages = paginator.num_pages
        context["invalid"] = [f"page: there is no page {number}; these filters give {pages} page{'s' * (pages != 1)}"]
    return context


def _search_results(form: MemoryFilterForm) -> tuple[dict | None, Unavailable | None]:
    """The search box's hybrid results: the ranking's first 20 that pass the filters, cut by the floor line."""
    data = form.cleaned_data
    try:
        result, unavailable = _load(
            lambda: search(data["q"], scopes=[data["scope"]] if data["scope"] else None, limit=LIMIT_MAX)
        )
    except IndexUnavailable as exc:
        return None, Unavailable(backend="search index", status=503, message=str(exc))
    if unavailable:
        return None, unavailable
    pending, _ = _load(IndexOutbox.objects.count)
    if pending:
        result.notices.append(
            f"{pending} change{'s are' if pending != 1 else ' is'} still waiting to reach the search indexes; "
            "until then search may miss or show outdated memories (see the index health on the dashboard)"
        )
    return {
        "result": result,
        "results": [found for found in result.results if form.keeps(found.memory)],
        "below_floor": [found for found in result.below_floor if form.keeps(found.memory)],
        "filtered_out": sum(not form.keeps(found.memory) for found in result.results),
        "text_url": reverse("memory_list") + "?" + urlencode({**form.data.dict(), "match": "text"}),
    }, None


def _scope_choices() -> list[str]:
    scopes, _ = _load(Memory.objects.scope_names)
    return scopes or []


@login_required_htmx
@require_GET
def memory_list(request):
    form = MemoryFilterForm(request.GET)
    results = _results_panel(request, form)
    if _wants_fragment(request):
        return _fragment(request, "memoryui/partials/memory_results.html", results)
    context = {"form": form, "results": results, "scopes": _scope_choices()}
    return _render(request, "memoryui/memory_list.html", context, status=400 if results["invalid"] else 200)


@login_required_htmx
@require_POST
def memory_bulk(request):
    """Apply one action to the checked memories; the list's filters ride in the query string."""
    form = BulkActionForm(request.POST)
    list_url = _list_url(request)
    result = error = unavailable = None
    if form.is_valid():
        try:
            result, unavailable = _load(lambda: form.apply(actor=_actor(request)))
        except rules.MemoryValidationError as exc:
            error = "Nothing changed: " + _validation_message(exc)
        except ConflictError as exc:
            error = f"Nothing changed: {exc}"
    else:
        error = " ".join(message for errors in form.errors.values() for message in errors)
    if not _wants_fragment(request):
        _flash(request, unavailable, error, lambda: result.message)
        return redirect(list_url)
    if unavailable:
        return _alert(
            request, status=503, state="unavailable", unavailable=unavailable, retry=_retry(request, "#results")
        )
    if error:
        return _alert(request, status=400, state="invalid", invalid=[error])
    results = _results_panel(request, MemoryFilterForm(request.GET))
    results["notice"] = result.message
    return _fragment(request, "memoryui/partials/memory_results.html", results)


ROW_ACTIONS = ("pin", "unpin", "tombstone", "restore")
ROW_ACTION_DONE = {"pin": "Pinned", "unpin": "Unpinned", "tombstone": "Tombstoned", "restore": "Restored"}


@login_required_htmx
@require_POST
def memory_action(request, pk, action: str):
    """Pin, unpin, tombstone (with a reason) or restore one memory; htmx gets the updated row."""
    if action not in ROW_ACTIONS:
        raise Http404("no such action")
    reason = request.POST.get("reason", "")
    actor = _actor(request)

    def act() -> Memory:
        memory = get_object_or_404(Memory, pk=pk)
        memory.apply_action(action, actor=actor, reason=reason)
        return memory

    memory = error = unavailable = None
    error_status = 400
    try:
        memory, unavailable = _load(act)
    except rules.MemoryValidationError as exc:
        error = _validation_message(exc)
    except ConflictError as exc:
        error, error_status = f"Cannot {action}: {exc}", 409
    next_url = _safe_next(request, reverse("memory_detail", args=[pk]))
    if not _wants_fragment(request):
        _flash(request, unavailable, error, lambda: f"{ROW_ACTION_DONE[action]}: {memory.text[:80]}")
        return redirect(next_url)
    if unavailable:
        target = f"#{request.htmx.target}" if request.htmx.target else ALERTS
        return _alert(request, status=503, state="unavailable", unavailable=unavailable, retry=_retry(request, target))
    if error:
        return _alert(request, status=error_status, state="invalid", invalid=[error])
    return _render(request, "memoryui/partials/memory_row.html", {"memory": memory, "next_url": next_url})


# --- detail, create, edit ---------------------------------------------------------------------


def _display(value) -> str:
    if value is None:
        return "—"
    if value == "":
        return "(empty)"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _history(memory_id) -> list[dict]:
    events = MemoryEvent.objects.filter(memory_id=memory_id).order_by("-created_at", "-id")[:HISTORY_LIMIT]
    return [
        {
            "event": event,
            "changes": [
                {"field": name, "before": _display(before), "after": _display(after)}
                for name, before, after in event.changes()
            ],
        }
        for event in events
    ]


def _history_panel(request: HttpRequest, memory_id) -> dict:
    rows, unavailable = _load(lambda: _history(memory_id))
    return {
        "retry": _retry(request, "#history"),
        "unavailable": unavailable,
        "history": rows,
        "history_truncated": rows is not None and len(rows) >= HISTORY_LIMIT,
    }


@login_required_htmx
@require_GET
def memory_detail(request, pk):
    if _wants_fragment(request):
        return _fragment(request, "memoryui/partials/history.html", _history_panel(request, pk))
    memory, unavailable = _load(lambda: get_object_or_404(Memory, pk=pk))
    context = {
        "memory": memory,
        "detail_panel": {"unavailable": unavailable, "retry": _reload(request)},
        "metadata_json": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True) if memory else "",
        "history_panel": _history_panel(request, pk) if memory else None,
        "next_url": request.get_full_path(),
    }
    return _render(request, "memoryui/memory_detail.html", context)


def _form_page(request, form: MemoryForm, *, memory: Memory | None) -> HttpResponse:
    actor = _actor(request)
    status = 200
    unavailable = None
    if request.method == "POST" and form.is_valid():
        saved, unavailable = _load(lambda: form.save(actor=actor))
        if saved is not None:
            result, created = saved
            if memory is not None:
                messages.success(request, "Saved.")
            elif created:
                messages.success(request, "Created.")
            else:
                merged = result.events.filter(action=MemoryEvent.Action.MERGED).order_by("-created_at", "-id").first()
                why = merged.reason if merged else "duplicate"
                messages.info(request, f"Merged into an existing memory ({why}).")
            return redirect(result)
    if request.method == "POST":
        status = 503 if unavailable else 400
    context = {"form": form, "memory": memory, "form_panel": {"unavailable": unavailable, "retry": None}}
    return _render(request, "memoryui/memory_form.html", context, status=status)


@login_required_htmx
@require_http_methods(["GET", "POST"])
def memory_create(request):
    return _form_page(request, MemoryForm(request.POST or None), memory=None)


@login_required_htmx
@require_http_methods(["GET", "POST"])
def memory_edit(request, pk):
    memory = get_object_or_404(Memory, pk=pk)
    return _form_page(request, MemoryForm(request.POST or None, memory=memory), memory=memory)


# --- API tokens ------------------------------------------------------------------------------


@login_required_htmx
@require_http_methods(["GET", "POST"])
def tokens(request):
    """List the user's tokens; a POST issues one and shows its raw key on this response only."""
    form = TokenForm(request.POST or None)
    issued = raw_key = None
    status = 200
    if request.method == "POST":
        saved = form.save(user=request.user) if form.is_valid() else None
        if saved:
            issued, raw_key = saved
            form = TokenForm()
        else:
            status = 400
    token_list, unavailable = _load(lambda: list(ApiToken.objects.filter(user=request.user)))
    context = {
        "form": form,
        "issued": issued,
        "raw_key": raw_key,
        "tokens_panel": {
            "tokens": token_list,
            "unavailable": unavailable,
            "retry": _reload(request, reverse("tokens")),
        },
    }
    response = _render(request, "memoryui/tokens.html", context, status=201 if issued else status)
    if raw_key:
        add_never_cache_headers(response)  # the raw key must not outlive this response
    return response


@login_required_htmx
@require_POST
def token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if token.revoke():
        messages.success(request, f"Revoked token “{token.name}” ({token.key_prefix}…).")
    else:
        messages.info(request, f"Token “{token.name}” was already revoked.")
    return redirect("tokens")


# --- error handlers --------------------------------------------------------------------------


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse(error_body(404, "Not found."), status=404)
    context = {"status": 404, "title": "Not found", "message": "There is nothing at this address."}
    if _wants_fragment(request):
        return _alert(request, status=404, state="invalid", invalid=["Not found: this memory or page does not exist."])
    return render(request, "memoryui/error.html", context, status=404)


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: a page that says what happened, or for htmx a state the panel shows.

    The usual cause is a page loaded before signing in again elsewhere (the token rotated).
    """
    message = "This page is out of date (its security token expired). Reload the page and try again."
    if _wants_fragment(request):
        return _alert(request, status=403, state="invalid", invalid=[message], invalid_title="Reload needed")
    context = {"status": 403, "title": "Reload needed", "message": message}
    return render(request, "memoryui/error.html", context, status=403)


def server_error(request):
    if _is_api(request):
        return JsonResponse(error_body(500, "Internal server error.", code="server_error"), status=500)
    # Rendered without the request: its context processors may be what failed (session, DB).
    context = {"status": 500, "title": "Something went wrong", "message": "The error was logged. Try again."}
    if _wants_fragment(request):
        unavailable = Unavailable(backend="server", status=500, message="internal server error")
        body = loader.render_to_string(
            "memoryui/partials/state_unavailable.html", {"panel": {"unavailable": unavailable, "retry": None}}
        )
        return _with_state(request, HttpResponse(body, status=500), "unavailable")
    return HttpResponse(loader.render_to_string("memoryui/error.html", context), status=500)


# --- transcripts and tasks ---------------------------------------------------------------------

TRANSCRIPT_PAGE_SIZE = 50


@login_required_htmx
@require_GET
def transcript_list(request):
    transcripts = Transcript.objects.annotate(message_count=Count("messages")).order_by("-updated_at", "pk")
    scope = request.GET.get("scope", "").strip()
    if scope:
        transcripts = transcripts.filter(scope=scope)
    page = Paginator(transcripts, TRANSCRIPT_PAGE_SIZE).get_page(request.GET.get("page"))
    return _render(request, "memoryui/transcript_list.html", {"page": page, "scope": scope, "scopes": _scope_choices()})


@login_required_htmx
@require_GET
def transcript_detail(request, pk):
    """A transcript's messages as the projection sees them, each with what extraction made of it;
    `?dry_run=1` shows what an extraction would do now, against the current store."""
    transcript = get_object_or_404(Transcript, pk=pk)
    detail = detail_of(transcript)
    dry_run = None
    if request.GET.get("dry_run"):
        report = extraction.extract(transcript, dry_run=True, actor=_actor(request))
        dry_run = {"report": report, "by_message": {}}
        for outcome in report.outcomes:
            dry_run["by_message"].setdefault(outcome.message, []).append(outcome.to_dict())
        for message in detail["messages"]:
            message["dry_run"] = dry_run["by_message"].get(message["index"])
    runs = TaskRun.objects.filter(kind="extract", params__transcript=str(transcript.pk))[:10]
    summary = rollup.current_summary(transcript)
    last_rollup = next((run.result.get("rollup") for run in runs if run.result.get("rollup")), None)
    context = {
        "transcript": transcript,
        "detail": detail,
        "dry_run": dry_run,
        "runs": runs,
        "summary": summary,
        "rollup_reason": (last_rollup or {}).get("reason")
        or ("" if settings.MEMORYUI_LLM_BASE_URL and settings.MEMORYUI_LLM_MODEL else "summaries need an LLM"),
    }
    return _render(request, "memoryui/transcript_detail.html", context)


@login_required_htmx
@require_POST
def transcript_extract(request, pk):
    """Queue the extraction (the dry run's Apply) and go to its task."""
    transcript = get_object_or_404(Transcript, pk=pk)
    with transaction.atomic():
        run = enqueue_extraction(transcript, actor=_actor(request))
    messages.success(request, "Extraction queued.")
    return redirect(run)


@login_required_htmx
@require_GET
def task_list(request):
    runs = TaskRun.objects.all()
    status = request.GET.get("status", "")
    if status in TaskRun.Status.values:
        runs = runs.filter(status=status)
    page = Paginator(runs, TRANSCRIPT_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "status": status, "statuses": TaskRun.Status.values}
    if _wants_fragment(request):
        return _render(request, "memoryui/partials/task_rows.html", context)
    context["schedule"] = {
        "every_minutes": settings.MEMORYUI_DECAY_INTERVAL_MINUTES,
        "last": TaskRun.objects.filter(kind=DECAY).first(),
        "expired": decay.expired().count(),
    }
    return _render(request, "memoryui/task_list.html", context)


@login_required_htmx
@require_POST
def task_decay_now(request):
    """Run the scheduled decay now (as a task, like the schedule does)."""
    with transaction.atomic():
        run = enqueue_decay(actor=_actor(request))
    messages.success(request, "Decay queued.")
    return redirect(run)


@login_required_htmx
@require_GET
def task_detail(request, pk):
    run = get_object_or_404(TaskRun, pk=pk)
    if _wants_fragment(request):
        return _render(request, "memoryui/partials/task_progress.html", {"run": run})
    return _render(request, "memoryui/task_detail.html", {"run": run})
