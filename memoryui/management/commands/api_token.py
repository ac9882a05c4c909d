"""Issue, list and revoke API tokens.

    python manage.py api_token create NAME --user USERNAME [--scope S ...] [--access read|write] [--json]
    python manage.py api_token list [--user USERNAME] [--json]
    python manage.py api_token revoke ID_OR_PREFIX [--json]

`create` prints the raw key once, alone on standard output (so `KEY=$(manage.py api_token create …)`
holds the key and nothing else); which token it is and the advice to store the key go to standard
error. Only the key's hash is stored. The command line is the operator's: it mints any token,
whatever the user's role (the dashboard and the API keep to `memoryui.roles`); a token still never
does more than its user's role allows when it is used.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memoryui import rules
from memoryui.management.base import ReportingCommand
from memoryui.models import TOKEN_PREFIX, ApiToken, hash_token


def _plain(text: str) -> str:
    return text


def token_dict(token: ApiToken) -> dict:
    return {
        "id": token.pk,
        "name": token.name,
        "user": token.user.get_username(),
        "key_prefix": token.key_prefix,
        "scopes": token.scopes,
        "access": token.access,
        "created_at": token.created_at.isoformat(),
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


class Command(ReportingCommand):
    help = "Issue, list and revoke API tokens (Authorization: Bearer mui_…)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
        create = actions.add_parser("create", help="Issue a token and print its raw key once.")
        create.add_argument("name")
        create.add_argument("--user", required=True, help="The user the token acts as.")
        create.add_argument(
            "--scope", action="append", default=[], dest="scopes", help="Limit to this scope (repeatable)."
        )
        create.add_argument(
            "--access",
            choices=ApiToken.Access.values,
            default=ApiToken.Access.WRITE,
            help="read: reads and recalls only; write (default): may also change memories, within the user's role.",
        )
        listing = actions.add_parser("list", help="List tokens (never their keys).")
        listing.add_argument("--user", help="Only this user's tokens.")
        revoke = actions.add_parser("revoke", help="Revoke a token by id or key prefix.")
        revoke.add_argument("token", metavar="ID_OR_PREFIX")
        for sub in (create, listing, revoke):
            sub.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args, **options):
        result = getattr(self, f"_{options['action']}")(options)
        if options["json"]:
            self.report(result)

    def _create(self, options) -> dict:
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"No user named {options['user']!r}.")
        try:
            token, raw = ApiToken.issue(
                user=user, name=options["name"], scopes=options["scopes"], access=options["access"]
            )
        except rules.MemoryValidationError as exc:
            raise CommandError(str(exc)) from None
        if not options["json"]:
            # The key alone on standard output, so a script captures it and nothing else; the words
            # for the person at the terminal on standard error (the advice is a warning, not an error).
            scopes = ", ".join(token.scopes) or "every scope"
            described = f"Token {token.pk} {token.name!r} for {user.get_username()} ({scopes}, {token.access}):"
            self.stderr.write(described, style_func=_plain)
            self.stdout.write(raw)
            self.stderr.write("Store the key now: it is not shown again.", style_func=self.style.WARNING)
        return {**token_dict(token), "key": raw}

    def _list(self, options) -> dict:
        tokens = ApiToken.objects.select_related("user").order_by("pk")
        if options.get("user"):
            tokens = tokens.filter(user__username=options["user"])
        rows = [token_dict(token) for token in tokens]
        if not options["json"]:
            if not rows:
                self.stdout.write("No tokens.")
            for row in rows:
                state = f"revoked {row['revoked_at'][:19]}" if row["revoked_at"] else "active"
                scopes = ",".join(row["scopes"]) or "*"
                self.stdout.write(
                    f"{row['id']:>4}  {row['key_prefix']}…  {row['name']:<20} {row['user']:<12} {scopes:<24} "
                    f"{row['access']:<5}  {state}"
                )
        return {"tokens": rows}

    def _revoke(self, options) -> dict:
        token = self._find(options["token"])
        revoked = token.revoke()
        if not options["json"]:
            verb = "Revoked" if revoked else "Already revoked:"
            self.stdout.write(f"{verb} token {token.pk} {token.name!r} ({token.key_prefix}…).")
        return {**token_dict(token), "revoked": revoked}

    @staticmethod
    def _find(ref: str) -> ApiToken:
        tokens = ApiToken.objects.select_related("user")
        if ref.isdigit():
            token = tokens.filter(pk=int(ref)).first()
            if token is None:
                raise CommandError(f"No token with id {ref}.")
            return token
        if ref.startswith(TOKEN_PREFIX) and len(ref) > len(TOKEN_PREFIX) + 8:  # the whole raw key
            token = tokens.filter(key_hash=hash_token(ref)).first()
            if token is None:
                raise CommandError("No token with this key.")
            return token
        matches = list(tokens.filter(key_prefix__startswith=ref.rstrip("…"))[:2]) if ref else []
        if not matches:
            raise CommandError(f"No token with id or key prefix {ref!r}.")
        if len(matches) > 1:
            raise CommandError(f"Key prefix {ref!r} matches more than one token; give more of it or the id.")
        return matches[0]
