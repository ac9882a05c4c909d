"""One extraction of a transcript at a time: while one is queued or running, asking again (the
API, the page's Extract button, `manage.py extract --background`, `?extract=true` on a post)
gives that run back instead of queueing another, even when two requests arrive at once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from kombu.exceptions import OperationalError as BrokerError

from ingest import tasks
from ingest.ingestion import ingest
from memoryui.models import TaskRun, Transcript

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]

DATA = {
    "scope": "agent:main",
    "messages": [{"role": "user", "content": "我叫东升"}, {"role": "assistant", "content": "好的。"}],
}


@pytest.fixture
def transcript() -> Transcript:
    return ingest(DATA).transcript


@pytest.fixture
def api(client, agent_token):
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {agent_token}"
    return client


def post_extract(api, transcript, **body):
    return api.post(f"/api/transcripts/{transcript.pk}/extract/", json.dumps(body), "application/json")


def test_a_second_api_request_gets_the_queued_run_back(api, transcript, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:  # queued, not yet run
        first = post_extract(api, transcript)
        second = post_extract(api, transcript, l1="off")
    assert first.status_code == second.status_code == 202
    assert second.json()["id"] == first.json()["id"] and second.json()["params"]["l1"] == "auto"
    assert TaskRun.objects.count() == 1 and len(sent) == 1

    sent[0]()  # the worker runs it (eagerly here)
    assert TaskRun.objects.get().status == "succeeded"
    third = post_extract(api, transcript)
    assert third.status_code == 202 and third.json()["id"] != first.json()["id"]


def test_a_running_extraction_is_given_back_too(api, transcript):
    run = TaskRun.objects.create(kind="extract", actor="test", params={"transcript": str(transcript.pk)})
    run.start(1)
    again = post_extract(api, transcript)
    assert again.status_code == 202 and again.json()["id"] == str(run.pk) and again.json()["status"] == "running"


def test_posting_the_transcript_with_extract_true_again_gives_the_same_task(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        first = api.post("/api/transcripts/?extract=true", json.dumps(DATA), "application/json")
        again_data = {**DATA, "id": first.json()["transcript_id"]}
        again = api.post("/api/transcripts/?extract=true", json.dumps(again_data), "application/json")
    assert first.json()["task_id"] == again.json()["task_id"] and TaskRun.objects.count() == 1


def test_the_extract_button_goes_to_the_extraction_already_queued(
    alice_client, transcript, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks():
        first = alice_client.post(f"/transcripts/{transcript.pk}/extract/")
        second = alice_client.post(f"/transcripts/{transcript.pk}/extract/", follow=True)
    run = TaskRun.objects.get()
    assert first["Location"] == second.redirect_chain[0][0] == f"/tasks/{run.pk}/"
    assert "extraction is queued already" in second.content.decode()


def test_the_command_in_the_background_prints_the_queued_task_and_the_foreground_refuses(
    transcript, django_capture_on_commit_callbacks
):
    def extract(*args: str) -> dict:
        out = io.StringIO()
        call_command("extract", "--transcript", str(transcript.pk), *args, "--json", stdout=out)
        return json.loads(out.getvalue())

    with django_capture_on_commit_callbacks():
        first = extract("--background")
        second = extract("--background")
    assert (first["already"], second["already"]) == (False, True)
    assert second["task_id"] == first["task_id"] and second["status"] == "queued"
    with pytest.raises(CommandError, match=f"being extracted already: task {first['task_id']}"):
        extract()
    assert TaskRun.objects.count() == 1


def test_a_run_the_broker_refused_is_failed_and_does_not_block_the_next_request(
    api, transcript, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with monkeypatch.context() as patched:
        patched.setattr(tasks.extract_transcript, "delay", broker_down)
        with pytest.raises(BrokerError), django_capture_on_commit_callbacks(execute=True):
            post_extract(api, transcript)
    refused = TaskRun.objects.get()
    assert refused.status == "failed" and refused.error.startswith("not queued: OperationalError: Error 111")
    with django_capture_on_commit_callbacks():
        assert post_extract(api, transcript).json()["id"] != str(refused.pk)


# --- two requests at once ------------------------------------------------------------------------

# Both requests look for a queued run, then (the window made wide) create one. Without the lock
# both would find none and both queue.
WINDOW = 1.0


def widen_the_window(monkeypatch):
    look = tasks.extraction_in_progress

    def slow_look(transcript):
        found = look(transcript)
        time.sleep(WINDOW)
        return found

    monkeypatch.setattr(tasks, "extraction_in_progress", slow_look)


@pytest.mark.django_db(transaction=True)
def test_two_requests_at_once_queue_one_extraction(monkeypatch, tmp_path):
    if connection.vendor == "sqlite":
        # The test database is in memory, where a second writer fails at once instead of waiting:
        # the race runs as two processes on a SQLite file, with the settings `make run` uses.
        ids = _race_in_two_processes(tmp_path)
    else:
        transcript = ingest(DATA).transcript
        widen_the_window(monkeypatch)
        monkeypatch.setattr(tasks, "dispatch", lambda task, run, foreground=False: run)
        start = threading.Barrier(2)
        ids = []

        def request():
            try:
                start.wait()
                ids.append(str(tasks.enqueue_extraction(transcript, actor="test").pk))
            finally:
                connection.close()

        threads = [threading.Thread(target=request) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(ids) == 2 and len(set(ids)) == 1


RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import django

    django.setup()
    from tests.ingest import test_one_extraction_per_transcript as test
    from ingest import tasks
    from memoryui.models import Transcript

    class Patch:
        def setattr(self, target, name, value):
            setattr(target, name, value)

    test.widen_the_window(Patch())
    tasks.dispatch = lambda task, run, foreground=False: run  # nothing to send: no worker here
    transcript = Transcript.objects.get()
    ready = Path(sys.argv[1])
    (ready / sys.argv[2]).touch()
    while len(list(ready.iterdir())) < 2:
        time.sleep(0.01)
    print(tasks.enqueue_extraction(transcript, actor=sys.argv[2]).pk)
    """
)


def _race_in_two_processes(tmp_path: Path) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(MEMORYUI_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings", PYTHONPATH=str(ROOT))
    setup = "import django; django.setup(); from django.core.management import call_command; "
    setup += "from ingest.ingestion import ingest; call_command('migrate', verbosity=0); "
    setup += f"ingest({DATA!r})"
    subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=env, check=True, timeout=120)
    ready = tmp_path / "ready"
    ready.mkdir()
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(ready), name], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    ids = [racer.communicate(timeout=120)[0].strip() for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0]
    return ids
