"""The Celery app. Without CELERY_BROKER_URL the broker is a SQLite file in the data dir."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

from billiard import common as billiard_common
from celery import Celery
from celery.signals import celeryd_init, task_prerun, worker_process_init
from sqlalchemy.exc import IntegrityError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("memoryui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


@worker_process_init.connect
def _die_with_the_worker(**kwargs) -> None:
    # A pool process outlives a worker killed with SIGKILL (or the OOM killer): re-parented to
    # init, it goes on with its task, holds the supervisor's pipe open so nobody notices the worker
    # is gone, and its run can never be taken over. Asked to be killed with its parent, it is not
    # left behind. (Linux; elsewhere nothing is done.)
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the worker died before the request was made
        os._exit(1)


@task_prerun.connect
def _exit_surely_when_terminated(**kwargs) -> None:
    # A pool process told to stop (`make run`'s TERM reaches the whole group) leaves through
    # billiard's handler, which raises SystemExit wherever the process is. Raised inside a
    # finalizer (a weakref callback the garbage collector runs), Python reports it as unraisable
    # and carries on, and the process lives until it is killed. In a pool process, such a
    # swallowed stop exits there and then. (Only a process whose terminate handler fired exits:
    # elsewhere, tasks run inline for one, the hook is Python's own.)
    sys.unraisablehook = _exit_when_the_stop_is_swallowed


def _exit_when_the_stop_is_swallowed(unraisable) -> None:
    stop = unraisable.exc_value
    if isinstance(stop, SystemExit) and billiard_common.terminate_handler_fired():
        os._exit(stop.code & 0xFF if isinstance(stop.code, int) else 1)
    sys.__unraisablehook__(unraisable)


def queue_row_made_by_anyone(get_or_create):
    """The embedded broker's look-up of a queue's row, made safe against another process.

    kombu looks for the row, then inserts it when missing, under a lock that only holds within one
    process. A command and a worker that both send to a new queue at once (an import sent while
    the worker starts) race: the loser's insert fails on the name's unique index, kombu lets that
    IntegrityError through with its session still in the failed transaction, and the send fails
    ("not queued"). Here the loser rolls back and takes the row the winner made."""

    def get_or_create_once_more_on_a_race(self, queue):
        try:
            return get_or_create(self, queue)
        except IntegrityError:
            self.session.rollback()
            return get_or_create(self, queue)

    get_or_create_once_more_on_a_race.__wrapped_get_or_create__ = get_or_create
    return get_or_create_once_more_on_a_race


if app.conf.broker_url.startswith("sqla+"):
    # The embedded broker polls its table; the default (1 s) would add a second to every
    # task. It must be set on the transport class: broker_transport_options go to SQLAlchemy.
    from kombu.transport import sqlalchemy as sqla_transport

    sqla_transport.Transport.polling_interval = 0.1
    sqla_transport.Channel._get_or_create = queue_row_made_by_anyone(sqla_transport.Channel._get_or_create)

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
