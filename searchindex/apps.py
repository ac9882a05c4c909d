from __future__ import annotations

from django.apps import AppConfig


class SearchIndexConfig(AppConfig):
    """Derived search indexes and retrieval over the memory store; no models of its own."""

    name = "searchindex"
    verbose_name = "search indexes"

    def ready(self) -> None:
        # The store announces committed changes; the indexes listen, so the store never imports
        # them. Imported here, not at the top: models can be imported only once apps are ready.
        from memoryui.models import index_entries_due, outbox_committed
        from searchindex.outbox import write_in_step
        from searchindex.tasks import enqueue_sync

        outbox_committed.connect(enqueue_sync, dispatch_uid="searchindex.enqueue_sync")
        index_entries_due.connect(write_in_step, dispatch_uid="searchindex.write_in_step")
