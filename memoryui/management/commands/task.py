"""Background task runs from the command line: list them, retry one, cancel one, sweep stalled ones.

python manage.py task list --status stalled     # runs not finished, or of one status
python manage.py task retry 3f2c…               # a failed, stalled or cancelled run, sent again
python manage.py task cancel 3f2c…              # a queued, running or stalled run, stopped
python manage.py task sweep                     # send again what dead or stuck workers left now
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from memoryui import runs
from memoryui.management.base import ReportingCommand
from memoryui.models import TaskRun

LISTED = 50


def run_dict(run: TaskRun) -> dict:
    return {
        "id": str(run.pk),
        "kind": run.kind,
        "status": run.status,
        "progress": [run.progress_done, run.progress_total],
        "attempts": run.attempts,
        "worker": run.worker,
        "error": run.error,
        "created_at": run.created_at.isoformat(),
        "progressed_at": run.progressed_at.isoformat() if run.progressed_at else None,
    }


class Command(ReportingCommand):
    help = "List background task runs, retry or cancel one, or sweep the stalled ones now."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="{list,retry,cancel,sweep}")
        listing = actions.add_parser("list", help="runs not finished (or --status), newest first")
        listing.add_argument("--status", choices=TaskRun.Status.values, help="runs of this status only")
        for name, what in (
            ("retry", "a failed, stalled or cancelled run"),
            ("cancel", "a queued, running or stalled run"),
        ):
            action = actions.add_parser(name, help=what)
            action.add_argument("run", help="the task run's id (the task page's address, or `task list`)")
        actions.add_parser("sweep", help="mark stalled and send again what dead or stuck workers left")
        for action in actions.choices.values():
            action.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        action = options["action"]
        if action == "list":
            wanted = TaskRun.objects.filter(status=options["status"]) if options["status"] else None
            listed = wanted if wanted is not None else TaskRun.objects.filter(status__in=TaskRun.ACTIVE)
            self._print([run_dict(run) for run in listed[:LISTED]], options)
            return
        if action == "sweep":
            counts = runs.sweep()
            if options["json"]:
                self.report(counts)
            else:
                self.stdout.write(
                    f"{counts['stalled']} stalled and sent again, {counts['failed']} failed after their last "
                    f"attempt, {counts['resent']} waiting runs sent again."
                )
            return
        run = self._run(options["run"])
        try:
            done = runs.retry(run, actor="cli:task") if action == "retry" else runs.cancel(run, actor="cli:task")
        except runs.RunStateError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.report(run_dict(done))
        else:
            self.stdout.write(f"Task run {done.pk} ({done.kind}) is {done.status}: {done.error}")

    def _run(self, run_id: str) -> TaskRun:
        try:
            run = TaskRun.objects.filter(pk=run_id).first()
        except ValidationError:
            run = None
        if run is None:
            raise CommandError(f"no task run {run_id!r} (`manage.py task list` shows them)")
        return run

    def _print(self, listed: list[dict], options) -> None:
        if options["json"]:
            self.report({"runs": listed})
            return
        if not listed:
            self.stdout.write("No task runs.")
        for run in listed:
            done, total = run["progress"]
            self.stdout.write(
                f"{run['id']}  {run['kind']:<10} {run['status']:<9} {done}/{total}  attempts {run['attempts']}"
                + (f"  {run['error']}" if run["error"] else "")
            )
