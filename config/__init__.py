"""The Django project: settings, root URLs, the Celery app, the WSGI entry point and the process
supervisor of `make run`. It sits on top of every app (docs/architecture.md "Floors")."""

# Loaded with the settings (DJANGO_SETTINGS_MODULE=config.settings), so every process, web or
# worker, has the Celery app its tasks bind to.
from config.celery import app as celery_app

__all__ = ["celery_app"]
