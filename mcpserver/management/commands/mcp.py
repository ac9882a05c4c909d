"""Serve MCP over stdio, for an agent's MCP client configuration."""

from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from mcpserver import stdio, tools
from mcpserver.server import caller
from memoryui import rules
from memoryui.models import ApiToken


class Command(BaseCommand):
    help = (
        "Serve memoryui's MCP tools (search_memory, recall, remember, get_memory, pin, tombstone, list_memories) "
        "and resources over stdio, in one scope. Without a token the server acts as its local user and records "
        "its changes as mcp:stdio; with --token (or MEMORYUI_TOKEN) the token's scopes, access and owner's role "
        "apply, as on the API, checked at every call."
    )

    requires_system_checks = []  # an agent starts this at every session: start fast

    def add_arguments(self, parser):
        parser.add_argument("--scope", help="the agent's scope, e.g. agent:main (default: the token's only scope)")
        parser.add_argument("--token", help="an API token (mui_…) to act as; default: MEMORYUI_TOKEN if set")

    def handle(self, *args, **options):
        raw = options["token"] or os.environ.get("MEMORYUI_TOKEN", "")
        token = None
        if raw:
            token = ApiToken.authenticate(raw.strip())
            if token is None:
                raise CommandError("The token is invalid or revoked.")
        scope = options["scope"]
        if not scope and token is None:
            raise CommandError("--scope is required (e.g. --scope agent:main).")
        try:
            if token is None:
                scope = rules.normalize_scope(scope)
            who = tools.Caller(scope=tools.connection_scope(scope, token), token=token)
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None
        except Exception as exc:
            answered = tools.error_of(exc)
            raise CommandError(answered[1]["error"]["message"] if answered else str(exc)) from None
        caller.set(who)
        # stdout carries the protocol: nothing else may be written to it.
        anyio.run(stdio.serve)
