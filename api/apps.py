from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API under /api/: views, serializers, schema, token auth, parsers, throttling."""

    name = "api"
    verbose_name = "REST API"
