"""Run the write path over a transcript: what it adds, merges and skips, and why.

python manage.py extract --transcript 3f2c… --json
python manage.py extract conversation.json --dry-run       # store the transcript, show the decisions, write no memory
python manage.py extract --transcript 3f2c… --background   # as a task the worker runs (see /tasks/)

One extraction of a transcript at a time: with one queued or running, --background prints that
task, and a foreground run refuses (it would extract the same messages beside it).
"""

from __future__ import annotations

from django.core.management.base import CommandError

from ingest import extraction, sessionlogs
from ingest.management.transcript_files import read_session, store_transcript, stored_transcript
from ingest.tasks import enqueue_extraction
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = "Extract memories from a stored transcript (--transcript ID) or a transcript file (stored first)."
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument(
            "path", nargs="?", help="a transcript JSON file or an agent's session log (or -): stored, then extracted"
        )
        parser.add_argument(
            "--format",
            choices=[*sessionlogs.FORMATS, *sessionlogs.ALIASES],
            help="with a file: its format (default: detected)",
        )
        parser.add_argument(
            "--scope",
            help="with a file: its scope (needed for a session log); with --transcript: the scope, when the id "
            "it was posted with is used in several",
        )
        parser.add_argument(
            "--transcript", help="a stored transcript: memoryui's id for it, or the id it was posted with"
        )
        parser.add_argument("--dry-run", action="store_true", help="show the decisions; write no memory")
        parser.add_argument(
            "--l1",
            choices=extraction.L1_MODES,
            default="auto",
            help="the LLM extractor: auto (turns L0 found nothing in), always, off (default: auto)",
        )
        parser.add_argument("--background", action="store_true", help="enqueue it as a task instead")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        if bool(options["path"]) == bool(options["transcript"]):
            raise CommandError("give either a transcript file or --transcript ID")
        if options["transcript"] and options["format"]:
            raise CommandError("--format is for a file; a stored transcript has one")
        scope = self.scope_option(options["scope"]) if options["scope"] else None
        if options["transcript"]:
            try:
                transcript = stored_transcript(options["transcript"], scope)
            except CommandError as exc:
                raise CommandError(f"--transcript: {exc}") from None
        else:
            _, data = read_session(options["path"], options.get("stdin"), format=options["format"], scope=scope)
            transcript = store_transcript(data).transcript
        if options["dry_run"]:
            if options["background"]:
                raise CommandError("--dry-run runs in the foreground: it only shows decisions")
            report = extraction.extract(transcript, dry_run=True, actor="cli:extract", l1=options["l1"]).to_dict()
        elif options["background"]:
            run = enqueue_extraction(transcript, actor="cli:extract", l1=options["l1"])
            queued = {"task_id": str(run.pk), "status": run.status, "transcript_id": str(transcript.pk)}
            self._print({**queued, "already": run.reused}, options)
            return
        else:
            run = enqueue_extraction(transcript, actor="cli:extract", l1=options["l1"], foreground=True)
            if run.reused:
                raise CommandError(
                    f"transcript {transcript.pk} is being extracted already: task {run.pk} ({run.status}); "
                    "wait for it to finish"
                )
            report = {**run.result, "task_id": str(run.pk)}
        self._print(report, options)

    def _print(self, report: dict, options) -> None:
        if options["json"]:
            self.report(report)
            return
        if "added" not in report:
            task, transcript = report["task_id"], report["transcript_id"]
            if report["already"]:
                self.stdout.write(f"Extraction task {task} of transcript {transcript} is {report['status']} already.")
            else:
                self.stdout.write(f"Queued extraction task {task} for transcript {transcript}.")
            return
        dry = bool(report.get("dry_run"))
        self.stdout.write(f"transcript {report['transcript_id']}{' (dry run: nothing written)' if dry else ''}:")
        for note in report.get("notes", []):
            self.stdout.write(f"  note: {note}")
        for item in report["added"]:
            self.stdout.write(f"  + {'would add' if dry else 'added'} {item['kind']}/{item['tier']}: {item['text']}")
        for item in report["merged"]:
            self.stdout.write(
                f"  = {'would merge' if dry else 'merged'} into {item['into']} ({item['layer']}): {item['text']}"
            )
        for item in report["skipped"]:
            self.stdout.write(f"  - skipped message {item['message']} ({item['reason']}): {item['text']}")
        counts = report["counts"]
        self.stdout.write(f"{counts['added']} added, {counts['merged']} merged, {counts['skipped']} skipped.")
