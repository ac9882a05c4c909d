"""Store hygiene pages: duplicate clusters with threshold replay, the clean-up wizard, undo.

Every change here is previewed first and applied as one batch; each result offers its undo.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memoryui import cleanup, dedup, merging, roles, rules, undo, web
from memoryui.models import Memory, TaskRun
from memoryui.tasks import CLEANUP, enqueue_cleanup_step, enqueue_dedup

CLUSTERS_SHOWN = 100
KEPT_APART_SHOWN = 20


def _scope_param(request: HttpRequest, source) -> tuple[str, str | None]:
    """The scope asked for (normalized) and, when it is not a valid scope, why."""
    raw = (source.get("scope") or "").strip()
    if not raw:
        scopes = web.scope_choices()
        return ("agent:main" if "agent:main" in scopes else (scopes[0] if scopes else "agent:main")), None
    try:
        return rules.normalize_scope(raw), None
    except rules.ScopeError as exc:
        return raw, f"scope: {exc}"


def _threshold_param(source) -> tuple[float, str | None]:
    raw = (source.get("threshold") or "").strip()
    default = dedup.default_threshold()
    if not raw:
        return default, None
    try:
        value = float(raw)
    except ValueError:
        return default, f"threshold: {raw!r} is not a number"
    if not 0.0 < value <= 1.0:
        return default, "threshold: must be above 0 and at most 1"
    return round(value, 4), None


# --- duplicates -------------------------------------------------------------------------------


@web.login_required_htmx
@require_GET
def duplicates(request):
    """The scope's duplicate clusters at the configured threshold or, with `?threshold=`, what a
    replay at that threshold would do to them. Reading never changes anything."""
    scope, scope_error = _scope_param(request, request.GET)
    threshold, threshold_error = _threshold_param(request.GET)
    default = dedup.default_threshold()
    context = {
        "scope": scope,
        "scopes": web.scope_choices(),
        "threshold": threshold,
        "default_threshold": default,
        "replay_min": dedup.REPLAY_RANGE[0],
        "replay_max": dedup.REPLAY_RANGE[1],
        "error": scope_error or threshold_error,
    }
    if not scope_error:
        memories = dedup.load_rows(scope)
        current = dedup.find_clusters(scope, threshold=default, memories=memories)
        report = (
            current
            if threshold == default
            else dedup.find_clusters(scope, threshold=threshold, memories=memories, vectors=current.vectors)
        )
        changes = dedup.compare(current, report) if threshold != default else None
        change_of = {c.cluster.key: c.change for c in changes or [] if c.cluster}
        context.update(
            report=report,
            clusters=[(cluster, change_of.get(cluster.key)) for cluster in report.clusters[:CLUSTERS_SHOWN]],
            hidden=max(0, len(report.clusters) - CLUSTERS_SHOWN),
            kept_apart=_kept_apart(report),
            changes=_change_counts(changes) if changes is not None else None,
            dissolved=[c.before[0] for c in changes or [] if c.change == "dissolves"],
            replay=threshold != default,
        )
    template = "memoryui/partials/duplicates.html" if web.wants_fragment(request) else "memoryui/duplicates.html"
    return web.render(request, template, context)


def _kept_apart(report: dedup.ClusterReport) -> list[dict]:
    shown = report.kept_apart[:KEPT_APART_SHOWN]
    ids = {pk for pair in shown for pk in (pair.a, pair.b)}
    texts = dict(Memory.objects.filter(pk__in=ids).values_list("pk", "text"))
    return [
        {"a": pair.a, "b": pair.b, "text_a": texts.get(uuid.UUID(pair.a), ""),
         "text_b": texts.get(uuid.UUID(pair.b), ""), "similarity": pair.similarity, "reason": pair.reason}
        for pair in shown
    ]  # fmt: skip


def _change_counts(changes: list[dedup.ClusterChange]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.change] = counts.get(change.change, 0) + 1
    return list(counts.items())


def _duplicates_url(scope: str, threshold: float | None = None) -> str:
    query = f"?scope={scope}"
    if threshold is not None and threshold != dedup.default_threshold():
        query += f"&threshold={threshold}"
    return reverse("duplicates") + query


def _decide_cluster(request: HttpRequest, decide, *, failure: str):
    """A decision on one proposed cluster: `decide(scope, members)` returns the success message."""
    scope, error = _scope_param(request, request.POST)
    back = web.safe_next(request, _duplicates_url(scope))
    if error:
        messages.error(request, error)
        return redirect(back)
    try:
        message = decide(scope, request.POST.getlist("member"))
    except (merging.DedupError, rules.MemoryValidationError, ValueError) as exc:
        messages.error(request, f"{failure}: {exc}")
    else:
        messages.success(request, message)
    return redirect(back)


@roles.editor_required
@require_POST
def duplicates_merge(request):
    """Approve one proposed cluster: merge its members into the chosen canonical memory."""

    def merge(scope: str, members: list[str]) -> str:
        canonical = request.POST.get("canonical") or None
        result = merging.merge(
            scope, members, canonical_id=canonical, actor=web.actor(request), reason="approved merge"
        )
        request.session["undo_batch"] = str(result.batch)
        return f"Merged {len(result.merged)} duplicates into {result.canonical}."

    return _decide_cluster(request, merge, failure="Nothing merged")


@roles.editor_required
@require_POST
def duplicates_reject(request):
    """Not duplicates: these memories are never proposed together again."""

    def reject(scope: str, members: list[str]) -> str:
        pairs = merging.reject(scope, members, actor=web.actor(request))
        return f"Marked as not duplicates ({pairs} pairs); they will not be proposed again."

    return _decide_cluster(request, reject, failure="Nothing marked")


@roles.editor_required
@require_POST
def duplicates_apply(request):
    """Merge every cluster at the given threshold, as a background task (one batch)."""
    scope, scope_error = _scope_param(request, request.POST)
    threshold, threshold_error = _threshold_param(request.POST)
    if scope_error or threshold_error:
        messages.error(request, scope_error or threshold_error)
        return redirect(_duplicates_url(scope))
    with transaction.atomic():
        run = enqueue_dedup(scope, actor=web.actor(request), threshold=threshold)
    messages.success(request, f"Merging every cluster of {scope} at threshold {threshold}.")
    return redirect(run)


# --- undo -------------------------------------------------------------------------------------


@roles.editor_required
@require_POST
def batch_undo(request, batch):
    back = web.safe_next(request, reverse("task_list"))
    try:
        report = undo.undo_batch(batch, actor=web.actor(request), force=request.POST.get("force") == "1")
    except undo.UndoError as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(back)
    request.session.pop("undo_batch", None)
    messages.success(
        request,
        f"Undone: {report.restored} restored, {report.reverted} put back, {report.tombstoned} tombstoned.",
    )
    return redirect(back)


# --- clean-up wizard --------------------------------------------------------------------------


def _session_runs(scope: str) -> tuple[str | None, dict[str, TaskRun]]:
    """The wizard's current clean-up: its id and the latest run of each step (None = a new one).

    A clean-up whose every applied step was undone is over: the wizard starts afresh.
    """
    latest = (
        TaskRun.objects.filter(kind=CLEANUP, params__scope=scope, params__cleanup__isnull=False)
        .exclude(params__cleanup=None)
        .first()
    )
    if latest is None:
        return None, {}
    session = latest.params["cleanup"]
    runs: dict[str, TaskRun] = {}
    for run in TaskRun.objects.filter(kind=CLEANUP, params__cleanup=session).order_by("created_at"):
        runs[run.params["step"]] = run
    batches = [run.result.get("batch") for run in runs.values() if run.result.get("batch")]
    if batches and all(undo.is_undone(batch) for batch in batches):
        return None, {}
    return session, runs


def _step_states(scope: str) -> tuple[str | None, list[dict], str | None]:
    session, runs = _session_runs(scope)
    steps, current = [], None
    for number, step in enumerate(cleanup.STEPS, 1):
        run = runs.get(step)
        batch = run.result.get("batch") if run else None
        undone = bool(batch) and undo.is_undone(batch)
        if run is None or run.status == TaskRun.Status.FAILED or undone:
            state = "failed" if run and run.status == TaskRun.Status.FAILED else "todo"
        elif run.status == TaskRun.Status.SUCCEEDED:
            state = "done"
        else:
            state = "running"
        if current is None and state in ("todo", "failed"):
            current = step
        steps.append({"number": number, "step": step, "title": cleanup.STEP_TITLES[step], "state": state,
                      "run": run, "batch": batch if state == "done" else None})  # fmt: skip
    return session, steps, current


@web.login_required_htmx
@require_GET
def cleanup_wizard(request):
    """Four steps, one at a time: preview (a dry run against the store as it is), apply (a task
    and one batch), undo. `?preview=1` shows the current step's dry run."""
    scope, error = _scope_param(request, request.GET)
    context = {"scope": scope, "scopes": web.scope_choices(), "error": error}
    if not error:
        session, steps, current = _step_states(scope)
        running = any(s["state"] == "running" for s in steps)
        preview = None
        if request.GET.get("preview") and current and not running:
            preview = cleanup.run_step(scope, current, dry_run=True, actor=web.actor(request))
        stats = Memory.objects.filter(scope=scope).stats()
        context.update(
            session=session,
            steps=steps,
            current=current,
            running=running,
            preview=preview,
            examples=preview.examples(12) if preview else [],
            stats=stats,
            notes=stats["by_kind"].get("note", 0),
            undoable=[s["batch"] for s in reversed(steps) if s["batch"]],
            last_done=next((s for s in reversed(steps) if s["state"] == "done" and s["batch"]), None),
        )
    template = "memoryui/partials/cleanup_steps.html" if web.wants_fragment(request) else "memoryui/cleanup.html"
    return web.render(request, template, context)


def _cleanup_url(scope: str) -> str:
    return f"{reverse('cleanup')}?scope={scope}"


@roles.editor_required
@require_POST
def cleanup_apply(request):
    """Apply the wizard's current step (the one that was previewed) as a background task."""
    scope, error = _scope_param(request, request.POST)
    if error:
        messages.error(request, error)
        return redirect(_cleanup_url(scope))
    session, steps, current = _step_states(scope)
    step = request.POST.get("step")
    if step != current:
        messages.error(request, f"Step {step!r} is not the next one to apply (that is {current or 'none'}).")
        return redirect(_cleanup_url(scope))
    with transaction.atomic():
        enqueue_cleanup_step(scope, step, actor=web.actor(request), cleanup=session or str(uuid.uuid4()))
    messages.success(request, f"{cleanup.STEP_TITLES[step]}: applying.")
    return redirect(_cleanup_url(scope))


@roles.editor_required
@require_POST
def cleanup_undo(request):
    """Undo the clean-up: every applied step's batch, last step first."""
    scope, error = _scope_param(request, request.POST)
    if error:
        messages.error(request, error)
        return redirect(_cleanup_url(scope))
    _, steps, _ = _step_states(scope)
    batches = [s["batch"] for s in reversed(steps) if s["batch"]]
    if request.POST.get("last") == "1":
        batches = batches[:1]
    if not batches:
        messages.error(request, "Nothing to undo: no step of this clean-up changed a memory.")
        return redirect(_cleanup_url(scope))
    totals = {"restored": 0, "reverted": 0, "tombstoned": 0}
    try:
        with transaction.atomic():
            for batch in batches:
                report = undo.undo_batch(batch, actor=web.actor(request))
                for name in totals:
                    totals[name] += getattr(report, name)
    except undo.UndoError as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(_cleanup_url(scope))
    messages.success(
        request,
        f"Undone {len(batches)} step{'s' if len(batches) > 1 else ''}: {totals['restored']} restored, "
        f"{totals['reverted']} put back, {totals['tombstoned']} extracted memories tombstoned.",
    )
    return redirect(_cleanup_url(scope))
