"""HTML views of the store (function-based); each renders the full page or, for htmx, its partial.

Every data panel shows its data or a state (empty, unauthorized, unavailable): the plumbing is
`web.shortcuts`'s, and a panel's data is loaded inside `shortcuts.load`, so a failing backend
degrades that panel and never the page. Transcripts and tasks are in `views_transcripts`, the
store's hygiene (duplicates, clean-up, undo) in `views_hygiene`.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.core.paginator import EmptyPage, Paginator
from django.db.models import Count, DateTimeField
from django.db.models.functions import TruncDate
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.template import loader
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from api import rest
from memoryui import background, roles, rules
from memoryui.models import ApiToken, ConflictError, IndexOutbox, Memory, MemoryEvent
from recall import explain
from recall.models import RecallLogEntry
from searchindex import health
from searchindex.documents import IndexUnavailable
from searchindex.fusion import LIMIT_MAX
from searchindex.indexes import get_index
from searchindex.search import Found, search
from searchindex.tasks import rebuild_indexes, repair_indexes, tune_vector_search
from web import access, scopes, shortcuts
from web.filters import MemoryListFilterSet
from web.forms import SORT_FIELDS, BulkActionForm, MemoryForm, TokenForm

SCOPE_BARS = 15
ACTIVITY_SIZE = 10
HISTORY_LIMIT = 500
LIST_COLUMNS = ("id", "text", "kind", "tier", "scope", "importance", "pinned", "status", "entity_key", "updated_at")


# --- dashboard ---------------------------------------------------------------------------


def _bars(counts: dict[str, int], param: str, limit: int | None = None) -> dict:
    top = max(counts.values(), default=0)
    items = list(counts.items())
    shown, others = (items[:limit], items[limit:]) if limit else (items, [])
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
        "more": len(others),
        "more_count": sum(count for _, count in others),
    }


def _stats_panel(request: HttpRequest) -> dict:
    stats, unavailable = shortcuts.load(Memory.objects.stats)
    context = {"retry": shortcuts.retry(request, "#stats-panel"), "unavailable": unavailable, "stats": stats}
    if stats:
        context["breakdowns"] = [
            ("Kind", _bars(stats["by_kind"], "kind")),
            ("Tier", _bars(stats["by_tier"], "tier")),
            ("Scope", _bars(stats["by_scope"], "scope", limit=SCOPE_BARS)),
        ]
    return context


def _activity_panel(request: HttpRequest) -> dict:
    events, unavailable = shortcuts.load(
        lambda: list(
            MemoryEvent.objects.select_related("memory").only(
                "action", "actor", "reason", "created_at", "memory", "memory__text", "memory__scope"
            )[:ACTIVITY_SIZE]
        )
    )
    return {"retry": shortcuts.retry(request, "#activity"), "unavailable": unavailable, "events": events}


def _index_panel(request: HttpRequest) -> dict:
    """Index health: each index beside the database, pending work, the last checks, repair."""
    status, unavailable = shortcuts.load(health.status)
    context = {"retry": shortcuts.retry(request, "#index-health"), "unavailable": unavailable, "health": status}
    if status:
        context["last_verify"] = health.summary(status.last_verify) if status.last_verify else ""
        context["last_check"] = health.summary(status.last_check) if status.last_check else ""
        context["mismatch"] = next((i.mismatch for i in status.indexes if i.mismatch), None)
        context["hnsw"] = _vector_hnsw(status)
    return context


def _vector_hnsw(status: health.Health) -> dict | None:
    """The vector index's HNSW graphs beside the settings (`VectorIndex.hnsw`), when it answered."""
    if not any(index.name == "vector" and not index.error for index in status.indexes):
        return None
    try:
        hnsw = get_index("vector").hnsw()
    except IndexUnavailable:
        return None
    measured = health.last_tuned()
    line = hnsw["configured"]["exact_below"]
    hnsw["scopes"] = [
        {**graph, "scope": scope, "exact": 0 < graph["vectors"] < line, "measured": measured.get(scope)}
        for scope, graph in sorted(hnsw["collections"].items(), key=lambda item: (-item[1]["vectors"], item[0]))
    ]
    return hnsw


# The dashboard's chart: how many memories were created (imports too), recalled, tombstoned and
# merged into per day, for the last CHART_DAYS days; each series a tuple of MemoryEvent actions.
CHART_DAYS = 30
CHART_SERIES = {
    "created": (MemoryEvent.Action.CREATED, MemoryEvent.Action.IMPORTED),
    "recalled": (MemoryEvent.Action.RECALLED,),
    "tombstoned": (MemoryEvent.Action.TOMBSTONED,),
    "merged": (MemoryEvent.Action.MERGED,),
}


def events_per_day(scope: str = "", *, days: int = CHART_DAYS, today: date | None = None) -> dict:
    """Per day (in the current time zone) of the last `days` up to `today`, the count of each
    CHART_SERIES in `scope` ("" for every scope): one grouped query, every day present."""
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    series_of = {action: name for name, actions in CHART_SERIES.items() for action in actions}
    events = MemoryEvent.objects.filter(
        created_at__gte=timezone.make_aware(datetime.combine(first, time.min)), action__in=list(series_of)
    )
    if scope:
        events = events.filter(memory__scope=scope)
    rows = events.order_by().annotate(day=TruncDate("created_at")).values_list("day", "action").annotate(n=Count("*"))
    counts = {name: [0] * days for name in CHART_SERIES}
    for day, action, n in rows:
        index = (day - first).days
        if 0 <= index < days:
            counts[series_of[action]][index] += n
    return {
        "scope": scope,
        "days": [(first + timedelta(days=offset)).isoformat() for offset in range(days)],
        "series": counts,
        "totals": {name: sum(values) for name, values in counts.items()},
    }


def _chart_scope(request: HttpRequest) -> str:
    """The chart's scope: the address's `scope` (blank: every scope), else the one this person last
    chose in the top bar, else every scope."""
    raw = request.GET.get("scope")
    if raw is None:
        return scopes.chosen(request) or ""
    try:
        return rules.normalize_scope(raw) if raw.strip() else ""
    except rules.ScopeError:
        return ""


def _chart_panel(request: HttpRequest) -> dict:
    scope = _chart_scope(request)
    chart, unavailable = shortcuts.load(lambda: events_per_day(scope))
    names, _ = shortcuts.load(Memory.objects.scope_names)
    context = {
        "retry": shortcuts.retry(request, "#activity-chart"),
        "unavailable": unavailable,
        "chart": chart,
        "scope": scope,
        "scopes": sorted({*(names or []), *([scope] if scope else [])}),
        "days": CHART_DAYS,
    }
    if chart:
        context["empty"] = not any(chart["totals"].values())
        context["rows"] = [
            (day, [chart["series"][name][index] for name in CHART_SERIES]) for index, day in enumerate(chart["days"])
        ][::-1]
    return context


DASHBOARD_PANELS = {
    "activity-chart": ("memoryui/partials/activity_chart.html", _chart_panel),
    "stats-panel": ("memoryui/partials/stats.html", _stats_panel),
    "activity": ("memoryui/partials/activity.html", _activity_panel),
    "index-health": ("memoryui/partials/index_health.html", _index_panel),
}
INDEX_ACTIONS = ("verify", "repair", "rebuild", "tune")
_ACTION_WORDS = {"verify": "Verify", "repair": "Repair", "rebuild": "Rebuild", "tune": "Measuring the vector recall"}


@access.editor_required
@require_POST
def index_action(request, action: str):
    """Verify the indexes now, or queue a repair or a rebuild; htmx gets the panel back."""
    if action not in INDEX_ACTIONS:
        raise Http404("no such index action")
    if action == "rebuild" and shortcuts.needs_confirmation(request):
        return _confirm_rebuild(request)
    actor = shortcuts.actor(request)
    error = None

    outcome = {"level": "success"}

    def act() -> str:
        if action == "verify":
            check = health.run("verify", actor=actor)
            outcome["level"] = "success" if check.ok else "warning"
            return "Verified: " + health.summary(check)
        if action == "tune":
            result = background.send(tune_vector_search, actor=actor, every=True)
        else:
            result = background.send(repair_indexes if action == "repair" else rebuild_indexes, actor=actor)
        if result.ready():  # tasks run inline (CELERY_TASK_ALWAYS_EAGER)
            if result.failed():
                raise IndexUnavailable(action, str(result.result))
            return f"{_ACTION_WORDS[action]} finished."
        return f"{_ACTION_WORDS[action]} queued as task {result.id}; refresh to follow it."

    notice = unavailable = None
    try:
        notice, unavailable = shortcuts.load(act)
    except IndexUnavailable as exc:
        error = f"{_ACTION_WORDS[action]} failed: {exc}"
    except background.BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what=f"The {action}", back=reverse("dashboard"))
    if not shortcuts.wants_fragment(request):
        return shortcuts.go(request, reverse("dashboard"), unavailable=unavailable, error=error, success=notice)
    if unavailable:
        return shortcuts.unavailable(request, unavailable, target="#index-health")
    panel = _index_panel(request)
    panel["notice"], panel["notice_level"], panel["error"] = notice, outcome["level"], error
    return shortcuts.fragment(request, "memoryui/partials/index_health.html", panel)


def _confirm_rebuild(request: HttpRequest) -> HttpResponse:
    active, _ = shortcuts.load(lambda: Memory.objects.active().count())
    if active is None:
        every = "every active memory is"
    elif active == 1:
        every = "the one active memory is"
    else:
        every = f"all {active:,} active memories are"
    return shortcuts.confirmation(
        request,
        title="Rebuild both search indexes?",
        consequences=[
            f"Both indexes are dropped and built again from the database: {every} embedded and indexed anew, "
            "which takes a while on a large store.",
            "Until it is done, search and recall may miss memories.",
            "No memory changes: the indexes are derived from the database. Repair is the quicker fix when only "
            "some entries are missing or stale.",
        ],
        button="Rebuild the indexes",
        back=reverse("dashboard"),
    )


@shortcuts.login_required_htmx
@require_GET
def dashboard(request):
    if shortcuts.wants_fragment(request):
        template, panel = DASHBOARD_PANELS.get(request.htmx.target, DASHBOARD_PANELS["stats-panel"])
        return shortcuts.fragment(request, template, panel(request))
    return shortcuts.render(
        request,
        "memoryui/dashboard.html",
        {
            "chart_panel": _chart_panel(request),
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


def _results_panel(request: HttpRequest, filters: MemoryListFilterSet) -> dict:
    form = filters.form
    context = {
        "retry": shortcuts.retry(request, "#results"),
        "list_url": _list_url(request),
        "page": None,
        "unavailable": None,
        "invalid": None,
        "invalid_title": "These filters are not valid",
        "clear_url": reverse("memory_list"),
    }
    if not filters.is_valid():
        context["invalid"] = [
            f"{name}: {message}" if name != "__all__" else message
            for name, errors in form.errors.items()
            for message in errors
        ]
        return context
    context["has_filters"] = filters.has_filters()
    if filters.hybrid():
        context["search"], context["unavailable"] = _search_results(filters)
        return context
    if form.cleaned_data["q"] and form.cleaned_data["match"] == "hybrid":
        context["match_notice"] = (
            f"Hybrid search covers active memories; these are plain-text matches among "
            f"{form.cleaned_data['status']} memories."
        )
    context["sort_headers"] = _sort_headers(form.cleaned_data["sort"])
    paginator = Paginator(filters.qs.only(*LIST_COLUMNS), settings.MEMORYUI_LIST_PAGE_SIZE)
    number = form.cleaned_data["page"] or 1

    def load_page():
        page = paginator.page(number)
        page.object_list = list(page.object_list)  # query here, inside the guard
        return page

    try:
        context["page"], context["unavailable"] = shortcuts.load(load_page)
    except EmptyPage:
        pages = paginator.num_pages
        context["invalid"] = [f"page: there is no page {number}; these filters give {pages} page{'s' * (pages != 1)}"]
    return context


def _search_results(filters: MemoryListFilterSet) -> tuple[dict | None, shortcuts.Unavailable | None]:
    """The search box's hybrid results: the ranking's first 20 that pass the filters, cut by the floor line."""
    data = filters.form.cleaned_data
    try:
        result, unavailable = shortcuts.load(
            lambda: search(data["q"], scopes=[data["scope"]] if data["scope"] else None, limit=LIMIT_MAX)
        )
    except IndexUnavailable as exc:
        return None, shortcuts.Unavailable(backend="search index", status=503, message=str(exc))
    if unavailable:
        return None, unavailable
    pending, _ = shortcuts.load(IndexOutbox.objects.count)
    if pending:
        result.notices.append(
            f"{pending} change{'s are' if pending != 1 else ' is'} still waiting to reach the search indexes; "
            "until then search may miss or show outdated memories (see the index health on the dashboard)"
        )
    results = [found for found in result.results if filters.keeps(found.memory)]
    answered = {id(found) for found in result.results}
    return {
        "result": result,
        "results": [_worded(found) for found in results],
        # Only strong matches are called relevant; weak ones and those under the floor are counted apart.
        "strong": sum(found.candidate.label == "strong" for found in results),
        "weak": sum(found.candidate.label == "weak" for found in results),
        "below": sum(filters.keeps(found.memory) for found in result.candidates if id(found) not in answered),
        "below_floor": [_worded(found) for found in result.below_floor if filters.keeps(found.memory)],
        "filtered_out": sum(not filters.keeps(found.memory) for found in result.results),
        "text_url": reverse("memory_list") + "?" + urlencode({**filters.data.dict(), "match": "text"}),
    }, None


def _worded(found: Found) -> dict:
    """A search hit as the page shows it: its memory, its match in words, the numbers on demand."""
    return {"memory": found.memory, "candidate": found.candidate, "match": explain.match_why(found.to_dict())}


@shortcuts.login_required_htmx
@require_GET
def memory_list(request):
    filters = MemoryListFilterSet(scopes.with_chosen(request))
    results = _results_panel(request, filters)
    if shortcuts.wants_fragment(request):
        return shortcuts.fragment(request, "memoryui/partials/memory_results.html", results)
    context = {"form": filters.form, "results": results, "scopes": shortcuts.scope_choices()}
    return shortcuts.render(request, "memoryui/memory_list.html", context, status=400 if results["invalid"] else 200)


@access.editor_required
@require_POST
def memory_bulk(request):
    """Apply one action to the checked memories; the list's filters ride in the query string."""
    form = BulkActionForm(request.POST)
    list_url = _list_url(request)
    result = error = unavailable = None
    # Asked first (with what it will change, counted), unless it would change nothing.
    ask = shortcuts.needs_confirmation(request)
    if form.is_valid():
        act = form.preview if ask else form.apply
        try:
            result, unavailable = shortcuts.load(lambda: act(actor=shortcuts.actor(request)))
        except rules.MemoryValidationError as exc:
            error = "Nothing changed: " + shortcuts.validation_message(exc)
        except ConflictError as exc:
            error = f"Nothing changed: {exc}"
    else:
        error = " ".join(message for errors in form.errors.values() for message in errors)
    if ask and result is not None and result.changed:
        return shortcuts.confirmation(request, back=list_url, **form.confirmation(result))
    undo = shortcuts.undo_url(result.batch, list_url) if result is not None and result.changed and not ask else ""
    if not shortcuts.wants_fragment(request):

        def done():
            return shortcuts.with_undo(result.message, result.batch, list_url) if undo else result.message

        return shortcuts.go(request, list_url, unavailable=unavailable, error=error, success=done)
    if unavailable:
        return shortcuts.unavailable(request, unavailable, target="#results")
    if error:
        return shortcuts.refuse(request, error)
    results = _results_panel(request, MemoryListFilterSet(request.GET))
    results["notice"] = result.message
    results["notice_undo"] = undo
    return shortcuts.fragment(request, "memoryui/partials/memory_results.html", results)


ROW_ACTIONS = ("pin", "unpin", "tombstone", "restore")
ROW_ACTION_DONE = {"pin": "Pinned", "unpin": "Unpinned", "tombstone": "Tombstoned", "restore": "Restored"}


@access.editor_required
@require_POST
def memory_action(request, pk, action: str):
    """Pin, unpin, tombstone (with a reason) or restore one memory; htmx gets the updated row."""
    if action not in ROW_ACTIONS:
        raise Http404("no such action")
    reason = request.POST.get("reason", "")
    actor = shortcuts.actor(request)

    def act() -> Memory:
        memory = get_object_or_404(Memory, pk=pk)
        memory.apply_action(action, actor=actor, reason=reason)
        return memory

    memory = error = unavailable = None
    error_status = 400
    try:
        memory, unavailable = shortcuts.load(act)
    except rules.MemoryValidationError as exc:
        error = shortcuts.validation_message(exc)
    except ConflictError as exc:
        error, error_status = f"Cannot {action}: {exc}", 409
    next_url = shortcuts.safe_next(request, reverse("memory_detail", args=[pk]))
    if not shortcuts.wants_fragment(request):
        return shortcuts.go(
            request,
            next_url,
            unavailable=unavailable,
            error=error,
            success=lambda: f"{ROW_ACTION_DONE[action]}: {memory.text[:80]}",
        )
    if unavailable:
        target = f"#{request.htmx.target}" if request.htmx.target else shortcuts.ALERTS
        return shortcuts.unavailable(request, unavailable, target=target)
    if error:
        return shortcuts.refuse(request, error, status=error_status)
    # The page's messages say what was done (AlertsMiddleware); a row of the memory list also
    # leaves it when it no longer passes its filters (then the message links the memory, whose
    # page can undo it), and the list's count follows.
    context = {"memory": memory, "next_url": next_url}
    listing, _ = shortcuts.load(lambda: _list_after_action(request, memory, next_url))
    if listing:
        context.update(unlisted=not listing["listed"], count_page=listing["page"])
    done = f"{ROW_ACTION_DONE[action]}: {memory.text[:80]}"
    if context.get("unlisted"):
        link = '{} <a class="alert-action" href="{}" data-left-list>Open it</a>'
        done = format_html(link, done, memory.get_absolute_url())
    messages.success(request, done)
    return shortcuts.render(request, "memoryui/partials/memory_row.html", context)


def _list_after_action(request: HttpRequest, memory: Memory, list_url: str) -> dict | None:
    """For a row of the memory list at `list_url` (its filters): whether the memory is still
    listed, and the list's page as it is now (its count). None for a row anywhere else (the
    search's ranking, whose rows stay where they are ranked)."""
    parts = urlsplit(list_url)
    if parts.path != reverse("memory_list"):
        return None
    filters = MemoryListFilterSet(scopes.with_chosen(request, QueryDict(parts.query)))
    if not filters.is_valid() or filters.hybrid():
        return None
    paginator = Paginator(filters.qs.only("pk"), settings.MEMORYUI_LIST_PAGE_SIZE)
    return {
        "listed": filters.qs.filter(pk=memory.pk).exists(),
        "page": paginator.get_page(filters.form.cleaned_data["page"] or 1),
    }


# --- detail, create, edit ---------------------------------------------------------------------


FIELD_LABELS = {field.name: capfirst(field.verbose_name) for field in Memory._meta.get_fields() if field.concrete}
TIME_FIELDS = {field.name for field in Memory._meta.get_fields() if isinstance(field, DateTimeField)}


def _display(name: str, value) -> dict:
    """A value of a history event as the page shows it: a time (shown human, exact on hover),
    text, or nothing (one dash for None and "" alike)."""
    if value is None or value == "":
        return {"text": ""}
    if name in TIME_FIELDS and isinstance(value, str):
        moment = parse_datetime(value)
        if moment is not None:
            return {"time": moment}
    if isinstance(value, dict | list):
        return {"text": json.dumps(value, ensure_ascii=False, sort_keys=True)}
    if isinstance(value, bool):
        return {"text": "yes" if value else "no"}
    return {"text": str(value)}


def _history(memory_id) -> list[dict]:
    events = MemoryEvent.objects.filter(memory_id=memory_id).order_by("-created_at", "-id")[:HISTORY_LIMIT]
    return [
        {
            "event": event,
            "changes": [
                {
                    "field": FIELD_LABELS.get(name, str(name)),
                    "before": _display(name, before),
                    "after": _display(name, after),
                }
                for name, before, after in event.changes()
            ],
        }
        for event in events
    ]


def _history_panel(request: HttpRequest, memory_id) -> dict:
    rows, unavailable = shortcuts.load(lambda: _history(memory_id))
    return {
        "retry": shortcuts.retry(request, "#history"),
        "unavailable": unavailable,
        "history": rows,
        "history_truncated": rows is not None and len(rows) >= HISTORY_LIMIT,
    }


RECALL_LOG_SIZE = 20
RECALL_LOG_PAGE = 100


def _recall_log_panel(request: HttpRequest, memory_id) -> dict:
    """The memory's recall log (recall.models.RecallLogEntry), newest first: the latest
    RECALL_LOG_SIZE entries, or with `?log=all` every entry kept, RECALL_LOG_PAGE a page."""
    everything = request.GET.get("log") == "all"

    def load() -> dict:
        entries = RecallLogEntry.objects.filter(memory_id=memory_id)
        if everything:
            page = Paginator(entries, RECALL_LOG_PAGE).get_page(request.GET.get("page"))
            return {"entries": list(page.object_list), "total": page.paginator.count, "page": page}
        latest = list(entries[:RECALL_LOG_SIZE])
        total = len(latest) if len(latest) < RECALL_LOG_SIZE else entries.count()
        return {"entries": latest, "total": total, "page": None}

    log, unavailable = shortcuts.load(load)
    return {
        "unavailable": unavailable,
        "retry": shortcuts.reload(request),
        "everything": everything,
        "retention_days": settings.MEMORYUI_RECALL_RETENTION_DAYS,
        **(log or {}),
    }


@shortcuts.login_required_htmx
@require_GET
def memory_detail(request, pk):
    if shortcuts.wants_fragment(request):
        return shortcuts.fragment(request, "memoryui/partials/history.html", _history_panel(request, pk))
    memory, unavailable = shortcuts.load(lambda: get_object_or_404(Memory, pk=pk))
    context = {
        "memory": memory,
        "detail_panel": {"unavailable": unavailable, "retry": shortcuts.reload(request)},
        "metadata_json": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True) if memory else "",
        "labels": FIELD_LABELS,
        "history_panel": _history_panel(request, pk) if memory else None,
        "recall_log": _recall_log_panel(request, pk) if memory else None,
        "next_url": request.get_full_path(),
    }
    return shortcuts.render(request, "memoryui/memory_detail.html", context)


def _form_page(request, form: MemoryForm, *, memory: Memory | None) -> HttpResponse:
    actor = shortcuts.actor(request)
    status = 200
    unavailable = None
    if request.method == "POST" and form.is_valid():
        saved, unavailable = shortcuts.load(lambda: form.save(actor=actor))
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
    return shortcuts.render(request, "memoryui/memory_form.html", context, status=status)


@access.editor_required
@require_http_methods(["GET", "POST"])
def memory_create(request):
    scope = scopes.chosen(request)
    initial = {"scope": scope} if scope else None  # the page's scope (web.scopes)
    return _form_page(request, MemoryForm(request.POST or None, initial=initial), memory=None)


@access.editor_required
@require_http_methods(["GET", "POST"])
def memory_edit(request, pk):
    memory = get_object_or_404(Memory, pk=pk)
    return _form_page(request, MemoryForm(request.POST or None, memory=memory), memory=memory)


# --- API tokens ------------------------------------------------------------------------------


@shortcuts.login_required_htmx
@require_http_methods(["GET", "POST"])
def tokens(request):
    """List the user's tokens; a POST issues one and shows its raw key on this response only.

    What a user may mint depends on their role (`roles.mint_refusal`): a token above it is a form error."""
    default_access = roles.default_access(request.user)
    form = TokenForm(request.POST or None, default_access=default_access)
    issued = raw_key = None
    status = 200
    if request.method == "POST":
        saved = None
        if form.is_valid():
            data = form.cleaned_data
            refusal = roles.mint_refusal(request.user, access=data["access"], scopes=data["scopes"])
            if refusal:
                form.add_error(refusal.field, refusal.message)
                status = 403
            else:
                saved = form.save(user=request.user)
        if saved:
            issued, raw_key = saved
            form = TokenForm(default_access=default_access)
        elif status == 200:
            status = 400
    token_list, unavailable = shortcuts.load(lambda: list(ApiToken.objects.filter(user=request.user)))
    context = {
        "form": form,
        "issued": issued,
        "raw_key": raw_key,
        "tokens_panel": {
            "tokens": token_list,
            "unavailable": unavailable,
            "retry": shortcuts.reload(request, reverse("tokens")),
        },
    }
    response = shortcuts.render(request, "memoryui/tokens.html", context, status=201 if issued else status)
    if raw_key:
        add_never_cache_headers(response)  # the raw key must not outlive this response
    return response


@shortcuts.login_required_htmx
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
        return JsonResponse(rest.error_body(404, rest.NOT_FOUND), status=404)
    if shortcuts.wants_fragment(request):
        return shortcuts.refuse(request, "Not found: this memory or page does not exist.", status=404)
    return shortcuts.error_page(request, 404, "Not found", "There is nothing at this address.")


def bad_request(request, exception=None):
    """handler400: a request Django refused before any view ran. A body larger than
    DATA_UPLOAD_MAX_MEMORY_SIZE is a 413, anything else (too many form fields, a bad host) a 400:
    the JSON error shape under /api/, a state for htmx, a plain page elsewhere."""
    if isinstance(exception, RequestDataTooBig):
        status, title, message = 413, "Too large", rest.too_large_message()
    else:
        status, title, message = 400, "Bad request", "This request could not be read. Go back and try again."
    if _is_api(request):
        body = rest.too_large_body() if status == 413 else rest.error_body(status, message, {"body": [message]})
        return JsonResponse(body, status=status)
    if shortcuts.wants_fragment(request):
        return shortcuts.refuse(request, message, status=status, title=title)
    # Rendered without the request, as server_error is: what made it unreadable may be in it (its host).
    context = {"status": status, "title": title, "message": message}
    return HttpResponse(loader.render_to_string("memoryui/error.html", context), status=status)


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: a page that says what happened, or for htmx a state the panel shows.

    The usual cause is a page loaded before signing in again elsewhere (the token rotated).
    """
    message = "This page is out of date (its security token expired). Reload the page and try again."
    return shortcuts.error_page(request, 403, "Reload needed", message)


def server_error(request):
    if _is_api(request):
        return JsonResponse(rest.error_body(500, "Internal server error.", code="server_error"), status=500)
    # Rendered without the request: its context processors may be what failed (session, DB).
    context = {"status": 500, "title": "Something went wrong", "message": "The error was logged. Try again."}
    if shortcuts.wants_fragment(request):
        unavailable = shortcuts.Unavailable(backend="server", status=500, message="internal server error")
        body = loader.render_to_string(
            "memoryui/partials/state_unavailable.html", {"panel": {"unavailable": unavailable, "retry": None}}
        )
        return shortcuts.with_state(request, HttpResponse(body, status=500), "unavailable")
    return HttpResponse(loader.render_to_string("memoryui/error.html", context), status=500)
