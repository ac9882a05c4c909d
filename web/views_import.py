"""The Import page: upload an agent's memory store, see what a dry run would write, confirm.

The upload waits in the session between the preview and the confirmation (a browser cannot post a
chosen file twice without JavaScript), and the confirmation imports what was previewed: the same
bytes, format, scope and options. The import is one batch, so its message offers the Undo.
The rows and their keyword (BM25) entries are written before the page answers; their vectors are
embedded by the workers in batches, a task whose progress the Tasks page shows.
"""

from __future__ import annotations

import base64
import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods

from ingest.memoryfiles import FormatError, detect
from ingest.memoryfiles.importing import FileImportReport, import_files, import_files_in_background
from memoryui.text import count, memories
from web import access, shortcuts
from web.forms import MemoryImportForm

PENDING = "pending_import"  # the session key of the upload waiting for its confirmation
PREVIEW_ROWS = 500  # rows of the preview table; the counts cover every memory


@access.editor_required
@require_http_methods(["GET", "POST"])
def memory_import(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and request.POST.get(shortcuts.CONFIRMED) == "1":
        return _confirmed(request)
    form = MemoryImportForm(request.POST or None, request.FILES or None)
    panel: dict = {"form": form, "scopes": shortcuts.scope_choices()}
    status = 200
    if request.method == "POST":
        if form.is_valid():
            panel.update(_preview(request, form))
        else:
            # A plain page says 400; htmx swaps only a 2xx answer into the panel, so it gets the form as 200.
            status = 200 if shortcuts.wants_fragment(request) else 400
    return shortcuts.page(
        request, "memoryui/memory_import.html", "memoryui/partials/import_panel.html", {"panel": panel}, status
    )


def _preview(request: HttpRequest, form: MemoryImportForm) -> dict:
    """Run the import as a dry run and keep the upload for the confirmation."""
    data = form.cleaned_data
    options = {"format": data["format"], "scope": data["scope"], "dedup": data["dedup"]}
    try:
        report, unavailable = shortcuts.load(lambda: import_files(data["files"], dry_run=True, **options))
    except FormatError as exc:
        form.add_error("format", str(exc))
        return {}
    if unavailable:
        return {"unavailable": unavailable, "retry": shortcuts.reload(request)}
    token = str(uuid.uuid4())
    upload = data["file"]
    upload.seek(0)
    request.session[PENDING] = {
        "token": token,
        "name": upload.name,
        "data": base64.b64encode(upload.read()).decode("ascii"),
        **options,
    }
    return {
        "report": report,
        "rows": report.preview[:PREVIEW_ROWS],
        "token": token,
        "file_name": upload.name,
        "summary": _summary(report, would=True),
        "writes": report.imported + report.updated + report.merged,
    }


def _confirmed(request: HttpRequest) -> HttpResponse:
    pending = request.session.get(PENDING)
    page = reverse("memory_import")
    if not pending or pending.get("token") != request.POST.get("token"):
        return shortcuts.go(
            request, page, error="Nothing imported: this preview is no longer waiting. Upload the file again."
        )
    files = detect.read_upload(pending["name"], base64.b64decode(pending["data"]))
    options = {"format": pending["format"], "scope": pending["scope"], "dedup": pending["dedup"]}
    report, unavailable = shortcuts.load(
        lambda: import_files_in_background(files, actor=shortcuts.actor(request), **options)
    )
    if unavailable:
        return shortcuts.go(
            request, page, error=f"Nothing imported: the {unavailable.backend} is unavailable: {unavailable.message}"
        )
    del request.session[PENDING]
    list_url = reverse("memory_list") + "?" + urlencode({"source": "import", "sort": "-updated"})
    message = f"{_summary(report, would=False)} from {pending['name']}."
    if report.batch:
        messages.success(request, shortcuts.with_undo(message, report.batch, list_url))
    else:
        messages.info(request, message)
    if report.task and report.vector_pending:
        messages.info(request, _searchable(report))
    if report.errors:
        first = report.errors[0]
        where = f"{first['file']} line {first['line']}" if "file" in first else f"line {first['line']}"
        messages.warning(
            request, f"{count(len(report.errors), 'problem')} not imported, e.g. {where}: {first['error']}"
        )
    return shortcuts.go(request, list_url)


def _searchable(report: FileImportReport):
    """What the imported memories can be found by now, and where the rest of their indexing shows."""
    now = (
        "Searchable by keyword now"
        if report.bm25_searchable
        else "Not yet searchable by keyword (the keyword index was unavailable; the task writes it)"
    )
    return format_html(
        '{}; vector search follows as the embedding batches land: {} to embed, <a href="{}">progress</a>.',
        now,
        memories(report.vector_pending),
        reverse("task_detail", args=[report.task]),
    )


def _summary(report: FileImportReport, *, would: bool) -> str:
    """`Would import 8 memories, update 1, merge 0, leave 2 unchanged or skipped.`"""
    said = [
        f"{'Would import' if would else 'Imported'} {memories(report.imported)}",
        f"{'update' if would else 'updated'} {report.updated}",
    ]
    if report.merged:
        said.append(f"{'merge' if would else 'merged'} {report.merged} into existing ones")
    said.append(f"{'leave' if would else 'left'} {report.skipped} unchanged or skipped")
    if report.copied:
        said.append(f"{report.copied} of them copies of memories of another scope, with ids of their own")
    return ", ".join(said)
