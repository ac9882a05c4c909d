from __future__ import annotations

from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_out


class WebConfig(AppConfig):
    """The dashboard's pages: views, forms, filters, template tags, the back office and demo data."""

    name = "web"
    verbose_name = "dashboard"

    def ready(self) -> None:
        # Imported here, not at the top: models can be imported only once apps are ready.
        from web import shortcuts

        user_logged_out.connect(shortcuts.say_signed_out, dispatch_uid="web.shortcuts.say_signed_out")
