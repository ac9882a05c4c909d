"""Store hygiene pages: duplicate clusters with threshold replay, the clean-up wizard, undo.

Every change here is previewed first, asked for (`shortcuts.confirmation`, with what it will do,
counted) and applied as one batch; each result offers its undo, which asks too.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import replace_url

from hygiene import cleanup, dedup, merging, undo
from hygiene.tasks import CLEANUP, enqueue_cleanup_step, enqueue_dedup
from ingest.extraction import excerpt
from memoryui import rules
from memoryui.background import BrokerError
from memoryui.models import Memory, MemoryEvent, TaskRun
from memoryui.text import ago, count, memories
from web import access, scopes, shortcuts

CLUSTERS_SHOWN = 100
PREVIEW_EXAMPLES = 12  # notes a clean-up preview lists until the rest are asked for
KEPT_APART_SHOWN = 20
LAST_MERGE = "last_merge"  # the session's last approved merge, undone from the Duplicates page


def quoted(text: str, length: int = 60) -> str:
    return f"“{excerpt(text, length)}”"


def _scope_param(request: HttpRequest, source) -> tuple[str, str | None]:
    """The scope asked for (normalized) and, when it is not a valid scope, why."""
    raw = (source.get("scope") or "").strip()
    if not raw:
        scope, unavailable = shortcuts.load(lambda: scopes.for_page(request))
        return (scope if unavailable is None else "agent:main"), None
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


@shortcuts.login_required_htmx
@require_GET
def duplicates(request):
    """The scope's duplicate clusters at the configured threshold or, with `?threshold=`, what a
    replay at that threshold would do to them. Reading never changes anything."""
    scope, scope_error = _scope_param(request, request.GET)
    threshold, threshold_error = _threshold_param(request.GET)
    context = _duplicates_context(request, scope, threshold, error=scope_error or threshold_error)
    return shortcuts.page(request, "memoryui/duplicates.html", "memoryui/partials/duplicates.html", context)


def _duplicates_context(request: HttpRequest, scope: str, threshold: float, *, error: str | None = None) -> dict:
    default = dedup.default_threshold()
    context = {
        "scope": scope,
        "scopes": shortcuts.scope_choices(),
        "threshold": threshold,
        "default_threshold": default,
        "replay_min": dedup.REPLAY_RANGE[0],
        "replay_max": dedup.REPLAY_RANGE[1],
        # Nothing looser to move the slider to: the empty state cannot say "move it down".
        "at_loosest": threshold <= dedup.REPLAY_RANGE[0],
        "error": error,
        "page_url": _duplicates_url(scope, threshold),
    }
    if error:
        return context
    rows = dedup.load_rows(scope)
    current = dedup.find_clusters(scope, threshold=default, memories=rows)
    report = (
        current
        if threshold == default
        else dedup.find_clusters(scope, threshold=threshold, memories=rows, vectors=current.vectors)
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
        last_merge=_last_merge(request, scope),
    )
    return context


def _kept_apart(report: dedup.ClusterReport) -> list[dict]:
    shown = report.kept_apart[:KEPT_APART_SHOWN]
    ids = {pk for pair in shown for pk in (pair.a, pair.b)}
    texts = dict(Memory.objects.filter(pk__in=ids).values_list("pk", "text"))
    return [
        {"a": pair.a, "b": pair.b, "text_a": texts.get(uuid.UUID(pair.a), ""),
         "text_b": texts.get(uuid.UUID(pair.b), ""), "similarity": pair.similarity, "reason": pair.reason,
         "copies_a": pair.copies_a, "copies_b": pair.copies_b}
        for pair in shown
    ]  # fmt: skip


def _change_counts(changes: list[dedup.ClusterChange]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.change] = counts.get(change.change, 0) + 1
    return list(counts.items())


def _duplicates_url(scope: str, threshold: float | None = None) -> str:
    query = {"scope": scope}
    if threshold is not None and threshold != dedup.default_threshold():
        query["threshold"] = threshold
    return reverse("duplicates") + "?" + urlencode(query)


def _last_merge(request: HttpRequest, scope: str) -> dict | None:
    """The session's last merge in this scope, while it can still be undone."""
    last = request.session.get(LAST_MERGE)
    if not last or last.get("scope") != scope or undo.is_undone(last["batch"]):
        return None
    return last


def _duplicates_answer(request: HttpRequest, scope: str, threshold: float, back: str) -> HttpResponse:
    """After a decision on a cluster: the clusters again (htmx), or the page it came from."""
    if not shortcuts.wants_fragment(request):
        return redirect(back)
    return shortcuts.render(
        request, "memoryui/partials/duplicates.html", _duplicates_context(request, scope, threshold)
    )


def _cluster_post(request: HttpRequest):
    scope, scope_error = _scope_param(request, request.POST)
    threshold, threshold_error = _threshold_param(request.POST)
    back = shortcuts.safe_next(request, _duplicates_url(scope, threshold))
    return scope, threshold, back, scope_error or threshold_error


@access.editor_required
@require_POST
def duplicates_merge(request):
    """Approve one proposed cluster: merge its members into the chosen canonical memory, once asked."""
    scope, threshold, back, error = _cluster_post(request)
    if error:
        return shortcuts.refuse(request, f"Nothing merged: {error}", back=back)
    members = request.POST.getlist("member")
    canonical = request.POST.get("canonical") or None
    try:
        plan = merging.plan(scope, members, canonical_id=canonical)
    except merging.DedupError as exc:
        return shortcuts.refuse(request, f"Nothing merged: {exc}", status=409, back=back)
    kept = plan.canonical
    if shortcuts.needs_confirmation(request):
        n = len(plan.duplicates)
        return shortcuts.confirmation(
            request,
            title=f"Merge {n + 1} memories into one?",
            consequences=[
                f"Tombstones {memories(n)} and keeps {quoted(kept.text)} ({str(kept.pk)[:8]}).",
                "The kept memory takes their access counts, the better tier and a pin, an entity key, "
                "and any text that adds information.",
                "You can undo it right after, from the message or this page: every memory goes back as it was.",
            ],
            button=f"Merge {count(n, 'duplicate')}",
            back=back,
        )
    try:
        result = merging.merge(
            scope, members, canonical_id=kept.pk, actor=shortcuts.actor(request), reason="approved merge"
        )
    except merging.DedupError as exc:
        return shortcuts.refuse(request, f"Nothing merged: {exc}", status=409, back=back)
    merged = len(result.merged)
    request.session[LAST_MERGE] = {
        "scope": scope,
        "batch": str(result.batch),
        "canonical": result.canonical,
        "text": excerpt(kept.text, 60),
        "merged": merged,
    }
    kept_link = format_html('<a href="{}">{}</a>', kept.get_absolute_url(), quoted(kept.text))
    message = format_html("Merged {} into {}.", count(merged, "duplicate"), kept_link)
    messages.success(request, shortcuts.with_undo(message, result.batch, back))
    return _duplicates_answer(request, scope, threshold, back)


@access.editor_required
@require_POST
def duplicates_reject(request):
    """Not duplicates: these memories are never proposed together again (no memory changes)."""
    scope, threshold, back, error = _cluster_post(request)
    if error:
        return shortcuts.refuse(request, f"Nothing marked: {error}", back=back)
    try:
        pairs = merging.reject(scope, request.POST.getlist("member"), actor=shortcuts.actor(request))
    except (merging.DedupError, ValueError) as exc:
        return shortcuts.refuse(request, f"Nothing marked: {exc}", back=back)
    messages.success(
        request, f"Marked as not duplicates ({count(pairs, 'pair')}); they will not be proposed together again."
    )
    return _duplicates_answer(request, scope, threshold, back)


@access.editor_required
@require_POST
def duplicates_apply(request):
    """Merge every cluster at the given threshold, once asked, as a background task (one batch)."""
    scope, threshold, back, error = _cluster_post(request)
    if error:
        return shortcuts.refuse(request, error, back=back)
    if shortcuts.needs_confirmation(request):
        report = dedup.find_clusters(scope, threshold=threshold)
        if not report.clusters:
            return shortcuts.refuse(request, f"Nothing to merge: no clusters in {scope} at {threshold}.", back=back)
        kept = [quoted(cluster.canonical.text, 40) for cluster in report.clusters[:3]]
        more = len(report.clusters) - len(kept)
        return shortcuts.confirmation(
            request,
            title=f"Merge all {count(len(report.clusters), 'cluster')} at {threshold}?",
            consequences=[
                f"Tombstones {memories(report.duplicates)} and keeps {len(report.clusters)}, "
                f"the proposed one of each cluster: {', '.join(kept)}{f' and {more} more' if more else ''}.",
                "Runs as a background task; its page shows what was merged and offers Undo, "
                "which puts every memory back as it was.",
            ],
            button=f"Merge {count(len(report.clusters), 'cluster')}",
            back=back,
        )
    try:
        with transaction.atomic():
            run = enqueue_dedup(scope, actor=shortcuts.actor(request), threshold=threshold)
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what=f"Merging the clusters of {scope}", back=back)
    return shortcuts.go(
        request, run.get_absolute_url(), success=f"Merging every cluster of {scope} at threshold {threshold}."
    )


# --- undo -------------------------------------------------------------------------------------


def undo_consequences(report: undo.UndoReport) -> list[str]:
    """What an undo will do, from its preview, in words."""
    lines = []
    if report.restored:
        lines.append(f"Restores {memories(report.restored)} it tombstoned.")
    if report.reverted:
        lines.append(f"Puts back the values {memories(report.reverted)} had before it (text, tier, importance, pin …).")
    if report.tombstoned:
        lines.append(f"Tombstones {memories(report.tombstoned)} it added.")
    return lines or ["Changes nothing: every memory is already as it was before."]


def undone_message(report: undo.UndoReport, what: str = "Undone") -> str:
    """`Undone: restored 4 memories, put back 1 as before, tombstoned 2 it had added.`"""
    said = []
    if report.restored:
        said.append(f"restored {memories(report.restored)}")
    if report.reverted:
        said.append(f"put back {report.reverted if said else memories(report.reverted)} as before")
    if report.tombstoned:
        said.append(f"tombstoned {report.tombstoned if said else memories(report.tombstoned)} it had added")
    return f"{what}: {', '.join(said) or 'nothing needed changing'}."


def _batch_origin(batch) -> str:
    """Who made the batch and when, for the confirmation."""
    events = MemoryEvent.objects.filter(batch=batch)
    first = events.order_by("created_at", "id").first()
    if first is None:
        return ""
    touched = events.values("memory_id").distinct().count()
    return f"{count(events.count(), 'change')} to {memories(touched)}, by {first.actor}, {ago(first.created_at)}."


@access.editor_required
@require_http_methods(["GET", "POST"])
def batch_undo(request, batch):
    """Undo one batch. A GET (or an unconfirmed POST) asks first, saying what it will put back."""
    back = shortcuts.safe_next(request, reverse("task_list"))
    force = (request.POST.get("force") or request.GET.get("force")) == "1"
    if request.method == "GET" or shortcuts.needs_confirmation(request):
        try:
            preview = undo.preview([batch], force=force)
        except undo.UndoError as exc:
            return shortcuts.refuse(request, f"Not undone: {exc}", status=409, back=back)
        return shortcuts.confirmation(
            request,
            title="Undo these changes?",
            consequences=[f"The batch: {_batch_origin(batch)}", *undo_consequences(preview)],
            button="Undo",
            back=back,
        )
    try:
        report = undo.undo_batch(batch, actor=shortcuts.actor(request), force=force)
    except undo.UndoError as exc:
        return shortcuts.refuse(request, f"Not undone: {exc}", status=409, back=back)
    last = request.session.get(LAST_MERGE)
    if last and last.get("batch") == str(batch):
        request.session.pop(LAST_MERGE)
    return shortcuts.go(request, back, success=undone_message(report))


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
        summary = ""
        if state == "done":
            summary = cleanup.describe(step, run.counts, backup=run.result.get("backup"), tense="done")
        steps.append({"number": number, "step": step, "title": cleanup.STEP_TITLES[step], "state": state,
                      "run": run, "batch": batch if state == "done" else None, "summary": summary})  # fmt: skip
    return session, steps, current


@shortcuts.login_required_htmx
@require_GET
def cleanup_wizard(request):
    """Four steps, one at a time: preview (a dry run against the store as it is), apply (a task
    and one batch), undo. `?preview=1` shows the current step's dry run."""
    scope, error = _scope_param(request, request.GET)
    preview, every_example = bool(request.GET.get("preview")), bool(request.GET.get("all"))
    context = _wizard_context(request, scope, error=error, preview=preview, every_example=every_example)
    return shortcuts.page(request, "memoryui/cleanup.html", "memoryui/partials/cleanup_steps.html", context)


def _wizard_context(
    request: HttpRequest, scope: str, *, error: str | None = None, preview: bool = False, every_example: bool = False
) -> dict:
    """The wizard's steps; with `preview`, the current step's dry run and PREVIEW_EXAMPLES of what
    it would do to which notes (`every_example`: all of them)."""
    context = {"scope": scope, "scopes": shortcuts.scope_choices(), "error": error, "page_url": _cleanup_url(scope)}
    if error:
        return context
    session, steps, current = _step_states(scope)
    running = any(s["state"] == "running" for s in steps)
    dry_run = None
    if preview and current and not running:
        dry_run = cleanup.run_step(scope, current, dry_run=True, actor=shortcuts.actor(request))
    stats = Memory.objects.filter(scope=scope).stats()
    context.update(
        session=session,
        steps=steps,
        current=current,
        running=running,
        preview=dry_run,
        preview_summary=cleanup.describe(dry_run.step, dry_run.counts, backup=dry_run.backup, tense="preview")
        if dry_run
        else "",
        examples=dry_run.examples(None if every_example else PREVIEW_EXAMPLES) if dry_run else [],
        every_example_url=f"{_cleanup_url(scope)}&{urlencode({'preview': 1, 'all': 1})}",
        every_example=every_example,
        stats=stats,
        notes=stats["by_kind"].get("note", 0),
        undoable=[s["batch"] for s in reversed(steps) if s["batch"]],
        last_done=next((s for s in reversed(steps) if s["state"] == "done" and s["batch"]), None),
    )
    return context


def _cleanup_url(scope: str) -> str:
    return f"{reverse('cleanup')}?{urlencode({'scope': scope})}"


def _wizard_answer(request: HttpRequest, scope: str) -> HttpResponse:
    """After a wizard action: its steps again (htmx, without the preview it came from), or the page."""
    url = _cleanup_url(scope)
    if not shortcuts.wants_fragment(request):
        return redirect(url)
    response = shortcuts.render(request, "memoryui/partials/cleanup_steps.html", _wizard_context(request, scope))
    return replace_url(response, url)


@access.editor_required
@require_POST
def cleanup_apply(request):
    """Apply the wizard's current step (the one that was previewed), once asked, as a background task."""
    scope, error = _scope_param(request, request.POST)
    back = _cleanup_url(scope)
    if error:
        return shortcuts.refuse(request, error, back=back)
    session, steps, current = _step_states(scope)
    step = request.POST.get("step")
    if step != current:
        return shortcuts.refuse(
            request, f"Step {step!r} is not the next one to apply (that is {current or 'none'}).", back=back
        )
    number = cleanup.STEPS.index(step) + 1
    if shortcuts.needs_confirmation(request):
        dry_run = cleanup.run_step(scope, step, dry_run=True, actor=shortcuts.actor(request))
        after = (
            "Nothing in the store changes; the next steps can then be undone back to this state."
            if step == "snapshot"
            else f"“Undo step {number}” on this page puts every memory it changed back as it was."
        )
        return shortcuts.confirmation(
            request,
            title=f"Apply step {number}: {cleanup.STEP_TITLES[step]}?",
            consequences=[
                cleanup.describe(step, dry_run.counts, backup=dry_run.backup, tense="ask") + ".",
                "It runs as a background task, against the store as it is then.",
                after,
            ],
            button=f"Apply step {number}",
            back=back + "&preview=1",
            danger=step != "snapshot",
        )
    try:
        with transaction.atomic():
            run = enqueue_cleanup_step(
                scope, step, actor=shortcuts.actor(request), cleanup=session or str(uuid.uuid4())
            )
    except BrokerError as exc:
        return shortcuts.broker_refused(request, exc, what=f"Step {number}", back=back)
    run.refresh_from_db()  # a worker that runs tasks inline has finished it already
    what = f"Step {number}, {cleanup.STEP_TITLES[step].lower()}"
    if run.status == TaskRun.Status.FAILED:
        messages.error(request, f"{what}: failed: {excerpt(run.error, 300)}")
    else:
        messages.success(request, f"{what}: {'applied' if run.status == TaskRun.Status.SUCCEEDED else 'applying'}.")
    return _wizard_answer(request, scope)


@access.editor_required
@require_POST
def cleanup_undo(request):
    """Undo the clean-up once asked: every applied step's batch, last step first (or only the last, `last=1`)."""
    scope, error = _scope_param(request, request.POST)
    back = _cleanup_url(scope)
    if error:
        return shortcuts.refuse(request, error, back=back)
    _, steps, _ = _step_states(scope)
    done = [s for s in reversed(steps) if s["batch"]]
    if request.POST.get("last") == "1":
        done = done[:1]
    if not done:
        return shortcuts.refuse(request, "Nothing to undo: no step of this clean-up changed a memory.", back=back)
    batches = [s["batch"] for s in done]
    what = (
        f"step {done[0]['number']}"
        if len(done) == 1
        else f"the clean-up ({count(len(done), 'step')}: {', '.join(str(s['number']) for s in reversed(done))})"
    )
    if shortcuts.needs_confirmation(request):
        try:
            preview = undo.preview(batches)
        except undo.UndoError as exc:
            return shortcuts.refuse(request, f"Not undone: {exc}", status=409, back=back)
        return shortcuts.confirmation(
            request,
            title=f"Undo {what}?",
            consequences=[*undo_consequences(preview), "The backup file of step 1 stays where it is."],
            button=f"Undo {what.split(' (')[0]}",
            back=back,
        )
    try:
        totals = undo.undo_batches(batches, actor=shortcuts.actor(request))
    except undo.UndoError as exc:
        return shortcuts.refuse(request, f"Not undone: {exc}", status=409, back=back)
    messages.success(request, undone_message(totals, f"Undid {what.split(' (')[0]}"))
    return _wizard_answer(request, scope)
