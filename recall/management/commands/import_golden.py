"""Import a labelled set (bench/data's formats) as memories and golden queries, one golden set a scope.

python manage.py import_golden bench/data/conversation_set.json --json
python manage.py calibrate --golden conversation_set/user:conv-c1 --golden conversation_set/user:conv-c2 --dry-run
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError

from memoryui import jsontext
from memoryui.management.base import ReportingCommand
from recall.golden import LabelledSetError, import_labelled


class Command(ReportingCommand):
    help = "Load a labelled set's memories into their scopes and its queries as golden sets (<name>/<scope>)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="a JSON labelled set: memories + queries, or conversations")
        parser.add_argument("--name", help="the golden sets' name prefix (default: the file's name)")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        path = Path(options["path"])
        try:
            data = jsontext.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"path: cannot read {path}: {exc.strerror or exc}") from None
        except jsontext.JSONTextError as exc:
            why = f" is not JSON: {exc}" if exc.code == jsontext.SYNTAX else f": {exc}"
            raise CommandError(f"path: {path}{why}") from None
        except ValueError as exc:  # not UTF-8
            raise CommandError(f"path: {path} is not JSON: {exc}") from None
        try:
            report = import_labelled(data, name=options["name"] or path.stem, actor="import_golden")
        except (LabelledSetError, KeyError) as exc:
            raise CommandError(
                f"{path}: {exc if isinstance(exc, LabelledSetError) else f'missing field {exc}'}"
            ) from None
        if options["json"]:
            self.report(report)
            return
        self.stdout.write(
            f"{report['created']} of {report['memories']} memories written, {report['queries']} golden queries in "
            + ", ".join(report["golden_sets"])
        )
