"""Prepare a fresh checkout to serve: migrate, load the demo into an empty store, ensure an admin.

On several hosts (settings.MEMORYUI_MULTI_HOST) the database is all it relies on: the admin user
existing is what says it ran, its password is never kept in a host's data dir, and hosts starting
at once take turns (a PostgreSQL advisory lock), so one migrates and creates the admin.
"""

from __future__ import annotations

import io
import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from memoryui import roles
from memoryui.models import Memory
from web import demo

ADMIN_USERNAME = "admin"
DEFAULT_URL = "http://127.0.0.1:8000/"
PASSWORD_ENV = "MEMORYUI_ADMIN_PASSWORD"
# pg_advisory_lock's key for bootstrap: any number the rest of memoryui does not lock on.
ADVISORY_LOCK_KEY = 0x6D656D62  # "memb"


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Command(BaseCommand):
    help = (
        "What `make run` does before serving: migrate; load the demo (clean + polluted) if the store "
        "is empty; create the superuser 'admin' (role admin) if there is none, with a random password shown once "
        f"and kept in <data dir>/admin_password (mode 0600; on several hosts only shown), or the password "
        f"in ${PASSWORD_ENV}."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON report on stdout")
        parser.add_argument("--url", default=DEFAULT_URL, help="the address the dashboard will be served on")
        parser.add_argument("--no-demo", action="store_true", help="leave an empty store empty (a deployment)")

    def handle(self, *args, **options):
        as_json = options["json"]
        # Human messages go to stderr with --json, so stdout holds the JSON document only.
        say = self.stderr.write if as_json else self.stdout.write

        with _one_host_at_a_time():
            call_command("migrate", interactive=False, verbosity=0, stdout=io.StringIO())
            seeded = None
            if not options["no_demo"] and not Memory.objects.exists():
                seeded = {"clean": demo.seed_clean(), "polluted": demo.seed_polluted()}
                say(
                    f"The store was empty: loaded the demo ({seeded['clean']} clean memories, "
                    f"{seeded['polluted']} polluted legacy notes in agent:main and agent:test-w)."
                )
            admin = self._ensure_admin(say, options["url"])
        if as_json:
            self.stdout.write(json.dumps({"migrated": True, "seeded": seeded, "admin": admin, "url": options["url"]}))

    def _ensure_admin(self, say, url: str) -> dict:
        """Create the admin once; never show or reset its password again."""
        users = get_user_model().objects
        # On several hosts a file in one host's data dir would be known to that host alone.
        password_file = None if settings.MEMORYUI_MULTI_HOST else Path(settings.DATA_DIR) / "admin_password"
        superuser = users.filter(is_superuser=True).order_by("pk").first()
        if superuser is not None:
            kept = superuser.username == ADMIN_USERNAME and password_file is not None and password_file.exists()
            where = f" (password in {_display(password_file)})" if kept else ""
            say(f"Admin login: {superuser.username}{where}")
            return {
                "username": superuser.username,
                "created": False,
                "password_file": str(password_file) if kept else None,
            }
        if users.filter(username=ADMIN_USERNAME).exists():
            say(
                f"A user named {ADMIN_USERNAME!r} exists but is not a superuser; no admin was created. "
                "Run `manage.py createsuperuser` to make one."
            )
            return {"username": None, "created": False, "password_file": None}

        from_env = os.environ.get(PASSWORD_ENV, "")
        password = from_env or secrets.token_urlsafe(12)
        with transaction.atomic():
            admin = users.create_superuser(ADMIN_USERNAME, "", password)
            roles.set_role(admin, roles.Role.ADMIN)  # the group too, so /admin/ lists them as an admin
            if not from_env and password_file is not None:
                # Written inside the transaction: if the file cannot be kept, no admin is left
                # behind with a password nobody knows.
                fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to an existing file
                with os.fdopen(fd, "w") as fh:
                    fh.write(password + "\n")
        if from_env:
            say(f"Admin login: {ADMIN_USERNAME} (password from ${PASSWORD_ENV})")
            return {"username": ADMIN_USERNAME, "created": True, "password_file": None}
        kept_in = (
            f"also kept in {_display(password_file)}"
            if password_file is not None
            else "kept nowhere (`manage.py changepassword admin` on any host sets another)"
        )
        lines = [
            f"memoryui is ready at {url}",
            f"username: {ADMIN_USERNAME}",
            f"password: {password}",
            f"Shown once; {kept_in}",
        ]
        width = max(len(line) for line in lines)
        border = "+" + "-" * (width + 2) + "+"
        say("\n".join([border, *(f"| {line.ljust(width)} |" for line in lines), border]))
        return {
            "username": ADMIN_USERNAME,
            "created": True,
            "password_file": str(password_file) if password_file is not None else None,
        }


@contextmanager
def _one_host_at_a_time():
    """On PostgreSQL, hold a session advisory lock: bootstraps started at once on several hosts run
    one after the other (the first migrates and creates the admin, the next find it done)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [ADVISORY_LOCK_KEY])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_LOCK_KEY])
