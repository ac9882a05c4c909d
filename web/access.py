"""The access policy of memoryui.roles on the dashboard's pages: sign-in and a role per page, a 403
that says which role is needed, and the template context that leaves out what a role may not use."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

from memoryui.roles import SAFE_METHODS, Need, Refusal, Role, role_of, role_refusal
from web import shortcuts


def forbidden(request: HttpRequest, refused: Refusal) -> HttpResponse:
    """403 in the words of the refusal (`roles.role_refusal`, as the API and MCP say it) and what to do:
    a state in the page's alerts for htmx, else a plain page."""
    message = f"{refused.message} Ask an admin to change your role."
    return shortcuts.error_page(request, 403, f"The {refused.role} role is needed", message)


def role_required(role: Role, *, unsafe_only: bool = False) -> Callable:
    """Sign-in (as `shortcuts.login_required_htmx`) and `role` for a page; with `unsafe_only`, reading the
    page (GET) is open to every role and only what it posts needs `role`."""

    def decorate(view):
        @shortcuts.login_required_htmx
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            reads = request.method in SAFE_METHODS
            if not (unsafe_only and reads):
                refused = role_refusal(request.user, Need(role, writes=not reads))
                if refused:
                    return forbidden(request, refused)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


editor_required = role_required(Role.EDITOR)
admin_required = role_required(Role.ADMIN)


def context(request: HttpRequest) -> dict:
    """Template context: `role` and `can.edit` / `can.admin`, to leave out controls the user may not use."""

    def abilities() -> dict:
        current = role_of(getattr(request, "user", AnonymousUser()))
        return {
            "role": current,
            "edit": current is not None and current >= Role.EDITOR,
            "admin": current is Role.ADMIN,
        }

    return {"can": SimpleLazyObject(abilities)}
