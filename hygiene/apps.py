from __future__ import annotations

from django.apps import AppConfig


class HygieneConfig(AppConfig):
    """Keeping the store clean: dedup and merges, clean-up of polluted stores, undo, decay."""

    name = "hygiene"
    verbose_name = "store hygiene"
