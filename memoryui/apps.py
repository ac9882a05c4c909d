from __future__ import annotations

from django.apps import AppConfig


class MemoryuiConfig(AppConfig):
    name = "memoryui"
    verbose_name = "memory store"
    default_auto_field = "django.db.models.BigAutoField"
