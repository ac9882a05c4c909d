"""The access policy of memoryui.roles on the dashboard's pages: sign-in and a role per page, a 403
that says which role is needed, and the template context that leaves out what a role may not use."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

from memoryui.roles import SAFE_METHODS, Role, has_role, role_of
from web import shortcuts


def forbidden(request: HttpRequest, role: Role) -> HttpResponse:
    """403 saying which role is needed: a state in the page's alerts for htmx, else a plain shortcuts."""
    current = role_of(request.user)
    held = f"{current.article} {current}" if current else "no role"
    title = f"The {role} role is needed"
    message = f"This needs the {role} role; you are {held}. Ask an admin to change your role."
    if shortcuts.wants_fragment(request):
        return shortcuts.alert(request, status=403, state="invalid", invalid=[message], invalid_title=title)
    context = {"status": 403, "title": title, "message": message}
    return shortcuts.render(request, "memoryui/error.html", context, status=403)


def role_required(role: Role, *, unsafe_only: bool = False) -> Callable:
    """Sign-in (as `shortcuts.login_required_htmx`) and `role` for a page; with `unsafe_only`, reading the
    page (GET) is open to every role and only what it posts needs `role`."""

    def decorate(view):
        @shortcuts.login_required_htmx
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if (not unsafe_only or request.method not in SAFE_METHODS) and not has_role(request.user, role):
                return forbidden(request, role)
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
