"""Verify, repair or rebuild the search indexes from the database.

python manage.py reindex --verify     # report missing, stale and orphaned entries per index
python manage.py reindex              # repair what verify finds and finish pending work
python manage.py reindex --full       # drop both indexes and index every active memory
python manage.py reindex --tune       # measure each big scope's vector recall, set its ef_search
python manage.py reindex --tune --scope agent:main   # that scope only, whatever its size
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import CommandError

from memoryui.management.base import ReportingCommand
from searchindex import health
from searchindex.documents import IndexUnavailable
from searchindex.tasks import repair_indexes


class Command(ReportingCommand):
    help = (
        "Verify (--verify), repair (default) or rebuild (--full) the vector and BM25 indexes, or measure "
        "the vector recall of each big scope and give it the ef_search it needs (--tune)."
    )

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--verify", action="store_true", help="only report how the indexes differ")
        mode.add_argument("--full", action="store_true", help="drop both indexes and rebuild them")
        mode.add_argument(
            "--tune",
            action="store_true",
            help="measure each scope's vector recall@10 against exact search and set its ef_search",
        )
        parser.add_argument(
            "--scope", action="append", help="with --tune: measure this scope (repeatable); default: every big one"
        )
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
        if options["scope"] and not options["tune"]:
            raise CommandError("--scope goes with --tune")
        if options["tune"] and settings.MEMORYUI_VECTOR_RECALL_TARGET is None:
            raise CommandError("MEMORYUI_VECTOR_RECALL_TARGET is off: set a target recall to measure against")
        if options["background"]:
            if options["verify"] or options["full"] or options["tune"]:
                raise CommandError("--background runs a repair; use it without --verify, --full or --tune")
            result = repair_indexes.delay(actor="cli:reindex")
            return {"queued": True, "task_id": result.id}, False
        if options["tune"]:
            check = health.run("tune", actor="cli:reindex", scopes=options["scope"])
            return check.result, False
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
        if set(result) == {"tuned"}:
            return _describe_tuned(result["tuned"])
        return json.dumps(result, indent=2)


def _describe_tuned(tuned: dict) -> str:
    """One line a scope: the ef_search each width measured and the one it was given."""
    if not tuned:
        return "no scope is big enough to measure (the exact line: MEMORYUI_VECTOR_EXACT_BELOW)"
    lines = []
    for scope, measured in sorted(tuned.items()):
        steps = ", ".join(f"ef {step['ef_search']}: {step['recall']:.3f}" for step in measured["steps"])
        verdict = "reached"
        if not measured["reached"]:
            past = "" if measured.get("probes") == "queries" else "one step past "
            verdict = f"not reached; {past}where the recall stops growing"
        lines.append(
            f"{scope}: {measured['vectors']} vectors, {_probes(measured)}; recall@10 {steps}; "
            f"ef_search {measured['ef_search']} (target {measured['target']:g} {verdict}); {measured['seconds']:.1f} s"
        )
    return "\n".join(lines)


def _probes(measured: dict) -> str:
    """What a scope was measured with: the queries it was asked, or its own vectors."""
    if measured.get("probes") == "queries":
        return f"{measured['samples']} queries it was asked"
    return f"{measured['samples']} of its own vectors as queries"
