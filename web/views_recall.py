"""The recall pages: playground, traces, profiles and golden sets (full page, or the partial for htmx).

The playground changes nothing: it runs the pipeline without bumping access counts. Its Save
button posts the run exactly as it was shown (signed, so it cannot be forged into a trace that
never ran) and the saved trace can be reopened any time later.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.core import signing
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap

from memoryui import roles
from memoryui.background import BrokerError
from memoryui.models import Memory
from recall import golden
from recall.calibration import MIN_ANSWERABLE, MIN_QUERIES, MIN_UNANSWERABLE
from recall.knobs import RecallSettings
from recall.models import DEFAULT_PROFILE, GoldenQuery, GoldenSet, RecallLogEntry, RecallProfile, RecallTrace
from recall.pipeline import recall, why_not
from recall.selector import SelectorConfig
from recall.tasks import enqueue_calibration
from searchindex.defaults import CALIBRATED
from searchindex.documents import IndexUnavailable
from searchindex.embeddings import EmbedderUnavailable, get_embedder
from searchindex.search import SearchError
from web import access, demo, scopes, shortcuts
from web.filters_traces import TraceListFilterSet
from web.forms_recall import (
    KNOBS,
    CalibrateForm,
    GoldenQueryForm,
    GoldenRunForm,
    GoldenSetForm,
    PlaygroundForm,
    ProfileForm,
)

TRACE_SALT = "recall.playground.trace"
TRACE_PAGE_SIZE = 50


# --- playground -----------------------------------------------------------------------------


def _playground_panel(form: PlaygroundForm) -> dict:
    """The run the playground shows: the result (as a trace would hold it), or a state."""
    panel: dict = {"ran": False, "invalid": None, "unavailable": None}
    if not form.is_bound:
        panel["example"] = _example()
        return panel
    if not form.is_valid():
        panel["invalid"] = [f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()]
        return panel
    data = form.cleaned_data
    profile = data["profile"]
    settings = profile.settings
    if data.get("cut") is not None:
        settings = replace(settings, block_cut=data["cut"])

    def run():
        return recall(
            data["q"], scope=data["scope"], tools=data["tools"], limit=data["limit"], settings=settings,
            profile=profile.name,
        )  # fmt: skip

    try:
        result, panel["unavailable"] = shortcuts.load(run)
    except SearchError as exc:
        panel["invalid"] = [f"{'query' if exc.field == 'q' else exc.field}: {exc}"]
        return panel
    except IndexUnavailable as exc:
        panel["unavailable"] = {"backend": f"{exc.index} index", "status": 503, "message": str(exc)}
        return panel
    if result is None:
        return panel
    fields = RecallTrace.fields_of(result)
    panel.update(
        ran=True,
        run=fields["result"],
        payload=signing.dumps({"fields": fields, "profile": profile.pk}, salt=TRACE_SALT, compress=True),
        why=why_not(result, data["why"]) if data.get("why") else None,
        why_url=f"{reverse('recall:playground')}?{_without_why(form)}&why=",
        why_id=data.get("why"),
    )
    return panel


def _without_why(form: PlaygroundForm) -> str:
    params = {name: form.data.get(name, "") for name in ("q", "scope", "tools", "profile", "limit", "cut")}
    return urlencode({name: value for name, value in params.items() if value})


@shortcuts.login_required_htmx
@require_GET
def playground(request: HttpRequest) -> HttpResponse:
    form = PlaygroundForm(request.GET if "q" in request.GET else None, initial=_playground_initial(request))
    panel = _playground_panel(form)
    if shortcuts.wants_fragment(request):
        return shortcuts.fragment(request, "recall/partials/playground_result.html", panel)
    context = {"form": form, "panel": panel, "scopes": shortcuts.scope_choices()}
    return shortcuts.render(request, "recall/playground.html", context, status=400 if panel["invalid"] else 200)


def _playground_initial(request: HttpRequest) -> dict:
    """What the empty form shows: the scope its address names, else the session's (web.scopes)."""
    asked = request.GET.get("scope", "").strip()
    scope, unavailable = (asked, None) if asked else shortcuts.load(lambda: scopes.for_page(request))
    return {"scope": scope if unavailable is None else "agent:main", "profile": DEFAULT_PROFILE}


def _example() -> str | None:
    """The demo's recall with the active-tool filter at work, as a playground link, while its memory is there.

    The playground opens on the first scope by name, which on a fresh demo has no tool knowledge:
    the example leads to the scope and tool where both recall paths have something to show.
    """
    if not Memory.objects.active().filter(pk=demo.demo_id(demo.FILTER_EXAMPLE_KEY)).exists():
        return None
    return f"{reverse('recall:playground')}?{urlencode(demo.FILTER_EXAMPLE)}"


@shortcuts.login_required_htmx
@require_GET
def llm_setup(request: HttpRequest) -> HttpResponse:
    """How to point recall at an OpenAI-compatible server, and what this server uses now."""
    endpoint = SelectorConfig.from_settings()
    where = None
    if endpoint:
        # The base URL as a person needs it, without any user:password it may carry.
        parts = urlsplit(endpoint.base_url)
        where = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    context = {
        "endpoint": endpoint,
        "base_url": where,
        "api_key_set": bool(settings.MEMORYUI_LLM_API_KEY),
        "selector_timeout_ms": settings.MEMORYUI_SELECTOR_TIMEOUT_MS,
        "l1_timeout_ms": settings.MEMORYUI_L1_TIMEOUT_MS,
        "example": _example(),
    }
    return shortcuts.render(request, "recall/llm_setup.html", context)


@access.editor_required
@require_POST
def trace_save(request: HttpRequest) -> HttpResponse:
    """Save a playground run as a trace, exactly as it was shown."""
    try:
        payload = signing.loads(request.POST.get("payload", ""), salt=TRACE_SALT)
    except signing.BadSignature:
        return shortcuts.refuse(request, "This run cannot be saved: run the recall again.")
    profile = RecallProfile.objects.filter(pk=payload.get("profile")).first()
    note = request.POST.get("note", "").strip()[:2000]
    trace = RecallTrace.create_from(
        payload["fields"], source="playground", actor=shortcuts.actor(request), profile=profile, note=note
    )
    RecallLogEntry.objects.record_trace(trace)  # a saved run is the playground's logged recall
    url = trace.get_absolute_url()
    if shortcuts.wants_fragment(request):
        # The playground stays as it is (the run, the note); the page's messages link the trace.
        messages.success(request, format_html('Trace saved. <a href="{}" data-saved-trace>Open the trace</a>', url))
        return reswap(HttpResponse(), "none")
    messages.success(request, "Trace saved.")
    return redirect(url)


# --- traces -------------------------------------------------------------------------------------


def _traces_panel(filters: TraceListFilterSet) -> dict:
    """The page of traces the filters select, or what is wrong with the filters (each error is also
    shown next to its field)."""
    panel: dict = {
        "page": None,
        "unavailable": None,
        "invalid": None,
        "invalid_title": "These filters are not valid",
        "clear_url": f"{reverse('recall:trace_list')}?scope=",
    }
    if not filters.is_valid():
        form = filters.form
        panel["invalid"] = [
            f"{form.fields[name].label if name in form.fields else name}: {message}"
            for name, errors in form.errors.items()
            for message in errors
        ]
        return panel
    panel["has_filters"] = filters.has_filters()
    paginator = Paginator(filters.qs.defer("result", "knobs"), TRACE_PAGE_SIZE)

    def load_page():
        page = paginator.get_page(filters.form.cleaned_data["page"] or 1)
        page.object_list = list(page.object_list)  # query here, inside the guard
        return page

    panel["page"], panel["unavailable"] = shortcuts.load(load_page)
    return panel


@shortcuts.login_required_htmx
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    """Saved traces, newest first, filtered by the GET parameters; two can be checked and compared."""
    filters = TraceListFilterSet(scopes.with_chosen(request))
    panel = _traces_panel(filters)
    profiles, _ = shortcuts.load(lambda: list(RecallProfile.objects.values_list("name", flat=True)))
    context = {"form": filters.form, "panel": panel, "scopes": shortcuts.scope_choices(), "profiles": profiles or []}
    return shortcuts.render(request, "recall/trace_list.html", context, status=400 if panel["invalid"] else 200)


def _rerun(trace: RecallTrace, **extra) -> str:
    """The playground's address that runs `trace`'s recall again: same query, scope, tools, limit, profile."""
    params = {"q": trace.query, "scope": trace.scope, "tools": ", ".join(trace.tools), "limit": trace.limit}
    if trace.profile_id:
        params["profile"] = trace.profile.name
    return f"{reverse('recall:playground')}?{urlencode({**params, **extra})}"


@shortcuts.login_required_htmx
@require_GET
def trace_detail(request: HttpRequest, pk) -> HttpResponse:
    """A saved trace as the playground showed it, and "why not recalled?" answered from its candidates."""
    trace = get_object_or_404(RecallTrace, pk=pk)
    asked = request.GET.get("why", "").strip()[:64]
    why = None
    if asked:
        stages, not_a_candidate = trace.why_not(asked)
        rerun = _rerun(trace, why=not_a_candidate) if not_a_candidate else None
        why = {"id": asked, "stages": stages, "rerun": rerun}
    context = {
        "trace": trace,
        "run": trace.result,
        "rerun_url": _rerun(trace),
        "why": why,
        "why_url": f"{trace.get_absolute_url()}?why=",
    }
    return shortcuts.render(request, "recall/trace_detail.html", context)


def _compared_traces(request: HttpRequest) -> tuple[RecallTrace, RecallTrace] | HttpResponse:
    """The traces `a` and `b` name, or the error page saying what is wrong with them."""
    title = "These traces cannot be compared"
    pks = {}
    for key in ("a", "b"):
        raw = request.GET.get(key, "").strip()
        if not raw:
            return shortcuts.error_page(request, 400, title, f"{key}: missing; choose two traces in the trace list.")
        try:
            pks[key] = uuid.UUID(raw)
        except ValueError:
            return shortcuts.error_page(request, 400, title, f"{key}: {raw[:40]!r} is not a trace id.")
    found = RecallTrace.objects.in_bulk(list(pks.values()))
    for key, pk in pks.items():
        if pk not in found:
            return shortcuts.error_page(request, 404, "No such trace", f"{key}: no trace has the id {pk}.")
    return found[pks["a"]], found[pks["b"]]


@shortcuts.login_required_htmx
@require_GET
def trace_compare(request: HttpRequest) -> HttpResponse:
    """Two traces side by side: what each ran with (the differences marked), outcome, latency, and the
    two blocks, each memory marked when the other block lacks it."""
    if "ids" in request.GET:  # the trace list's Compare form: the checked traces
        ids = [pk for pk in request.GET.getlist("ids") if pk.strip()]
        if len(ids) != 2:
            message = f"Check exactly two traces to compare; {len(ids)} {'was' if len(ids) == 1 else 'were'} checked."
            return shortcuts.error_page(request, 400, "Choose two traces", message)
        return redirect(f"{reverse('recall:trace_compare')}?{urlencode({'a': ids[0], 'b': ids[1]})}")
    traces = _compared_traces(request)
    if isinstance(traces, HttpResponse):
        return traces
    a, b = traces
    context = {"a": a, "b": b, "compared": a.compared_with(b)}
    return shortcuts.render(request, "recall/trace_compare.html", context)


# --- profiles -----------------------------------------------------------------------------------


@shortcuts.login_required_htmx
@require_GET
def profile_list(request: HttpRequest) -> HttpResponse:
    RecallProfile.objects.resolve(DEFAULT_PROFILE)
    defaults = RecallSettings().to_dict()
    profiles = [
        {
            "profile": profile,
            "changed": [(k, KNOBS.get(k, (k, ""))[0], v, defaults.get(k)) for k, v in sorted(profile.knobs.items())],
        }
        for profile in RecallProfile.objects.all()
    ]
    try:
        embedder = get_embedder().name
    except (EmbedderUnavailable, ValueError) as exc:
        embedder, problem = None, str(exc)
    else:
        problem = None
    for item in profiles:
        item["tuned"] = _tuned_for(item["profile"], item["changed"], embedder)
    context = {
        "profiles": profiles,
        "active_embedder": embedder,
        "embedder_problem": problem,
        "measured_on": sorted(CALIBRATED),
    }
    return shortcuts.render(request, "recall/profile_list.html", context)


def _tuned_for(profile: RecallProfile, changed: list, active: str | None) -> dict:
    """What a profile's knobs were tuned for, in one consistent set of words: calibrated on golden
    queries for an embedder; the built-in defaults (measured for the embedders in CALIBRATED, rescaled
    for any other); or knobs set by hand, never calibrated."""
    if profile.embedder:
        return {
            "how": "calibrated",
            "embedder": profile.embedder,
            "mismatch": bool(active) and profile.embedder != active,
        }
    family = (active or "").partition(":")[0]
    if changed:
        return {"how": "by hand"}
    return {"how": "built-in", "rescaled": bool(active) and family not in CALIBRATED}


@access.admin_required
@require_http_methods(["GET", "POST"])
def profile_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    profile = get_object_or_404(RecallProfile, name=name) if name else RecallProfile()
    form = ProfileForm(request.POST or None, instance=profile)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        messages.success(request, f"Profile {saved.name} saved.")
        return redirect("recall:profile_list")
    status = 400 if request.method == "POST" else 200
    return shortcuts.render(request, "recall/profile_form.html", {"form": form, "profile": profile}, status=status)


# --- golden sets --------------------------------------------------------------------------------


@access.role_required(roles.Role.EDITOR, unsafe_only=True)
@require_http_methods(["GET", "POST"])
def golden_list(request: HttpRequest) -> HttpResponse:
    scope = scopes.with_chosen(request).get("scope", "").strip()
    form = GoldenSetForm(request.POST or None, initial={"scope": scope})
    if request.method == "POST" and form.is_valid():
        golden_set = form.save()
        return redirect(golden_set)
    sets = GoldenSet.objects.all()
    others = 0
    if scope:  # the page's scope (web.scopes) first; the other scopes' sets are one click away
        others = sets.exclude(scope=scope).count()
        sets = sets.filter(scope=scope)
    status = 400 if request.method == "POST" else 200
    context = {"sets": sets, "form": form, "scopes": shortcuts.scope_choices(), "scope": scope, "others": others}
    return shortcuts.render(request, "recall/golden_list.html", context, status=status)


@access.role_required(roles.Role.EDITOR, unsafe_only=True)
@require_http_methods(["GET", "POST"])
def golden_detail(request: HttpRequest, pk: int) -> HttpResponse:
    golden_set = get_object_or_404(GoldenSet, pk=pk)
    form = GoldenQueryForm(request.POST or None, golden_set=golden_set)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Golden query added.")
        return redirect(golden_set)
    context = {
        "golden_set": golden_set,
        "queries": golden_set.queries.all(),
        "form": form,
        "run_form": GoldenRunForm(initial={"a": DEFAULT_PROFILE}),
        "calibrate_form": CalibrateForm(initial={"profile": DEFAULT_PROFILE, "save_as": _calibrated_name(golden_set)}),
        **_calibration_size(golden_set),
    }
    return shortcuts.render(
        request, "recall/golden_detail.html", context, status=400 if request.method == "POST" else 200
    )


def _calibrated_name(golden_set: GoldenSet) -> str:
    return ("calibrated-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in golden_set.name.lower()))[:64]


def _calibration_size(golden_set: GoldenSet) -> dict:
    """What the Calibrate panel says about the set's size, and why it refuses a set too small."""
    expected = [bool(ids) for ids in golden_set.queries.values_list("expected_ids", flat=True)]
    queries, answerable = len(expected), sum(expected)
    missing = []
    if queries < MIN_QUERIES:
        missing.append(f"{MIN_QUERIES - queries} more quer{'y' if MIN_QUERIES - queries == 1 else 'ies'}")
    if answerable < MIN_ANSWERABLE:
        missing.append(f"{MIN_ANSWERABLE - answerable} more expecting memories")
    if queries - answerable < MIN_UNANSWERABLE:
        missing.append(f"{MIN_UNANSWERABLE - (queries - answerable)} more expecting nothing")
    return {"calibration_missing": missing, "calibration_minimum": (MIN_QUERIES, MIN_ANSWERABLE, MIN_UNANSWERABLE)}


@access.admin_required  # the calibrated knobs are saved as a recall profile
@require_POST
def golden_calibrate(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a calibration of the set's knobs; the task page follows it, the profile holds the result."""
    golden_set = get_object_or_404(GoldenSet, pk=pk)
    form = CalibrateForm(request.POST)
    missing = _calibration_size(golden_set)["calibration_missing"]
    if missing:
        messages.error(request, "Too few golden queries to calibrate on: add " + ", ".join(missing) + ".")
        return redirect(golden_set)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in form.errors.items())
        messages.error(request, f"Calibration not started: {errors}")
        return redirect(golden_set)
    try:
        run = enqueue_calibration(
            golden_set,
            profile=form.cleaned_data["profile"],
            save_as=form.cleaned_data["save_as"],
            min_answered=form.cleaned_data["min_answered"],
            actor=request.user.get_username(),
        )
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what="The calibration", back=golden_set.get_absolute_url())
    messages.success(request, f"Calibration queued: it saves profile {form.cleaned_data['save_as']} when done.")
    return redirect(run.get_absolute_url())


@access.editor_required
@require_POST
def golden_query_delete(request: HttpRequest, pk: int, query_pk: int) -> HttpResponse:
    query = get_object_or_404(GoldenQuery, pk=query_pk, golden_set_id=pk)
    if shortcuts.needs_confirmation(request):
        return shortcuts.confirmation(
            request,
            title=f"Remove the golden query “{query.query[:80]}”?",
            consequences=[
                f"The set {query.golden_set.name} keeps {query.golden_set.queries.count() - 1} other queries; "
                "no memory changes.",
                "This cannot be undone: add the query again to bring it back.",
            ],
            button="Remove",
            back=reverse("recall:golden_detail", args=[pk]),
        )
    query.delete()
    messages.success(request, "Golden query removed.")
    return redirect(reverse("recall:golden_detail", args=[pk]))


@access.editor_required
@require_GET
def golden_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Run the set against profile A (and compare with B): metrics, and per query what moved."""
    golden_set = get_object_or_404(GoldenSet, pk=pk)
    form = GoldenRunForm(request.GET)
    panel: dict = {"invalid": None, "unavailable": None, "golden_set": golden_set}
    if not form.is_valid():
        panel["invalid"] = [f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()]
    else:
        try:
            panel.update(_golden_run(golden_set, form.cleaned_data["a"], form.cleaned_data.get("b")))
        except IndexUnavailable as exc:
            panel["unavailable"] = {"backend": f"{exc.index} index", "status": 503, "message": str(exc)}
    if shortcuts.wants_fragment(request):
        return shortcuts.fragment(request, "recall/partials/golden_run.html", panel)
    context = {
        "golden_set": golden_set,
        "queries": golden_set.queries.all(),
        "form": GoldenQueryForm(golden_set=golden_set),
        "run_form": form,
        "panel": panel,
        "calibrate_form": CalibrateForm(initial={"profile": DEFAULT_PROFILE, "save_as": _calibrated_name(golden_set)}),
        **_calibration_size(golden_set),
    }
    return shortcuts.render(request, "recall/golden_detail.html", context, status=400 if panel["invalid"] else 200)


def _playground_url(golden_set: GoldenSet, outcome: golden.QueryOutcome, profile: str) -> str:
    """The playground with this query, scope and profile, asking why an expected memory was not recalled
    (or, when every expected one was, why the first unexpected one was)."""
    why = (outcome.missed or outcome.unexpected or [""])[0]
    params = {"q": outcome.query, "scope": golden_set.scope, "profile": profile, "tools": ", ".join(outcome.tools)}
    params["why"] = why
    return f"{reverse('recall:playground')}?{urlencode({k: v for k, v in params.items() if v})}"


def _golden_run(golden_set: GoldenSet, a: str, b: str | None) -> dict:
    profiles = {name: RecallProfile.objects.resolve(name) for name in filter(None, [a, b])}
    runs = {name: golden.evaluate(golden_set, p.settings, profile=name) for name, p in profiles.items()}
    texts = dict(
        Memory.objects.filter(
            pk__in={pk for run in runs.values() for o in run.outcomes for pk in o.recalled + o.expected}
        ).values_list("pk", "text")
    )
    texts = {str(pk): text for pk, text in texts.items()}
    first = runs[a]
    second = runs.get(b) if b and b != a else None
    rows = []
    movements = {m.query_id: m for m in golden.compare(first, second)} if second else {}
    for outcome in first.outcomes:
        other = second.by_query.get(outcome.query_id) if second else None
        rows.append(
            {
                "outcome": outcome,
                "other": other,
                "movement": movements.get(outcome.query_id),
                "expected": [(pk, texts.get(pk, "")) for pk in outcome.expected],
                "recalled": [(pk, texts.get(pk, ""), pk in outcome.expected) for pk in outcome.recalled],
                "recalled_b": [(pk, texts.get(pk, ""), pk in outcome.expected) for pk in other.recalled]
                if other
                else [],
                "playground_url": _playground_url(golden_set, outcome, a)
                if not outcome.passed or outcome.unexpected
                else None,
            }
        )
    return {
        "a": a,
        "b": b if second else None,
        "a_limit": first.limit,
        "b_limit": second.limit if second else None,
        "metrics": golden.metric_rows(first, second),
        "rows": rows,
        "texts": texts,
        "ran": True,
    }
