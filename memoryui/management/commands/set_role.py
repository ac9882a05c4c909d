"""Give a user a role: viewer, editor or admin.

    python manage.py set_role USERNAME viewer|editor|admin [--json]

The user joins the role's group and leaves the other two. A superuser is always an admin, so
viewer or editor also takes the superuser status away. Tokens follow at once: a write token of
a user who is now a viewer only reads.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import transaction

from memoryui import roles
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = "Give a user a role (viewer, editor or admin): the role's group, and out of the other two."

    def add_arguments(self, parser):
        parser.add_argument("username")
        # Checked in handle, not by argparse `choices`, so --json still prints one document on a bad role.
        parser.add_argument("role", metavar="{" + ",".join(roles.ROLE_NAMES) + "}")
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args, **options):
        try:
            role = roles.Role.parse(options["role"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        with transaction.atomic():
            result = roles.set_role(user, role)
        if options["json"]:
            self.report(result)
            return
        previous = result["previous"] or "no role"
        self.stdout.write(f"{result['username']} is now {role.article} {role} (was {previous}).")
        if result["superuser_removed"]:
            self.stdout.write(f"{result['username']} is no longer a superuser (a superuser is always an admin).")
