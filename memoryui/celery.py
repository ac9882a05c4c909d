"""The Celery app. Without CELERY_BROKER_URL the broker is a SQLite file in the data dir."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")

app = Celery("memoryui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

if app.conf.broker_url.startswith("sqla+"):
    # The embedded broker polls its table; the default (1 s) would add a second to every
    # task. It must be set on the transport class: broker_transport_options go to SQLAlchemy.
    from kombu.transport import sqlalchemy as sqla_transport

    sqla_transport.Transport.polling_interval = 0.1

    @celeryd_init.connect
    def _drain_briefly(**kwargs) -> None:
        # A worker's loop drains the broker 2 s at a time and, told to stop, drains once more
        # before it closes the connection (which hands back the messages it held): up to 4 s on
        # a polled broker, and `make run` (honcho) kills what still runs 5 s after its first
        # process stopped. Drained 0.25 s at a time, a worker lets go within about a second.
        # Workers only: elsewhere a drain's timeout is how long to wait for replies.
        drain = sqla_transport.Transport.drain_events

        def drain_events(self, connection, timeout=None):
            return drain(self, connection, timeout=timeout if timeout is None else min(timeout, 0.25))

        sqla_transport.Transport.drain_events = drain_events
