"""Find and merge duplicate clusters in a scope (dedup layers 1-3 over what the store holds).

python manage.py dedup --scope agent:main --dry-run             # the clusters, nothing changed
python manage.py dedup --scope agent:main --threshold 0.97 --json
python manage.py dedup --scope agent:main --background          # as a task (see /tasks/)
"""

from __future__ import annotations

from django.core.management.base import CommandError

from hygiene import dedup
from hygiene.tasks import enqueue_dedup
from memoryui.management.base import ReportingCommand


class Command(ReportingCommand):
    help = "Merge duplicate memories of a scope: same text, same entity key, or similar meaning."

    def add_arguments(self, parser):
        parser.add_argument("--scope", required=True, help="the scope to deduplicate, e.g. agent:main")
        parser.add_argument("--dry-run", action="store_true", help="list the clusters; change nothing")
        parser.add_argument(
            "--threshold",
            type=float,
            help=f"cosine similarity for the semantic layer (default: {dedup.default_threshold()})",
        )
        parser.add_argument("--background", action="store_true", help="enqueue the merge as a task instead")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        scope = self.scope_option(options["scope"])
        threshold = options["threshold"] if options["threshold"] is not None else dedup.default_threshold()
        if not 0.0 < threshold <= 1.0:
            raise CommandError("--threshold: must be above 0 and at most 1")
        if options["background"]:
            if options["dry_run"]:
                raise CommandError("--dry-run runs in the foreground: it only lists clusters")
            run = enqueue_dedup(scope, actor="cli:dedup", threshold=threshold)
            self._print({"task_id": str(run.pk), "status": run.status, "scope": scope}, options)
            return
        report = dedup.find_clusters(scope, threshold=threshold)
        document = {
            "scope": scope,
            "dry_run": options["dry_run"],
            "threshold": threshold,
            "memories": report.memories,
            "clusters": len(report.clusters),
            "by_layer": report.by_layer(),
            "semantic_skipped": report.semantic_skipped,
            "cluster_list": [cluster.to_dict() for cluster in report.clusters],
            "kept_apart": [pair.to_dict() for pair in report.kept_apart],
        }
        if options["dry_run"]:
            document.update(merged=0, would_merge=report.duplicates, batch=None)
        else:
            run = enqueue_dedup(scope, actor="cli:dedup", threshold=threshold, foreground=True)
            document.update(merged=run.result["merged"], batch=run.result["batch"], task_id=str(run.pk))
        self._print(document, options)

    def _print(self, document: dict, options) -> None:
        if options["json"]:
            self.report(document)
            return
        if "task_id" in document and "clusters" not in document:
            self.stdout.write(f"Queued dedup task {document['task_id']} for {document['scope']}.")
            return
        dry = document["dry_run"]
        for cluster in document["cluster_list"]:
            canonical, *others = cluster["members"]
            self.stdout.write(f"[{cluster['layer']}] keep {canonical['id']}: {canonical['text'][:100]}")
            for member in others:
                similarity = f" ({member['similarity']:.3f})" if member.get("similarity") is not None else ""
                verb = "would merge" if dry else "merged"
                self.stdout.write(f"    {verb} {member['id']}{similarity}: {member['text'][:100]}")
        if document["semantic_skipped"]:
            self.stdout.write(f"note: {document['semantic_skipped']}")
        merged = document["would_merge"] if dry else document["merged"]
        self.stdout.write(
            f"{document['clusters']} clusters in {document['memories']} memories; "
            f"{merged} duplicates {'would be ' if dry else ''}merged"
            + (f" (undo: manage.py undo {document['batch']})" if document.get("batch") else "")
            + "."
        )
