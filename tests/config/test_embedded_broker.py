"""The embedded broker (kombu's SQLAlchemy transport on a SQLite file) when two processes create
the same queue at once."""

from __future__ import annotations

import sqlite3

import pytest
from kombu import Connection
from kombu.transport import sqlalchemy as sqla_transport
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError


@pytest.fixture
def channel(tmp_path):
    with Connection(f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}") as connection:
        channel = connection.channel()
        yield channel
        channel.close()


@pytest.fixture
def another_process_inserts_first(channel, tmp_path):
    """Between the channel's look for the queue's row and its own insert, another connection (as a
    worker in another process would) inserts the same row and commits."""
    queue_cls = channel.queue_cls
    path = str(tmp_path / "broker.sqlite3")

    def insert_from_elsewhere(mapper, connection, target):
        other = sqlite3.connect(path)
        other.execute(f"INSERT INTO {queue_cls.__tablename__} (name) VALUES (?)", (target.name,))
        other.commit()
        other.close()

    event.listen(queue_cls, "before_insert", insert_from_elsewhere)
    yield
    event.remove(queue_cls, "before_insert", insert_from_elsewhere)


def test_kombu_alone_fails_the_send_when_another_process_made_the_queue(channel, another_process_inserts_first):
    # What config.celery's patch (installed for the embedded broker, the tests' default) is for:
    # if kombu ever handles the race itself, this test says the patch can go.
    unpatched = getattr(sqla_transport.Channel._get_or_create, "__wrapped_get_or_create__", None)
    assert unpatched is not None
    with pytest.raises(IntegrityError):
        unpatched(channel, "memoryui.bulk")


def test_the_loser_of_the_race_takes_the_row_the_winner_made_and_the_message_is_stored(
    channel, another_process_inserts_first
):
    channel._put("memoryui.bulk", {"body": "the import's task"})

    assert channel._size("memoryui.bulk") == 1
    rows = channel.session.query(channel.queue_cls).filter(channel.queue_cls.name == "memoryui.bulk").all()
    assert len(rows) == 1
