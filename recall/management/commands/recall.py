"""Run the full recall pipeline from the command line, as an agent's `/api/recall/` call would.

python manage.py recall "how do I call article-list-query" --scope main --tools mcp__ata__article-list-query
python manage.py recall "lucky number" --scope agent:main --profile strict --json
python manage.py recall "lucky number" --scope agent:main --why 37ddb874
"""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import transaction

from memoryui import memory_ids
from memoryui.management.base import ReportingCommand
from memoryui.text import shorten
from recall.models import RecallLogEntry, RecallProfile, RecallTrace
from recall.pipeline import recall, record_recall, why_not
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
            "--why",
            default=None,
            metavar="ID",
            help=f"why a memory was not recalled: its id, or its first {memory_ids.SHORT_ID_MIN} characters",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="do not count this as a recall (access counts stay as they are)"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"])
        why = None
        if options["why"] is not None:
            try:  # any scope, tombstoned too: being one is the answer
                why = memory_ids.resolve(options["why"])
            except memory_ids.MemoryIdError as exc:
                raise CommandError(f"--why: {exc}") from None
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
        trace = (
            RecallTrace.record(result, source="cli", actor="cli:recall", profile=profile) if options["trace"] else None
        )
        if not options["dry_run"]:
            with transaction.atomic():
                record_recall(result, actor="cli:recall")
                RecallLogEntry.objects.record_result(result, source="cli", trace=trace)
        stages = why_not(result, why) if why else None
        if options["json"]:
            answer = {**result.to_dict(), "trace_id": str(trace.pk) if trace else None}
            if stages is not None:
                answer["why"] = [{"stage": stage, "text": text} for stage, text in stages]
            self.report(answer)
            return
        self.stdout.write(self._describe(result, trace))
        if stages is not None:
            self.stdout.write(f"\nwhy not recalled {why}:")
            self.stdout.write("\n".join(f"  {stage}: {text}" for stage, text in stages))

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
