"""Load demo data: a clean multi-scope store, or with --polluted the polluted legacy store
(docs/architecture.md "Raw transcript stored as memory")."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from web import demo


class Command(BaseCommand):
    help = (
        "Load demo memories (stable ids: running it again creates nothing). Without flags: a clean store "
        "in agent:assistant, agent:ops-bot, user:42 and global. With --polluted: the 85-note polluted "
        "legacy store in agent:main and agent:test-w, duplicates and leaked prompts included."
    )

    def add_arguments(self, parser):
        parser.add_argument("--polluted", action="store_true", help="load the polluted legacy store instead")
        parser.add_argument("--json", action="store_true", help="print one JSON report on stdout")

    def handle(self, *args, **options):
        if options["polluted"]:
            created, what = demo.seed_polluted(), "polluted legacy notes (agent:main, agent:test-w)"
        else:
            created, what = demo.seed_clean(), "clean demo memories"
        if options["json"]:
            self.stdout.write(json.dumps({"created": created}))
        else:
            self.stdout.write(f"Created {created} {what}." + ("" if created else " (already loaded)"))
