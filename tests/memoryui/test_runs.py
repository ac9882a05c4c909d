"""Runs that outlive their worker (memoryui.runs): a run whose worker is gone, or that stopped
advancing, is stalled and sent again, until its last attempt fails it with a retry offered; a
second delivery of a run another live worker holds leaves it alone; a person retries or cancels
a run from the command line (the task page has the same buttons), and a cancelled run stops at
its next step."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from kombu import Connection

from config.celery import app
from ingest.tasks import EXTRACT, enqueue_extraction, extraction_in_progress
from memoryui import runs
from memoryui.background import TaskRunTask
from memoryui.models import TaskRun, Transcript
from memoryui.models.taskrun import Withdrawn

pytestmark = pytest.mark.django_db

CALLS: list[str] = []


@app.task(bind=True, base=TaskRunTask, name="tests.memoryui.test_runs.count_to_three")
def count_to_three(self, run: TaskRun) -> dict:
    """Three steps; the test may cancel the run between them (`params.cancel_after`)."""
    run.start(3)
    for step in range(1, 4):
        CALLS.append(f"{run.pk}:{step}")
        if run.params.get("cancel_after") == step:
            runs.cancel(run, actor="test")
        run.advance(step, {"steps": step})
    return {"steps": 3}


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def make_run(status=TaskRun.Status.RUNNING, *, worker="", waited=0.0, attempts=1, **fields) -> TaskRun:
    at = timezone.now() - timedelta(seconds=waited)
    fields.setdefault("params", {"n": TaskRun.objects.count()})
    return TaskRun.objects.create(
        kind="count", actor="test", task_name=count_to_three.name, status=status, worker=worker,
        progressed_at=at, created_at=at, attempts=attempts, **fields,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.MEMORYUI_RUN_STALL_SECONDS = 60.0
    settings.MEMORYUI_RUN_MAX_ATTEMPTS = 3
    CALLS.clear()


def test_a_process_is_named_by_host_pid_and_start_so_a_reused_pid_is_not_taken_for_it():
    me = runs.holder()
    host, pid, started = me.split("/")
    assert pid == str(os.getpid()) and started
    assert runs.holder_alive(me) is True
    assert runs.holder_alive(f"{host}/{os.getpid()}/{int(started) + 1}") is False  # same pid, another process
    assert runs.holder_alive(runs.holder(dead_pid())) is False
    assert runs.holder_alive("elsewhere.example/123/456") is None  # another host: only its progress tells


def test_a_second_delivery_leaves_a_run_another_live_worker_holds(django_capture_on_commit_callbacks):
    parent = runs.holder(os.getppid())  # a live process that is not this one
    held = make_run(worker=parent, waited=30)
    abroad = make_run(worker="elsewhere.example/123/456", waited=5)
    cancelled = make_run(TaskRun.Status.CANCELLED)

    for run in (held, abroad, cancelled):
        assert count_to_three(str(run.pk)) == {}
    assert CALLS == []
    held.refresh_from_db()
    assert (held.status, held.worker) == ("running", parent)


def test_a_delivery_takes_over_a_run_whose_worker_is_gone_and_finishes_it():
    gone = make_run(worker=runs.holder(dead_pid()), waited=1)
    stale_abroad = make_run(worker="elsewhere.example/123/456", waited=120)

    for run in (gone, stale_abroad):
        assert count_to_three(str(run.pk)) == {"steps": 3}
        run.refresh_from_db()
        assert (run.status, run.worker, run.progress_done, run.attempts) == ("succeeded", runs.holder(), 3, 2)


def test_a_cancelled_run_stops_at_its_next_step_and_stays_cancelled():
    run = make_run(TaskRun.Status.QUEUED, params={"cancel_after": 1})

    assert count_to_three(str(run.pk)) == {}

    run.refresh_from_db()
    assert [f"{run.pk}:1"] == CALLS
    assert (run.status, run.error, run.progress_done) == ("cancelled", "cancelled by test", 0)


def test_a_run_handed_to_another_worker_is_withdrawn_from_the_first():
    run = make_run(TaskRun.Status.QUEUED)
    taken = runs.take(str(run.pk))
    TaskRun.objects.filter(pk=run.pk).update(worker="elsewhere.example/1/2")  # the sweep gave it away

    with pytest.raises(Withdrawn):
        taken.advance(1, {})
    with pytest.raises(Withdrawn):
        taken.finish({"steps": 3})
    assert TaskRun.objects.get(pk=run.pk).status == "running"


def test_the_sweep_stalls_and_sends_again_what_a_dead_or_stuck_worker_left(django_capture_on_commit_callbacks):
    dead = make_run(worker=runs.holder(dead_pid()), waited=1)
    stuck = make_run(worker="elsewhere.example/123/456", waited=120)
    hung = make_run(worker=runs.holder(os.getppid()), waited=120)  # alive, and no progress: stuck
    slow = make_run(worker=runs.holder(os.getppid()), waited=30)
    fresh = make_run(worker="elsewhere.example/123/456", waited=5)
    last = make_run(worker=runs.holder(dead_pid()), waited=1, attempts=3)
    lost = make_run(TaskRun.Status.QUEUED, waited=120)  # no worker took it: its message may be lost
    waiting = make_run(TaskRun.Status.QUEUED, waited=5)

    with django_capture_on_commit_callbacks() as sends:
        counts = runs.sweep()

    assert counts == {"stalled": 3, "failed": 1, "resent": 1}
    every = (dead, stuck, hung, slow, fresh, last, lost, waiting)
    states = {run.pk: TaskRun.objects.get(pk=run.pk) for run in every}
    assert states[dead.pk].status == states[stuck.pk].status == "stalled"
    assert "its worker" in states[dead.pk].error and "is gone" in states[dead.pk].error
    assert states[stuck.pk].error.startswith("stalled: no progress for 1")
    assert "(attempt 2 of 3)" in states[stuck.pk].error
    assert states[slow.pk].status == states[fresh.pk].status == "running"
    assert states[last.pk].status == "failed" and f"manage.py task retry {last.pk}" in states[last.pk].error
    assert states[waiting.pk].status == "queued"
    assert len(sends) == 4  # dead, stuck, hung and lost are sent again …
    for send in sends:
        send()
    for run in (dead, stuck, hung, lost):  # … and, inline here, done
        run.refresh_from_db()
        assert run.status == "succeeded"


def test_a_stalled_extraction_still_holds_its_transcript_and_a_failed_one_does_not(django_capture_on_commit_callbacks):
    transcript = Transcript.objects.create(scope="agent:main")
    run = TaskRun.objects.create(
        kind=EXTRACT, actor="test", params={"transcript": str(transcript.pk)}, status=TaskRun.Status.STALLED
    )
    assert extraction_in_progress(transcript) == run
    assert enqueue_extraction(transcript, actor="test").pk == run.pk  # reused, not a second run

    TaskRun.objects.filter(pk=run.pk).update(status=TaskRun.Status.FAILED)
    assert extraction_in_progress(transcript) is None


def test_task_retry_and_cancel_on_the_command_line(django_capture_on_commit_callbacks):
    failed = make_run(TaskRun.Status.FAILED, attempts=3, error="stalled: …")
    queued = make_run(TaskRun.Status.QUEUED)

    def task(*args) -> dict:
        out = StringIO()
        call_command("task", *args, "--json", stdout=out)
        return json.loads(out.getvalue())

    listed = task("list")
    assert {run["id"] for run in listed["runs"]} == {str(queued.pk)}
    assert [run["id"] for run in task("list", "--status", "failed")["runs"]] == [str(failed.pk)]

    with django_capture_on_commit_callbacks(execute=True):
        retried = task("retry", str(failed.pk))
    assert (retried["status"], retried["attempts"], retried["error"]) == ("queued", 0, "retried by cli:task")
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == ("succeeded", 1)  # sent again, and done inline here

    cancelled = task("cancel", str(queued.pk))
    assert (cancelled["status"], cancelled["error"]) == ("cancelled", "cancelled by cli:task")

    with pytest.raises(CommandError, match="is succeeded: only a queued, running or stalled run is cancelled"):
        call_command("task", "cancel", str(failed.pk))
    with pytest.raises(CommandError, match="is succeeded: only a failed, stalled or cancelled run is retried"):
        call_command("task", "retry", str(failed.pk))
    with pytest.raises(CommandError, match="no task run 'nope'"):
        call_command("task", "retry", "nope")


def test_a_retry_is_refused_while_another_run_does_the_same_work():
    failed = make_run(TaskRun.Status.FAILED, params={"transcript": "t-1"})
    make_run(TaskRun.Status.RUNNING, params={"transcript": "t-1"}, worker=runs.holder())

    with pytest.raises(runs.RunStateError, match="does the same work and is running"):
        runs.retry(failed, actor="test")


def test_the_task_page_offers_retry_and_cancel_to_an_editor_and_they_work(
    alice_client, bob_client, django_capture_on_commit_callbacks
):
    stalled = make_run(TaskRun.Status.STALLED, error="stalled: its worker (h/1/2) is gone; sent again at …")
    running = make_run(worker="elsewhere.example/123/456")
    done = make_run(TaskRun.Status.SUCCEEDED)

    page = alice_client.get(f"/tasks/{stalled.pk}/").content.decode()
    assert 'class="task-status task-stalled">stalled<' in page
    assert 'data-action="retry"' in page and 'data-action="cancel"' in page
    assert "it stopped advancing, so it was sent again" in page
    assert 'data-action="retry"' not in alice_client.get(f"/tasks/{running.pk}/").content.decode()
    assert "data-task-actions" not in alice_client.get(f"/tasks/{done.pk}/").content.decode()
    assert "data-task-actions" not in bob_client.get(f"/tasks/{stalled.pk}/").content.decode()  # a viewer

    assert bob_client.post(f"/tasks/{running.pk}/cancel/").status_code == 403
    assert alice_client.post(f"/tasks/{running.pk}/cancel/").status_code == 302
    running.refresh_from_db()
    assert (running.status, running.error) == ("cancelled", "cancelled by user:alice")

    with django_capture_on_commit_callbacks(execute=True):
        assert alice_client.post(f"/tasks/{stalled.pk}/retry/").status_code == 302
    stalled.refresh_from_db()
    assert stalled.status == "succeeded"  # sent again, and done inline here

    refused = alice_client.post(f"/tasks/{done.pk}/cancel/", follow=True).content.decode()
    assert "is succeeded: only a queued, running or stalled run is cancelled" in refused
    assert alice_client.post(f"/tasks/{done.pk}/explode/").status_code == 404


def test_the_sweep_trims_the_embedded_brokers_rows_of_messages_delivered_long_ago(tmp_path, settings, request):
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings.CELERY_BROKER_URL = url
    with Connection(url) as broker:
        queue = broker.SimpleQueue("trim-test")
        for n in range(3):
            queue.put({"n": n})
        for _ in range(2):  # two delivered (and acknowledged), one still waiting
            queue.get(timeout=5).ack()
        queue.close()
    db = sqlite3.connect(tmp_path / "broker.sqlite3")
    request.addfinalizer(db.close)
    rows = lambda: db.execute("SELECT visible FROM kombu_message ORDER BY id").fetchall()  # noqa: E731
    assert rows() == [(0,), (0,), (1,)]  # kombu keeps what it delivered, for ever
    oldest = "(SELECT MIN(id) FROM kombu_message)"
    db.execute(f"UPDATE kombu_message SET timestamp = '2000-01-01 00:00:00' WHERE id = {oldest}")
    db.commit()

    assert runs.trim_embedded_broker() == 1

    assert rows() == [(0,), (1,)]  # the recent delivery stays a day; the waiting message is untouched
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    assert runs.trim_embedded_broker() == 0  # not the embedded broker: nothing to trim
