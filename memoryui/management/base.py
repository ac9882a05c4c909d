"""A management command whose `--json` prints exactly one JSON document, failures included."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from memoryui import rules


class ReportingCommand(BaseCommand):
    """Print the result with `report()`; raise CommandError to fail.

    With --json, a failure that has not reported anything yet prints `{"error": message}`,
    so a script always gets one document; the exit status still says it failed.
    """

    def scope_option(self, raw: str) -> str:
        """The normalized --scope, or a CommandError saying why it is not a scope."""
        try:
            return rules.normalize_scope(raw)
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None

    def report(self, document: dict) -> None:
        self.stdout.write(json.dumps(document, ensure_ascii=False))
        self._reported = True

    def execute(self, *args, **options):
        self._reported = False
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if options.get("json") and not self._reported:
                self.report({"error": str(exc)})
            raise
