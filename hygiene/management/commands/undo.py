"""Undo a batch of changes (an import, a bulk action, a dedup merge, a clean-up step, a decay run).

python manage.py undo 8c1e…            # every memory of the batch back as it was
python manage.py undo 8c1e… --force    # even if some changed again since
"""

from __future__ import annotations

from django.core.management.base import CommandError

from hygiene import undo
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = "Put every memory a batch changed back exactly as it was before the batch."

    def add_arguments(self, parser):
        parser.add_argument("batch", help="the batch id (shown by the command or page that made the change)")
        parser.add_argument("--force", action="store_true", help="undo even memories changed after the batch")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        try:
            report = undo.undo_batch(options["batch"], actor="cli:undo", force=options["force"])
        except undo.UndoError as exc:
            raise CommandError(str(exc)) from None
        document = report.to_dict()
        if options["json"]:
            self.report(document)
            return
        self.stdout.write(
            f"Undid batch {document['batch']}: {document['restored']} restored, {document['reverted']} reverted, "
            f"{document['tombstoned']} tombstoned (undo of the undo: manage.py undo {document['undo_batch']})."
        )
