from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryuiConfig(AppConfig):
    """The store: models, rules, roles and the bookkeeping of background runs."""

    name = "memoryui"
    verbose_name = "memory store"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The role groups get the permissions of every app migrated, including later ones.
        # Imported here, not at the top: models can be imported only once apps are ready.
        from memoryui import roles

        post_migrate.connect(roles.sync_groups_after_migrate, dispatch_uid="memoryui.roles.sync_groups")
