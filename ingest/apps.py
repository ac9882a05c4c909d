from __future__ import annotations

from django.apps import AppConfig


class IngestConfig(AppConfig):
    """What comes into the store: transcripts and their projection, extraction, session logs, memory
    files, JSONL, and the write path every writer goes through."""

    name = "ingest"
    verbose_name = "ingestion and extraction"
