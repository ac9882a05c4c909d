"""One scope for the whole dashboard, as trace tools have one project: the picker in the top bar.

The scope a person last looked at (a page opened with `?scope=`, or a pick in the top bar's picker)
is kept in their session, and every page that works on a scope opens on it when its address names
none: the memory list, the recall playground, traces, duplicates, clean-up, transcripts. A page that
needs one scope and has none in the session opens on the scope with the most memories, so no two
pages disagree on the default. "All scopes" is a choice too, for the pages that can show them all.

A scope in an address that holds no active memory (`agent:asistant`) is said so at the top of the
page, with the closest scope that does.
"""

from __future__ import annotations

import difflib
from urllib.parse import urlencode, urlsplit, urlunsplit

from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from memoryui import rules
from memoryui.models import Memory
from web import shortcuts

SESSION_KEY = "memoryui.scope"
ALL = ""  # the session's value for "all scopes"
# The pages that work on a scope (url names): they open on the session's scope, and a pick in the
# picker reloads them in the new one. Any other page sends the pick to the memory list.
SCOPED_PAGES = frozenset(
    {
        "dashboard",
        "memory_list",
        "duplicates",
        "cleanup",
        "transcript_list",
        "recall:playground",
        "recall:trace_list",
        "recall:golden_list",
    }
)
# Of those, the ones that cannot show every scope at once.
ONE_SCOPE_PAGES = frozenset({"duplicates", "cleanup", "recall:playground"})
# Paths the session scope has nothing to do with: the API, MCP, the back office, files.
_NOT_PAGES = ("/api/", "/mcp/", "/admin/", "/static/", "/.well-known/")


def chosen(request: HttpRequest) -> str | None:
    """The scope this person last looked at ("" for all scopes), None when they never chose one."""
    session = getattr(request, "session", None)
    return session.get(SESSION_KEY) if session is not None else None


def for_page(request: HttpRequest) -> str:
    """The scope a page that needs one opens on: the session's, else the one with the most memories
    (remembered when nothing was chosen yet, so the next page opens on it too). The top bar shows it."""
    scope = chosen(request)
    if not scope:
        counted = counts()
        fallback = counted[0][0] if counted else "agent:main"
        if scope is None and counted:
            remember(request, fallback)
        scope = fallback
    request.memoryui_page_scope = scope
    return scope


def remember(request: HttpRequest, scope: str) -> None:
    if getattr(request, "session", None) is not None and request.session.get(SESSION_KEY) != scope:
        request.session[SESSION_KEY] = scope


def counts() -> list[tuple[str, int]]:
    """Every scope with active memories and how many, the largest first."""
    rows = Memory.objects.active().values_list("scope").annotate(n=Count("id")).order_by("-n", "scope")
    return [(scope, n) for scope, n in rows]


def holds_memories(scope: str) -> bool:
    return Memory.objects.active().filter(scope=scope).exists()


def closest(scope: str, scopes: list[str]) -> str | None:
    """The scope of `scopes` a person most likely meant by `scope` (a typo), if any is close."""
    matches = difflib.get_close_matches(scope, scopes, n=1, cutoff=0.6)
    if not matches:  # `asistant` for `agent:assistant`: compare the ids too
        ids = {candidate.partition(":")[2] or candidate: candidate for candidate in scopes}
        found = difflib.get_close_matches(scope.partition(":")[2] or scope, list(ids), n=1, cutoff=0.6)
        matches = [ids[found[0]]] if found else []
    return matches[0] if matches else None


def _page_name(path: str) -> str | None:
    try:
        match = resolve(path)
    except Resolver404:
        return None
    return f"{match.namespace}:{match.url_name}" if match.namespace else match.url_name


def _asked(request: HttpRequest) -> str | None:
    """The scope a page's address names (normalized; "" for all scopes), None when it names none
    or names something that is not a scope (the page says what is wrong with it)."""
    if request.method != "GET" or "scope" not in request.GET:
        return None
    raw = request.GET.get("scope", "").strip()
    if not raw:
        return ALL
    try:
        return rules.normalize_scope(raw)
    except rules.ScopeError:
        return None


class ScopeMiddleware:
    """Remember the scope a page was opened in, when that scope holds memories (or is "all")."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(_NOT_PAGES) and getattr(request, "user", None) is not None:
            asked = _asked(request)
            if asked is not None and request.user.is_authenticated and _page_name(request.path) in SCOPED_PAGES:
                try:
                    if asked == ALL or holds_memories(asked):
                        remember(request, asked)
                except DatabaseError:
                    pass  # the page says the database is unavailable
        return self.get_response(request)


def context(request: HttpRequest) -> dict:
    """The top bar's picker (the current scope, the page to come back to) and, on a page opened in a
    scope that holds no memories, what to say about it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or request.path.startswith(_NOT_PAGES):
        return {}
    current = chosen(request)
    shown = getattr(request, "memoryui_page_scope", None) or current or ""
    picker = {"current": current or "", "shown": shown, "next": request.get_full_path()}
    return {"scope_picker": picker, "scope_notice": _notice(request)}


def _notice(request: HttpRequest) -> dict | None:
    asked = _asked(request)
    if not asked or _page_name(request.path) not in SCOPED_PAGES:
        return None
    try:
        if holds_memories(asked):
            return None
        scopes = [scope for scope, _ in counts()]
    except DatabaseError:
        return None
    suggestion = closest(asked, scopes)
    notice = {"scope": asked, "suggestion": suggestion}
    if suggestion:
        query = request.GET.copy()
        query["scope"] = suggestion
        query.pop("page", None)
        notice["url"] = f"{request.path}?{query.urlencode()}"
    return notice


def _target(next_url: str, scope: str) -> str:
    """Where a pick in the picker leads from `next_url`: the same page in the new scope when it is a
    page that works on a scope, else the memory list of the new scope."""
    parts = urlsplit(next_url)
    page = _page_name(parts.path)
    if page not in SCOPED_PAGES:
        return reverse("memory_list") + (f"?{urlencode({'scope': scope})}" if scope else "?scope=")
    query = QueryDict(parts.query, mutable=True)
    query.pop("page", None)
    if scope:
        query["scope"] = scope
    elif page in ONE_SCOPE_PAGES:
        query.pop("scope", None)
    else:
        query["scope"] = ""
    return urlunsplit(("", "", parts.path, query.urlencode(), ""))


@shortcuts.login_required_htmx
@require_GET
def picker(request: HttpRequest) -> HttpResponse:
    """The scopes with their counts (the picker's menu, or a page of its own without JavaScript);
    with `use`, switch to that scope ("" for all) and go back to `next`."""
    next_url = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}) or not next_url.startswith(
        "/"
    ):
        next_url = reverse("dashboard")
    if "use" in request.GET:
        raw = request.GET["use"].strip()
        if raw:
            try:
                raw = rules.normalize_scope(raw)
            except rules.ScopeError as exc:
                return shortcuts.error_page(request, 400, "Not a scope", f"use: {exc}")
        remember(request, raw)
        return redirect(_target(next_url, raw))
    scopes, unavailable = shortcuts.load(counts)
    base = reverse("scope_picker")
    panel = {
        "all_url": f"{base}?{urlencode({'use': ALL, 'next': next_url})}",
        "scopes": [(scope, n, f"{base}?{urlencode({'use': scope, 'next': next_url})}") for scope, n in scopes or []],
        "unavailable": unavailable,
        "current": chosen(request) or "",
        "next": next_url,
        "one_scope": _page_name(urlsplit(next_url).path) in ONE_SCOPE_PAGES,
    }
    if shortcuts.wants_fragment(request):
        return shortcuts.fragment(request, "memoryui/partials/scope_menu.html", panel)
    return shortcuts.render(request, "memoryui/scopes.html", {"panel": panel}, status=503 if unavailable else 200)


def with_chosen(request: HttpRequest, query: QueryDict | None = None) -> QueryDict:
    """The page's GET parameters (or `query`, another page's) with the session's scope filled in
    when they name none (a page that can show every scope: the memory list, transcripts)."""
    query = request.GET if query is None else query
    scope = chosen(request)
    if "scope" in query or not scope:
        return query
    query = query.copy()
    query["scope"] = scope
    return query
