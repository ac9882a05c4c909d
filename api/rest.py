"""The REST plumbing every app's API shares: the error shape, who is asking, query parameters.

Every error leaves as {"error": {"code", "message", "details"}} (`exception_handler`, named by
REST_FRAMEWORK in settings). A token limited to scopes sees nothing else (`visible_scopes`).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, transaction
from drf_spectacular.utils import OpenApiResponse
from kombu.exceptions import OperationalError as BrokerError
from rest_framework import exceptions, permissions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from api import throttling
from api.parsers import UnstorableBody
from api.serializers import ErrorSerializer
from memoryui import rules
from memoryui.errors import error_body
from memoryui.models import ApiToken, ConflictError
from searchindex.documents import IndexUnavailable
from searchindex.search import SearchError

logger = logging.getLogger(__name__)


# --- errors ------------------------------------------------------------------------------

BACKEND_RETRY_AFTER_SECONDS = 5
# A 404 with nothing more to say: DRF's own (exceptions.NotFound), and Django's under /api/ (web.views).
NOT_FOUND = "Not found."
# A memory the caller cannot see does not exist for them: the API and the MCP tools answer it alike.
MEMORY_NOT_FOUND = "No memory with this id in the scopes you can see."


class ApiError(exceptions.APIException):
    """An API error with per-field details, e.g. the ids a bulk action could not find."""

    def __init__(self, status_code: int, message: str, details: dict | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.details = details or {}


def invalid_message(details: dict) -> str:
    """The message of a 400 `invalid`: the fields at fault, named; `details` says why."""
    return "Invalid input: " + ", ".join(str(name) for name in details) + "." if details else "Invalid input."


def _json_error(status_code: int, message: str, details: dict | None = None) -> Response:
    set_rollback()
    return Response(error_body(status_code, message, details), status=status_code)


def too_large_body() -> dict:
    """The JSON error of a body over DATA_UPLOAD_MAX_MEMORY_SIZE (413), wherever it is caught."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return error_body(413, too_large_message(), {"body": [f"is larger than {limit} bytes"]})


def too_large_message() -> str:
    """Why a body over DATA_UPLOAD_MAX_MEMORY_SIZE is refused, for the API and the pages alike."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return (
        f"The request body is larger than the {limit:,} bytes this server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE); "
        "send less at once, e.g. a long transcript in parts (posting it again adds only the new messages)."
    )


def exception_handler(exc, context):
    """Every API error as {"error": {"code", "message", "details"}}, never an HTML page."""
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        # Session-less requests without a token get 401 with the JSON shape, never a redirect.
        response = Response(status=status.HTTP_401_UNAUTHORIZED)
        response["WWW-Authenticate"] = 'Bearer realm="api"'
        response.data = error_body(401, str(exc.detail))
        return response
    if isinstance(exc, ApiError | UnstorableBody):
        return _json_error(exc.status_code, exc.message, exc.details)
    if isinstance(exc, RequestDataTooBig):
        return Response(too_large_body(), status=413)
    if isinstance(exc, rules.MemoryValidationError):
        return _json_error(400, invalid_message(exc.errors), exc.errors)
    if isinstance(exc, ConflictError):
        return _json_error(409, str(exc))
    if isinstance(exc, SearchError):
        return _json_error(400, invalid_message({exc.field: [str(exc)]}), {exc.field: [str(exc)]})
    if isinstance(exc, IndexUnavailable):
        logger.warning("search index unavailable: %s", exc)
        response = _json_error(
            503, f"Search is unavailable: {exc}", {"backend": f"{exc.index} index", "reason": str(exc)}
        )
        response["Retry-After"] = str(BACKEND_RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc)
        response = _json_error(503, f"The database is unavailable: {exc}", {"backend": "database", "reason": str(exc)})
        response["Retry-After"] = str(BACKEND_RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, BrokerError):
        # A task sent once its transaction committed was refused (memoryui.background marks its
        # run failed): what the request stored is kept, and asking again queues the task.
        logger.warning("broker unavailable: %s", exc)
        message = f"The broker is unavailable, the task was not queued: {exc}"
        response = _json_error(503, message, {"backend": "broker", "reason": str(exc)})
        response["Retry-After"] = str(BACKEND_RETRY_AFTER_SECONDS)
        return response
    response = drf_exception_handler(exc, context)
    if response is None:
        if settings.DEBUG:
            return None  # Let Django show the traceback page while developing.
        # Tell Django's listeners (logging, the test client) as an unhandled exception would.
        request = context.get("request")
        signals.got_request_exception.send(sender=None, request=getattr(request, "_request", request))
        logger.error("unhandled API error", exc_info=exc)
        return _json_error(500, "Internal server error.")
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body(response.status_code, invalid_message(detail), details=detail)
    else:
        # Django's Http404 (e.g. DRF's own `?format=` negotiation) has no detail: DRF's answer has.
        detail = getattr(exc, "detail", None) or (response.data or {}).get("detail", "")
        # A role refusal (memoryui.roles.Forbidden) names what is needed and what the caller has.
        response.data = error_body(response.status_code, str(detail), getattr(exc, "details", None))
    if isinstance(exc, exceptions.Throttled):
        request = context.get("request")
        ident = throttling.caller_ident(request) if request is not None else None
        quiet_refusal(response, ident or "anonymous", "api")
    return response


def quiet_refusal(response, ident: str, channel: str) -> None:
    """A 429 counted in the per-period summary of refusals (api.throttling) instead of Django's
    warning for each 4xx answer: a flood would log dozens of lines a second."""
    response._has_been_logged = True  # what django.utils.log.log_response checks
    throttling.refusals.note(ident, channel)


ERROR_RESPONSES = {
    400: OpenApiResponse(ErrorSerializer, description="invalid: details name each bad field"),
    401: OpenApiResponse(ErrorSerializer, description="unauthorized: no session, missing/invalid/revoked token"),
    403: OpenApiResponse(
        ErrorSerializer,
        description="forbidden: the caller's role (or the token owner's) is below the one needed, a read token "
        "asked to change something, or a write into a scope outside the token's",
    ),
    404: OpenApiResponse(
        ErrorSerializer, description="not_found: an unknown id or name, or a scope the token cannot see"
    ),
    409: OpenApiResponse(
        ErrorSerializer, description="conflict: e.g. the entity key or name is already taken in the scope"
    ),
    503: OpenApiResponse(
        ErrorSerializer, description="backend_unavailable: the database, broker or an index did not answer"
    ),
}


def errors(*codes: int) -> dict:
    """The documented error responses of an endpoint, for `extend_schema(responses=...)`."""
    return {code: ERROR_RESPONSES[code] for code in codes}


# --- who is asking -----------------------------------------------------------------------


def visible_scopes(request) -> list[str] | None:
    """The scopes the caller may see: a token's own, or None (every scope) for a signed-in user."""
    return request.auth.allowed_scopes if isinstance(request.auth, ApiToken) else None


def actor_for(request) -> str:
    """Who the events of this request are by: the token, or the signed-in user."""
    if isinstance(request.auth, ApiToken):
        return f"token:{request.auth.name}"
    return f"user:{request.user.get_username()}"


def check_writable_scope(request, scope: str) -> None:
    """Refuse (403) a write into a scope outside the caller's token."""
    allowed = visible_scopes(request)
    if allowed is not None and scope not in allowed:
        raise ApiError(
            403,
            f"This token may not write to scope {scope}.",
            {"scope": [f"{scope} is outside this token's scopes: {', '.join(allowed)}"]},
        )


class IsSessionUser(permissions.BasePermission):
    """Token management is for people signed in to the dashboard: a token cannot mint tokens."""

    message = "API tokens cannot manage tokens; sign in to the dashboard instead."

    def has_permission(self, request, view) -> bool:
        return not isinstance(request.auth, ApiToken)


# --- query parameters: a bad value is noted in `problems`, to answer one 400 naming each -----


def scope_param(value: str, problems: dict) -> str | None:
    """The scope normalized (`main` is `agent:main`), or None with the reason in `problems`."""
    try:
        return rules.normalize_scope(value)
    except rules.ScopeError as exc:
        problems["scope"] = [str(exc)]
        return None


def choice_param(name: str, value: str, choices: tuple[str, ...], problems: dict) -> str | None:
    """The value if it is one of `choices`, or None with the reason in `problems`."""
    if value not in choices:
        problems[name] = [f"{value!r} is not one of: {', '.join(choices)}"]
        return None
    return value


# --- views ---------------------------------------------------------------------------------


class WriteTransactionMixin:
    """One transaction for each request that may write (POST, PUT, PATCH, DELETE), its answer
    rendered inside it: an error answer, or an answer that cannot be rendered, rolls back all the
    request wrote, and the work queued with `transaction.on_commit` (index sync, tasks) runs only
    for what was kept.

    Not ATOMIC_REQUESTS: with SQLite's BEGIN IMMEDIATE every request, reads included, would hold
    the database's write lock for as long as it runs (a search embeds, a recall may wait for the
    LLM), and a panel could no longer degrade alone when the database errs.
    """

    def dispatch(self, request, *args, **kwargs):
        if request.method in permissions.SAFE_METHODS:
            return super().dispatch(request, *args, **kwargs)
        try:
            with transaction.atomic():
                response = super().dispatch(request, *args, **kwargs)
                if response.status_code >= 400:
                    transaction.set_rollback(True)
                elif hasattr(response, "render"):
                    response.render()
        except (OperationalError, InterfaceError, BrokerError) as exc:
            # Outside the view's exception handling: the database went away as the transaction
            # began or ended (what the view answered was never acknowledged), or the broker refused
            # a task sent once it committed. Answer what that handling would: a 503.
            response = exception_handler(exc, {"view": self, "request": request})
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = JSONRenderer.media_type
            response.renderer_context = {"view": self, "request": request}
        return response


class JsonErrorsMixin:
    """Answer errors as JSON even from views that render YAML or HTML on success."""

    def handle_exception(self, exc):
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)
