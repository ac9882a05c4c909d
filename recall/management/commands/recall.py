"""Run the full recall pipeline from the command line, as an agent's `/api/recall/` call would.

python manage.py recall "how do I call article-list-query" --scope main --tools mcp__ata__article-list-query
python manage.py recall "lucky number" --scope agent:main --profile strict --json
"""

from __future__ import annotations

from django.core.management.base import CommandError

from memoryui.management.base import ReportingCommand
from memoryui.text import shorten
from recall.models import RecallProfile, RecallTrace
from recall.pipeline import recall, record_recall
from searchindex.documents import IndexUnavailable
from searchindex.search import SearchError


class Command(ReportingCommand):
    help = "Recall memories for a query in a scope: retrieval, selector or heuristic, active-tool filter, block."

    def add_arguments(self, parser):
        parser.add_argument("query", help="what the turn is about; select:<id>,<id> picks, +word requires a word")
        parser.add_argument("--scope", required=True, help="the agent's scope; `main` means agent:main")
        parser.add_argument("--tools", default="", help="recently used tools, comma-separated, most recent last")
        parser.add_argument("--limit", type=int, default=None, help="memories recalled, 1..20 (default 5); clamped")
        parser.add_argument("--profile", default=None, help="a recall profile's name (default: default)")
        parser.add_argument("--trace", action="store_true", help="save this recall as a trace")
        parser.add_argument(
            "--dry-run", action="store_true", help="do not count this as a recall (access counts stay as they are)"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"])
        try:
            profile = RecallProfile.objects.resolve(options["profile"])
        except RecallProfile.DoesNotExist:
            known = ", ".join(RecallProfile.objects.values_list("name", flat=True)) or "default"
            raise CommandError(f"--profile: no profile named {options['profile']!r}; known: {known}") from None
        try:
            result = recall(
                options["query"],
                scope=scope,
                tools=options["tools"],
                limit=options["limit"],
                settings=profile.settings,
                profile=profile.name,
            )
        except SearchError as exc:
            raise CommandError(f"{'query' if exc.field == 'q' else exc.field}: {exc}") from None
        except IndexUnavailable as exc:
            raise CommandError(f"{exc}; run `manage.py reindex --verify` to check the indexes") from None
        if not options["dry_run"]:
            record_recall(result, actor="cli:recall")
        trace = (
            RecallTrace.record(result, source="cli", actor="cli:recall", profile=profile) if options["trace"] else None
        )
        if options["json"]:
            self.report({**result.to_dict(), "trace_id": str(trace.pk) if trace else None})
            return
        self.stdout.write(self._describe(result, trace))

    def _describe(self, result, trace) -> str:
        tools = f" with tools {', '.join(result.tools)}" if result.tools else ""
        lines = [f"recall in {result.scope}{tools}, profile {result.profile}: {result.query!r}"]
        answered = result.mode if not result.fallback_reason else f"{result.mode} ({result.fallback_reason})"
        lines.append(f"answered by: {answered}")
        lines += [f"note: {notice}" for notice in result.notices]
        lines.append("candidates:")
        if not result.candidates:
            lines.append("  (none: no memory in the scope matches at all)")
        for rc in result.candidates:
            lines.append(f"  {rc.final.decision:<12} {rc.id}  {shorten(rc.found.memory.text, 70)}")
            if rc.final.reasons:
                lines.append(f"  {'':<12} {'; '.join(rc.final.reasons)}")
        lines.append("")
        lines.append(result.block or "(nothing recalled)")
        if trace is not None:
            lines.append(f"\ntrace saved: {trace.pk}")
        return "\n".join(lines)
