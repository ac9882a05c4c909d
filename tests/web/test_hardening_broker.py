"""A broker that refuses: a dashboard action whose task it refuses says so, and nothing is
half-done; the writes that found it down are logged as one line per period, not a traceback each.

Celery is pointed at a broker on a local port nobody listens on, so every send is refused for real
(the API answers the same refusal 503, api.rest). Each button that queues a task (a
transcript's extraction, decay now, merge all, a clean-up step, a calibration, an index repair)
answers with a message saying the background worker's broker is unreachable and nothing was
changed (a plain form: on the page it goes back to; htmx: a 503 in the page's alerts); no run
is left queued for a worker that will never see it, and no memory changed.

The tests run with real transactions (`transaction=True`): a task is sent when the action's
transaction commits, inside the request, as in production.

erin is an editor, alice an admin; see tests/conftest.py.
"""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest
from kombu import pools

from config.celery import app
from ingest.ingestion import ingest
from memoryui import background
from memoryui.models import Memory, TaskRun, Transcript
from recall.calibration import MIN_ANSWERABLE, MIN_QUERIES
from recall.models import GoldenQuery, GoldenSet

pytestmark = pytest.mark.django_db(transaction=True)

UNREACHABLE = "was not queued, and nothing in the store was changed: the background worker&#x27;s broker is unreachable"
HTMX = {"HX-Request": "true"}
TRANSCRIPT = {
    "id": "session-1",
    "scope": "agent:main",
    "messages": [
        {"role": "user", "content": "My phone number is 18600000000."},
        {"role": "assistant", "content": "OK."},
    ],
}


@pytest.fixture
def refusing_broker():
    """Celery sends to redis on a closed local port: the connection is refused, as by a broker that is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    saved = app.conf.broker_url, app.conf.task_always_eager
    forget_connections()
    app.conf.broker_url, app.conf.task_always_eager = f"redis://127.0.0.1:{port}/0", False
    yield
    forget_connections()
    app.conf.broker_url, app.conf.task_always_eager = saved


def forget_connections() -> None:
    """Drop the app's connection and producer pools, made for the broker URL it had (as after a fork)."""
    app.pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None
    # kombu keeps producer pools of its own, by broker URL, holding the pool just closed: without
    # this, the next test's send on the broker URL it had before fails ("Acquire on closed pool").
    pools.reset()


@pytest.fixture
def store(make_memory) -> dict:
    """Two copies of one preference (a cluster to merge), and what the store holds."""
    make_memory("Prefers tabs over spaces.")
    make_memory("Prefers tabs over spaces!", source="import")
    return snapshot()


def snapshot() -> dict:
    return {str(m.pk): (m.status, m.text) for m in Memory.objects.all()}


def assert_nothing_half_done(before: dict) -> None:
    assert snapshot() == before
    assert not TaskRun.objects.filter(status__in=["queued", "running"]).exists()
    assert all(run.error.startswith("not queued: OperationalError") for run in TaskRun.objects.all())


def assert_said_on_the_page(client, response, back: str, what: str) -> None:
    assert response.status_code == 302 and response["Location"] == back
    page = client.get(back).content.decode()
    assert f"{what} {UNREACHABLE}" in page


def assert_said_in_the_alerts(response, what: str) -> None:
    assert response.status_code == 503
    assert response["X-Memoryui-State"] == "unavailable" and response["HX-Retarget"] == "#alerts"
    page = response.content.decode()
    assert "Background worker&#x27;s broker unavailable" in page and "could not be reached" in page
    assert f"{what} was not queued, and nothing in the store was changed" in page


def test_the_extract_button_says_the_broker_is_unreachable(erin_client, store, refusing_broker):
    transcript = ingest(TRANSCRIPT).transcript

    response = erin_client.post(f"/transcripts/{transcript.pk}/extract/")

    assert_said_on_the_page(erin_client, response, transcript.get_absolute_url(), "The extraction")
    assert_nothing_half_done(store)


def test_decay_now_says_the_broker_is_unreachable(erin_client, store, refusing_broker):
    response = erin_client.post("/tasks/decay/")

    assert_said_on_the_page(erin_client, response, "/tasks/", "The decay")
    assert_nothing_half_done(store)


def test_merge_all_says_the_broker_is_unreachable(erin_client, store, refusing_broker):
    response = erin_client.post("/duplicates/apply/", {"scope": "agent:main", "confirmed": "1"}, headers=HTMX)

    assert_said_in_the_alerts(response, "Merging the clusters of agent:main")
    assert_nothing_half_done(store)


def test_a_clean_up_step_says_the_broker_is_unreachable(erin_client, store, refusing_broker):
    fields = {"scope": "agent:main", "step": "snapshot", "confirmed": "1"}

    response = erin_client.post("/cleanup/apply/", fields, headers=HTMX)

    assert_said_in_the_alerts(response, "Step 1")
    assert_nothing_half_done(store)
    # Asked again once the broker is back, the step runs (the refused run does not stand in its way).
    app.conf.task_always_eager = True
    assert erin_client.post("/cleanup/apply/", fields, headers=HTMX).status_code == 200
    assert TaskRun.objects.filter(kind="cleanup", status="succeeded").count() == 1


def test_a_calibration_says_the_broker_is_unreachable(alice_client, store, refusing_broker):
    memory = Memory.objects.first()
    golden_set = GoldenSet.objects.create(name="prefs", scope="agent:main")
    for n in range(MIN_QUERIES):
        expected = [str(memory.pk)] if n < MIN_ANSWERABLE else []
        GoldenQuery.objects.create(golden_set=golden_set, query=f"question {n}", expected_ids=expected)
    fields = {"profile": "default", "save_as": "calibrated-prefs"}

    response = alice_client.post(f"/recall/golden/{golden_set.pk}/calibrate/", fields)

    assert_said_on_the_page(alice_client, response, golden_set.get_absolute_url(), "The calibration")
    assert_nothing_half_done(store)


def test_an_index_repair_says_the_broker_is_unreachable(erin_client, store, refusing_broker):
    response = erin_client.post("/indexes/repair/", headers=HTMX)

    assert_said_in_the_alerts(response, "The repair")
    assert_nothing_half_done(store)


def test_a_transcript_posted_for_extraction_is_stored_and_its_extraction_said_not_queued(erin_client, refusing_broker):
    response = erin_client.post("/transcripts/", {"transcript": json.dumps(TRANSCRIPT), "extract": "on"})

    transcript = Transcript.objects.get()
    assert response.status_code == 302 and response["Location"] == transcript.get_absolute_url()
    page = erin_client.get(response["Location"]).content.decode()
    assert "Stored the transcript, 2 messages." in page
    assert "Its extraction was not queued: the background worker&#x27;s broker is unreachable" in page
    assert not TaskRun.objects.filter(status="queued").exists()


# --- the log: one line per period, not a traceback per write --------------------------------------


def write_memories(client, count: int, first: int = 0) -> None:
    for n in range(first, first + count):
        body = {"scope": "agent:main", "kind": "fact", "text": f"Locker K{n:03d} holds the spare keys."}
        response = client.post("/api/memories/", data=json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content  # the write stands; its index sync waits


def test_writes_during_an_outage_log_one_summary_line_not_a_traceback_each(
    alice_client, refusing_broker, monkeypatch, caplog
):
    monkeypatch.setattr(background, "outage", background.BrokerOutage(period=3600))
    caplog.set_level(logging.WARNING)

    write_memories(alice_client, 5)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []  # nothing per write
    background.outage.flush()  # the period is over

    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    message = line.getMessage()
    assert line.name == "memoryui.background" and line.exc_info is None
    assert message.startswith("5 writes found the broker down in the last 3600 s")
    assert message.count("Connection refused") == 1  # the error, once
    assert not any(r.exc_info for r in caplog.records)


def test_the_line_comes_once_the_period_that_began_with_a_refusal_has_passed(
    alice_client, refusing_broker, monkeypatch, caplog
):
    monkeypatch.setattr(background, "outage", background.BrokerOutage(period=0.5))
    caplog.set_level(logging.WARNING, logger="memoryui.background")

    write_memories(alice_client, 3)
    deadline = time.monotonic() + 10
    while not caplog.records and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.6)  # a second period would have logged by now, had it begun

    [line] = caplog.records
    assert line.getMessage().startswith("3 writes found the broker down in the last 0.5 s")
    write_memories(alice_client, 1, first=3)  # a new outage period begins
    background.outage.flush()
    assert caplog.records[-1].getMessage().startswith("1 write found the broker down")
