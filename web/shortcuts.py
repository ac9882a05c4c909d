"""The plumbing every app's views share: a full page or, for htmx, the panel's partial.

Every data panel shows one of: its data; empty (with what to do); unauthorized (the session
expired: a 401 partial, never a redirect into the panel); unavailable (which backend, the
status and the message, and a Retry). A panel's data is loaded inside `load`, so a failing
backend degrades that panel and never the page.

A view ends in one of a few ways, each one function here: the page or its partial (`page`), on to
another page with a message (`go`), refused with nothing changed (`refuse`, `error_page`), or a
backend unavailable, with a Retry (`unavailable`).

Views import the module (`from web import shortcuts`) and call `shortcuts.render(...)`, `shortcuts.actor(...)`:
the short names stay clear of their local variables.
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
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, resolve_url
from django.shortcuts import render as render_template
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from memoryui import rules
from memoryui.models import Memory

logger = logging.getLogger(__name__)

STATE_HEADER = "X-Memoryui-State"  # app.js swaps 4xx/5xx responses that carry it
ALERTS = "#alerts"  # where errors of POST actions go: the row or form stays as it was
# app.js sends this on htmx requests a person started (a click, a submit, typing; not a poll):
# their answer replaces the page's messages, so an old one never stays above the next outcome.
REPLACE_ALERTS_HEADER = "X-Memoryui-Replace-Alerts"
CONFIRM_DIALOG = "#confirm-dialog"  # where an htmx action asks first (base.html)
CONFIRMED = "confirmed"  # the POST field a confirmed action carries


def actor(request: HttpRequest) -> str:
    """Who the events of this request are by: the signed-in user."""
    return f"user:{request.user.username}"


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx request for a panel. A history restore (cache miss) needs the whole page."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def render(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    """Render a page or a partial, varying on HX-Request."""
    response = render_template(request, template, context, status=status)
    # The page and its fragment share a URL: caches must keep them apart.
    patch_vary_headers(response, ["HX-Request"])
    return response


def page(request: HttpRequest, template: str, partial: str, context: dict, status: int = 200) -> HttpResponse:
    """The full page, or for htmx its partial (the part of the page that the request updates), from
    the same context."""
    return render(request, partial if wants_fragment(request) else template, context, status=status)


def with_state(request: HttpRequest, response: HttpResponse, state: str) -> HttpResponse:
    """Mark a failed response with its panel state; an action's failure goes to the page's alerts."""
    response[STATE_HEADER] = state
    if request.method != "GET":
        # A failed action must not replace the row or form it came from.
        retarget(response, ALERTS)
        reswap(response, "innerHTML")
    return response


@dataclass(frozen=True)
class Unavailable:
    """Why a panel has no data: which backend failed, the status and its message."""

    backend: str
    status: int
    message: str


def load(loader: Callable, *, backend: str = "database"):
    """Run one panel's data load: (value, None), or (None, Unavailable) when the backend fails."""
    try:
        return loader(), None
    except DatabaseError as exc:
        logger.warning("%s unavailable while loading a panel: %s", backend, exc)
        message = (str(exc) or exc.__class__.__name__).splitlines()[0][:300]
        return None, Unavailable(backend=backend, status=503, message=message)


def retry(request: HttpRequest, target: str) -> dict:
    """How the Retry button re-issues this request: the same URL into the same panel."""
    url = request.get_full_path()
    if request.method == "GET":
        return {"method": "get", "url": url, "href": url, "target": target, "swap": "innerHTML", "vals": ""}
    vals = {key: value for key, value in request.POST.items() if key != "csrfmiddlewaretoken"}
    return {
        "method": "post",
        "url": url,
        "href": current_page(request),
        "target": target,
        "swap": "outerHTML" if target.startswith("#row-") else "innerHTML",
        "vals": json.dumps(vals),
    }


def reload(request: HttpRequest, url: str | None = None) -> dict:
    """A Retry that reloads the page (for panels the page cannot render without)."""
    return {"method": "", "url": "", "href": url or request.get_full_path(), "target": "", "swap": "", "vals": ""}


def fragment(request: HttpRequest, template: str, panel: dict) -> HttpResponse:
    """Render one panel's partial; a failed state answers 4xx/5xx with the state header."""
    if panel.get("unavailable"):
        return with_state(request, render(request, template, {"panel": panel}, 503), "unavailable")
    if panel.get("invalid"):
        return with_state(request, render(request, template, {"panel": panel}, 400), "invalid")
    return render(request, template, {"panel": panel})


def alert(request: HttpRequest, *, status: int, state: str, **panel) -> HttpResponse:
    """A state partial on its own: into the panel for a GET, into the page's alerts for an action."""
    panel.setdefault("dismissible", request.method != "GET")
    template = f"memoryui/partials/state_{state}.html"
    return with_state(request, render(request, template, {"panel": panel}, status), state)


def go(
    request: HttpRequest,
    url: str,
    *,
    success: str | Callable[[], str] | None = None,
    error: str | None = None,
    unavailable: Unavailable | None = None,
) -> HttpResponse:
    """Go to `url` after an action, saying there how it went: the backend that was `unavailable`,
    else the `error`, else `success` (a function making it is called only then). A redirect, or for
    htmx a client-side one: a full page load, which shows the messages."""
    if unavailable:
        messages.error(request, f"The {unavailable.backend} is unavailable: {unavailable.message}")
    elif error:
        messages.error(request, error)
    elif success is not None:
        messages.success(request, success() if callable(success) else success)
    return HttpResponseClientRedirect(url) if wants_fragment(request) else redirect(url)


def refuse(
    request: HttpRequest, message: str, *, status: int = 400, title: str | None = None, back: str | None = None
) -> HttpResponse:
    """A request refused, nothing changed: the invalid state saying `message` (under `title`).

    With a page to go `back` to, a plain request goes there and is told; for htmx the state goes
    to the page's alerts, also when a GET asked (an Undo link). Without one, the state answers: into
    the panel for a GET, into the page's alerts for an action.
    """
    if back is not None and not wants_fragment(request):
        messages.error(request, message)
        return redirect(back)
    response = alert(request, status=status, state="invalid", invalid=[message], invalid_title=title)
    if back is not None:
        reswap(retarget(response, ALERTS), "innerHTML")
    return response


def error_page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    """A request that cannot be served: a page saying so, or for htmx the invalid state."""
    if wants_fragment(request):
        return refuse(request, message, status=status, title=title)
    context = {"status": status, "title": title, "message": message}
    return render(request, "memoryui/error.html", context, status=status)


def unavailable(
    request: HttpRequest, down: Unavailable, *, target: str | None = None, note: str | None = None
) -> HttpResponse:
    """503: the `down` backend did not answer; a Retry of this request into `target` when given, and
    what the action did not do (`note`) in place of the panel's words."""
    retry_into = retry(request, target) if target else None
    return alert(request, status=503, state="unavailable", unavailable=down, retry=retry_into, note=note)


BROKER = "background worker's broker"


def not_queued(what: str, exc: Exception | None = None) -> str:
    """Why an action whose task the broker refused did nothing (memoryui.background marked its run
    failed), with the broker's error when it is not shown beside."""
    why = f"the {BROKER} is unreachable ({type(exc).__name__}: {exc})" if exc else f"the {BROKER} is unreachable"
    return f"{what} was not queued, and nothing in the store was changed: {why}. Try again once it is back."


def broker_refused(request: HttpRequest, exc: Exception, *, what: str, back: str) -> HttpResponse:
    """The answer to an action whose task the broker refused: a 503 in the page's alerts (htmx),
    else the page it goes back to, saying so; the API answers the same refusal 503 (api.rest)."""
    if wants_fragment(request):
        down = Unavailable(backend=BROKER, status=0, message=f"{type(exc).__name__}: {exc}")
        return unavailable(request, down, note=not_queued(what))
    return go(request, back, error=not_queued(what, exc))


def validation_message(exc: rules.MemoryValidationError) -> str:
    """A validation error's reasons on one line, field by field."""
    return "; ".join(f"{field}: {', '.join(reasons)}" for field, reasons in exc.errors.items())


def current_page(request: HttpRequest) -> str:
    """The page the user is on (for htmx requests, the page that issued it)."""
    htmx = getattr(request, "htmx", None)
    page = htmx.current_url_abs_path if htmx else None
    return page or request.get_full_path()


def safe_next(request: HttpRequest, default: str) -> str:
    """The `next` URL (POSTed, else in the query string) when it stays on this site, else `default`."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()}, require_https=False):
        return candidate
    return default


def undo_url(batch, next_url: str) -> str:
    """Where the Undo of a batch asks first (a GET shows what it would do), then comes back to `next_url`."""
    return reverse("batch_undo", args=[batch]) + "?" + urlencode({"next": next_url})


def with_undo(message: str, batch, next_url: str):
    """A success message that offers the Undo of its batch right there (a link: it asks first)."""
    url = undo_url(batch, next_url)
    return format_html(
        '{} <a class="alert-action" href="{}" hx-get="{}" data-action="undo">Undo</a>', message, url, url
    )


def login_required_htmx(view):
    """login_required for the UI: a page redirects to sign in; an htmx request gets a 401
    unauthorized partial (a redirect would swap the whole login page into a panel)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if not wants_fragment(request):
            return redirect_to_login(request.get_full_path())
        login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': current_page(request)})}"
        return alert(request, status=401, state="unauthorized", login_url=login_url)

    return wrapper


def say_signed_out(sender, request: HttpRequest, user, **kwargs) -> None:
    """Signing out ends on the sign-in page, which says so (the message outlives the session)."""
    if request is not None and user is not None:
        messages.info(
            request, f"You are signed out ({user.get_username()}). Sign in again to continue.", fail_silently=True
        )


class AlertsMiddleware:
    """Messages are shown once: an htmx answer to something the user did carries the messages
    waiting for them (none, usually) as an out-of-band swap of the page's alerts."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self._replaces_alerts(request, response):
            alerts = render_to_string("memoryui/partials/alerts.html", {"oob": True}, request=request)
            response.content = response.content + alerts.encode(response.charset)
        return response

    @staticmethod
    def _replaces_alerts(request: HttpRequest, response: HttpResponse) -> bool:
        if not wants_fragment(request) or request.headers.get(REPLACE_ALERTS_HEADER) != "1":
            return False
        if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
            return False
        # A redirect shows the messages on the page it loads; an answer into the alerts is one.
        if any(name in response for name in ("HX-Redirect", "HX-Location", "HX-Refresh")):
            return False
        return response.get("HX-Retarget") != ALERTS and (response.status_code < 300 or STATE_HEADER in response)


def needs_confirmation(request: HttpRequest) -> bool:
    """A destructive or bulk POST that has not been confirmed yet (see `confirmation`)."""
    return request.method == "POST" and request.POST.get(CONFIRMED) != "1"


def confirmation(
    request: HttpRequest,
    *,
    title: str,
    consequences: list[str],
    button: str,
    back: str,
    danger: bool = True,
    swap: str = "innerHTML",
) -> HttpResponse:
    """Ask before a destructive or bulk action: what it will do, with counts, and how to undo it.

    The answer re-posts the same fields with `confirmed=1` to the same URL. A plain POST gets a
    confirmation page; an htmx POST gets the same form in the page's dialog, which then posts
    the way the original request did (into the same target).
    """
    fields = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in ("csrfmiddlewaretoken", CONFIRMED)
        for value in values
    ]
    htmx = getattr(request, "htmx", None)
    context = {
        "confirm": {
            "title": title,
            "consequences": consequences,
            "button": button,
            "danger": danger,
            "back": back,
            "action": request.get_full_path(),
            "fields": fields,
            "hx_target": f"#{htmx.target}" if htmx and htmx.target else "",
            "hx_swap": swap,
            "in_dialog": wants_fragment(request),
        }
    }
    if not wants_fragment(request):
        return render(request, "memoryui/confirm.html", context)
    response = render(request, "memoryui/partials/confirm.html", context)
    retarget(response, CONFIRM_DIALOG)
    reswap(response, "innerHTML")
    return response


def scope_choices() -> list[str]:
    """The scopes a scope picker offers; none when the database is unavailable."""
    scopes, _ = load(Memory.objects.scope_names)
    return scopes or []
