"""The Celery app. Without CELERY_BROKER_URL the broker is a SQLite file in the data dir."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")

app = Celery("memoryui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

if app.conf.broker_url.startswith("sqla+"):
    # The embedded broker polls its table; the default (1 s) would add a second to every
    # task. It must be set on the transport class: broker_transport_options go to SQLAlchemy.
    from kombu.transport import sqlalchemy as sqla_transport

    sqla_transport.Transport.polling_interval = 0.1
