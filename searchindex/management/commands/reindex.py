"""Verify, repair or rebuild the search indexes from the database.

python manage.py reindex --verify     # report missing, stale and orphaned entries per index
python manage.py reindex              # repair what verify finds and finish pending work
python manage.py reindex --full       # drop both indexes and index every active memory
"""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from memoryui.management.base import ReportingCommand
from searchindex import health
from searchindex.documents import IndexUnavailable
from searchindex.tasks import repair_indexes


class Command(ReportingCommand):
    help = "Verify (--verify), repair (default) or rebuild (--full) the vector and BM25 indexes."

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--verify", action="store_true", help="only report how the indexes differ")
        mode.add_argument("--full", action="store_true", help="drop both indexes and rebuild them")
        parser.add_argument("--background", action="store_true", help="enqueue the repair as a task")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        as_json = options["json"]
        try:
            result, failed = self._run(options)
        except IndexUnavailable as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.report(result)
        else:
            self.stdout.write(self._describe(result))
        if failed:
            raise CommandError("the indexes do not match the database; run `manage.py reindex` to repair")

    def _run(self, options) -> tuple[dict, bool]:
        if options["background"]:
            if options["verify"] or options["full"]:
                raise CommandError("--background runs a repair; use it without --verify or --full")
            result = repair_indexes.delay(actor="cli:reindex")
            return {"queued": True, "task_id": result.id}, False
        action = "verify" if options["verify"] else "rebuild" if options["full"] else "repair"
        check = health.run(action, actor="cli:reindex")
        return check.result, action == "verify" and not check.ok

    @staticmethod
    def _describe(result: dict) -> str:
        if "indexes" in result:
            lines = []
            for diff in result["indexes"]:
                if diff["error"]:
                    lines.append(f"{diff['index']}: unavailable ({diff['error']})")
                    continue
                state = "ok" if diff["ok"] else "differs"
                lines.append(
                    f"{diff['index']}: {state}: database {diff['database']}, index {diff['entries']}, "
                    f"missing {diff['missing']}, stale {diff['stale']}, orphaned {diff['orphaned']}"
                )
            return "\n".join(lines)
        return json.dumps(result, indent=2)
