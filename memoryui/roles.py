"""Roles: who may read the store, who may change it, who may administer it.

Three Django groups, ordered viewer < editor < admin; each role can do what the one below it can:

- viewer: reads everything it may see, searches, runs recall in the playground (and POST /api/recall/);
- editor: also changes memories (create, edit, pin, tombstone, bulk actions, undo) and runs the
  hygiene (dedup and merges, clean-up, extraction, transcript ingestion, golden queries and their
  runs, saved traces);
- admin: also tokens for every scope, recall profiles, the back office (/admin/) and user roles.

A superuser is always an admin; an active user in no group is a viewer (least privilege); a user
in several groups has the highest. An API token never does more than its owner can do now: a
`read` token only reads, and so does a `write` token whose owner is a viewer.

Every role check asks `role_refusal`, so a refusal reads the same wherever it is answered: the pages
through `web.access.role_required`, the API through `RolePermission` (the REST_FRAMEWORK default),
the MCP tools through `mcpserver.tools.Caller`. The back office checks with `web.admin`'s site; the
groups' Django model permissions, which it checks for its own pages, are granted by `sync_groups`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from django.apps import apps as global_apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from rest_framework import exceptions, permissions

from memoryui.models import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class Role(enum.IntEnum):
    """A role, ordered by what it may do; its name is its group's name."""

    VIEWER = 1
    EDITOR = 2
    ADMIN = 3

    def __str__(self) -> str:
        return self.name.lower()

    @property
    def article(self) -> str:
        return "an" if self is Role.ADMIN or self is Role.EDITOR else "a"

    @classmethod
    def parse(cls, name: str) -> Role:
        """The role named `name` (viewer, editor, admin), or ValueError listing them."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"{name!r} is not a role; use one of: {', '.join(ROLE_NAMES)}") from None


ROLE_NAMES = tuple(str(role) for role in Role)
_CACHE = "_memoryui_role"  # role_of's answer for one user object (one request), as Django caches perms


def role_of(user) -> Role | None:
    """The user's role now, or None for an anonymous or deactivated user."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    cached = getattr(user, _CACHE, None)
    if cached is not None:
        return cached
    if user.is_superuser:
        role = Role.ADMIN
    else:
        names = user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True)
        role = max((Role.parse(name) for name in names), default=Role.VIEWER)
    setattr(user, _CACHE, role)
    return role


def has_role(user, role: Role) -> bool:
    """Whether the user's role is `role` or a higher one."""
    current = role_of(user)
    return current is not None and current >= role


def set_role(user, role: Role) -> dict:
    """Put the user in the role's group and out of the other two.

    A superuser is always an admin, so any other role also takes the superuser status away.
    Returns what changed: {"username", "role", "previous", "superuser_removed"}.
    """
    previous = role_of(user)
    groups = {str(r): ensure_group(r) for r in Role}
    user.groups.remove(*(group for name, group in groups.items() if name != str(role)))
    user.groups.add(groups[str(role)])
    superuser_removed = role < Role.ADMIN and user.is_superuser
    if superuser_removed:
        user.is_superuser = False
        user.save(update_fields=["is_superuser"])
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)
    return {
        "username": user.get_username(),
        "role": str(role),
        "previous": str(previous) if previous else None,
        "superuser_removed": superuser_removed,
    }


# --- tokens ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """Why a token may not be minted, or a request made (`role_refusal`): the request's field at
    fault and the role it needs."""

    field: str
    role: Role
    message: str


def default_access(user) -> str:
    """The access a token gets when none is asked for: the most its owner may mint."""
    return ApiToken.Access.WRITE if has_role(user, Role.EDITOR) else ApiToken.Access.READ


def mint_refusal(user, *, access: str, scopes: Iterable[str]) -> Refusal | None:
    """Whether `user` may mint this token in the dashboard or the API: None if so, else why not.

    Only an admin mints a token for every scope (no scopes); an editor mints read or write tokens
    for named scopes; a viewer read tokens for named scopes. (`manage.py api_token` is the
    operator's and mints anything.)
    """
    role = role_of(user)
    if role is None:
        return Refusal("access", Role.VIEWER, "Only an active user may hold tokens.")
    if not list(scopes) and role < Role.ADMIN:
        return Refusal(
            "scopes",
            Role.ADMIN,
            f"A token for every scope needs the admin role; you are {role.article} {role}. Name the scopes it may see.",
        )
    if access == ApiToken.Access.WRITE and role < Role.EDITOR:
        return Refusal(
            "access",
            Role.EDITOR,
            f"A write token needs the editor role; you are {role.article} {role}. Ask for a read token.",
        )
    return None


# --- requests: the pages, the API, MCP ------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """What a request needs: a role, and whether it changes something (a read token may not)."""

    role: Role
    writes: bool


READS = Need(Role.VIEWER, writes=False)
EDITS = Need(Role.EDITOR, writes=True)


def role_refusal(user, need: Need, token: ApiToken | None = None) -> Refusal | None:
    """Why `user` (through `token`, when a token is used) may not do what `need` asks, or None when
    they may: the role needed, from the user's role now (field `role`), then a read token's access
    (field `access`). The message says what is needed and what the caller has; every role check of
    the pages, the API and MCP answers with it."""
    role = role_of(user)
    if role is None or role < need.role:
        held = f"{role.article} {role}" if role else "no role"
        who = "this token's owner is" if token else "you are"
        return Refusal("role", need.role, f"This needs the {need.role} role; {who} {held}.")
    if need.writes and token is not None and not token.can_write:
        message = "This needs a write token; this token is read-only: it may read and recall, not change anything."
        return Refusal("access", need.role, message)
    return None


class Forbidden(exceptions.PermissionDenied):
    """A role refusal as the API and MCP answer it: 403 `forbidden`, its message in `details` under the field
    at fault, as a 400 names its fields: `{"role": ["This needs the editor role; you are a viewer."]}`."""

    def __init__(self, refused: Refusal):
        super().__init__(refused.message)
        self.details = {refused.field: [refused.message]}


def method_need(request, write_role: Role = Role.EDITOR) -> Need:
    """A safe method only reads; any other needs `write_role` and, from a token, write access."""
    return READS if request.method in SAFE_METHODS else Need(write_role, writes=True)


def api_need(request, view) -> Need:
    """What an API request needs: the view's `access_needed(request)` when it has one (a POST that
    only reads), else `method_need` with the view's `write_role` (editor by default)."""
    if hasattr(view, "access_needed"):
        return view.access_needed(request)
    return method_need(request, getattr(view, "write_role", Role.EDITOR))


class RolePermission(permissions.BasePermission):
    """The API's role check (a REST_FRAMEWORK default): a request needs its view's role, from the
    signed-in user or the token's owner, and a request that changes something needs a write token.
    Refusals are 403 `forbidden` naming the role (or the access) needed and the caller's, in the
    message and in `details` (`Forbidden`); anonymous callers get 401.

    This module is named by REST_FRAMEWORK, which rest_framework.views reads on import: it must not
    import rest_framework.views (nor api.rest, which does)."""

    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False  # DRF answers 401 (NotAuthenticated)
        token = request.auth if isinstance(request.auth, ApiToken) else None
        refused = role_refusal(user, api_need(request, view), token)
        if refused:
            raise Forbidden(refused)  # not False: DRF's own 403 would carry the message alone
        return True


# --- groups and their Django permissions --------------------------------------------------------

STORE_APPS = ("memoryui", "recall")
ADMIN_ONLY_MODELS = {("memoryui", "apitoken"), ("recall", "recallprofile")}
EDIT_ACTIONS = ("add", "change", "delete")


def ensure_group(role: Role, *, apps=global_apps, using: str = DEFAULT_DB_ALIAS):
    """The role's group; created with its permissions when it is missing."""
    group_model = apps.get_model("auth", "Group")
    group, created = group_model.objects.using(using).get_or_create(name=str(role))
    if created:
        sync_groups(apps, using=using, roles=(role,))
    return group


def sync_groups(apps=global_apps, *, using: str = DEFAULT_DB_ALIAS, app_label: str | None = None, roles=tuple(Role)):
    """Create the role groups and grant each the Django permissions of its role (never revoking one):
    viewer views the store's models (memoryui, recall); editor also adds, changes and deletes them,
    tokens and recall profiles excepted; admin holds every permission. `app_label` limits the
    grants to one app's permissions."""
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    perms = permission_model.objects.using(using).select_related("content_type")
    if app_label is not None:
        perms = perms.filter(content_type__app_label=app_label)
    grants: dict[Role, list] = {role: [] for role in Role}
    for perm in perms:
        app, model = perm.content_type.app_label, perm.content_type.model
        action = perm.codename.partition("_")[0]
        grants[Role.ADMIN].append(perm)
        if app not in STORE_APPS:
            continue
        if action == "view":
            grants[Role.VIEWER].append(perm)
            grants[Role.EDITOR].append(perm)
        elif action in EDIT_ACTIONS and (app, model) not in ADMIN_ONLY_MODELS:
            grants[Role.EDITOR].append(perm)
    for role in roles:
        group, _ = group_model.objects.using(using).get_or_create(name=str(role))
        group.permissions.add(*grants[role])


def assign_existing_users(apps=global_apps, *, using: str = DEFAULT_DB_ALIAS) -> dict[str, int]:
    """Give the users who had no role theirs: superusers admin, staff editor, the rest stay viewers
    (no group). Users already in a role group keep it. Returns how many joined each group."""
    user_model = apps.get_model(settings.AUTH_USER_MODEL)
    group_model = apps.get_model("auth", "Group")
    users = user_model.objects.using(using).exclude(groups__name__in=ROLE_NAMES)
    moved = {}
    for role, who in ((Role.ADMIN, {"is_superuser": True}), (Role.EDITOR, {"is_staff": True, "is_superuser": False})):
        group, _ = group_model.objects.using(using).get_or_create(name=str(role))
        joining = list(users.filter(**who))
        group.user_set.add(*joining)
        moved[str(role)] = len(joining)
    return moved


def sync_groups_after_migrate(sender, apps=global_apps, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """post_migrate: grant the groups the permissions of the app just migrated (models added after
    the roles' migration, and apps migrated after it, join their groups too)."""
    try:
        apps.get_model("auth", "Permission")
    except LookupError:
        return  # auth is not migrated (yet)
    sync_groups(apps, using=using, app_label=sender.label)
