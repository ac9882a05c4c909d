from __future__ import annotations

from django.apps import AppConfig


class RecallConfig(AppConfig):
    """The read path: retrieval, recall, traces and profiles (built on the memory store)."""

    name = "recall"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The vector search of a scope is measured with the queries it was asked (recall/probes.py).
        from recall import probes

        probes.connect()
