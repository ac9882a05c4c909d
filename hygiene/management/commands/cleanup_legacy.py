"""Clean up a polluted legacy store: back it up, drop internal prompts and chit-chat, turn the
raw notes' stated facts into typed memories, demote what is left.

python manage.py cleanup_legacy --scope agent:main --dry-run     # what each step would do
python manage.py cleanup_legacy --scope agent:main --json        # apply every step
python manage.py cleanup_legacy --scope agent:main --step internal
python manage.py undo BATCH                                      # take a step back
"""

from __future__ import annotations

from django.core.management.base import CommandError

from hygiene import cleanup
from hygiene.tasks import enqueue_cleanup_step
from ingest import extraction
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = "Clean up a polluted legacy store in four undoable steps: snapshot, internal, extract, demote."

    def add_arguments(self, parser):
        parser.add_argument("--scope", required=True, help="the scope to clean, e.g. agent:main")
        parser.add_argument("--dry-run", action="store_true", help="show what each step would do; change nothing")
        parser.add_argument("--step", choices=cleanup.STEPS, help="run only this step (default: all, in order)")
        parser.add_argument(
            "--l1", choices=extraction.L1_MODES, default="auto", help="the LLM extractor in the extract step"
        )
        parser.add_argument("--background", action="store_true", help="enqueue the step(s) as tasks instead")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"])
        steps = [options["step"]] if options["step"] else list(cleanup.STEPS)
        actor = "cli:cleanup_legacy"
        if options["background"]:
            if options["dry_run"]:
                raise CommandError("--dry-run runs in the foreground: it only shows what would change")
            if len(steps) > 1:
                raise CommandError("--background runs one step at a time: give --step")
            run = enqueue_cleanup_step(scope, steps[0], actor=actor, l1=options["l1"])
            self._print({"task_id": str(run.pk), "status": run.status, "scope": scope}, options)
            return
        if options["dry_run"]:
            if len(steps) > 1:
                reports = [r.to_dict() for r in cleanup.run_all(scope, dry_run=True, actor=actor, l1=options["l1"])]
            else:
                reports = [cleanup.run_step(scope, steps[0], dry_run=True, actor=actor, l1=options["l1"]).to_dict()]
        else:
            reports = []
            for step in steps:
                run = enqueue_cleanup_step(scope, step, actor=actor, l1=options["l1"], foreground=True)
                reports.append({**run.result, "task_id": str(run.pk)})
        document = {
            "scope": scope,
            "dry_run": options["dry_run"],
            "steps": reports,
            "counts": {report["step"]: report["counts"] for report in reports},
            "batches": [report["batch"] for report in reports if report.get("batch")],
        }
        self._print(document, options)

    def _print(self, document: dict, options) -> None:
        if options["json"]:
            self.report(document)
            return
        if "steps" not in document:
            self.stdout.write(f"Queued clean-up task {document['task_id']} for {document['scope']}.")
            return
        dry = document["dry_run"]
        for report in document["steps"]:
            title = cleanup.STEP_TITLES[report["step"]]
            counts = ", ".join(f"{n} {name}" for name, n in report["counts"].items()) or "nothing to do"
            self.stdout.write(f"{report['step']}: {title}{' (dry run)' if dry else ''}: {counts}")
            if report.get("backup"):
                self.stdout.write(f"    backup: {report['backup']}")
            for action in report["actions"][: cleanup.EXAMPLES]:
                self.stdout.write(f"    {action['action']}: {action['text'][:80]} ({action['reason']})")
            if len(report["actions"]) > cleanup.EXAMPLES:
                self.stdout.write(f"    … and {len(report['actions']) - cleanup.EXAMPLES} more")
            if report.get("batch"):
                self.stdout.write(f"    undo: python manage.py undo {report['batch']}")
