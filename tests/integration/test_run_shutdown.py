"""`make run` starts and stops cleanly: the web server and both workers run under one
supervisor (honcho, Procfile), and one TERM to `make` (or one Ctrl-C, which the terminal sends
to its whole foreground group) stops every process within seconds, quietly: no signal loops,
no traceback, no orphan. An extraction interrupted that way is not lost: it resumes when a
worker is back."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.test_worker_index_sync import ROOT, _environment, _manage, running_worker
from tests.signals import as_from_a_terminal

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

STOPPED_WITHIN = 10.0  # seconds
MOST_LINES = 20  # of output from the shutdown
NEVER_PRINTED = ("Traceback", "RecursionError", "Segmentation fault", "Error finding id")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _processes_of(data_dir: Path) -> dict[int, str]:
    """Every process started for this data dir (make, honcho, gunicorn, the workers and their
    pool and beat processes, whatever their session), by pid: its command line."""
    marker = f"MEMORYUI_DATA_DIR={data_dir}\0".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class MakeRun:
    """`make run` in its own session (as in a terminal), its output kept line by line with the time."""

    def __init__(self, env: dict, port: int):
        self.port = port
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            # -o: the virtualenv is installed already; everything else is `make run` as it is.
            ["make", "-o", ".venv/.installed", "run", "HOST=127.0.0.1", f"PORT={port}"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def output(self, since: float = 0.0) -> list[str]:
        return [line for at, line in self.lines if at >= since]

    def wait_until_serving(self, timeout: float = 120) -> None:
        """Until the login page answers 200, and what that printed (its access log lines) is out."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, "\n".join(self.output())[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/accounts/login/", timeout=20) as page:
                    if page.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "make run never served the login page"
            time.sleep(0.2)
        answered = time.monotonic()
        while time.monotonic() - max(answered, self.lines[-1][0] if self.lines else 0.0) < 1.0:
            time.sleep(0.1)


@contextmanager
def make_run(env: dict):
    run = MakeRun(env, _free_port())
    try:
        yield run
    finally:  # whatever the test found, leave nothing running
        for pid in _processes_of(Path(env["MEMORYUI_DATA_DIR"])):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.process.wait(timeout=10)
        run.reader.join(timeout=5)


def _stop_and_check(run: MakeRun, data_dir: Path, send) -> list[str]:
    """Send the stop (`send`), then: everything gone within STOPPED_WITHIN, quietly. The output
    after the stop."""
    running = _processes_of(data_dir)
    commands = " ".join(running.values())
    assert "gunicorn" in commands and "-n index@" in commands and "-n bulk@" in commands and "--beat" in commands
    pgid = run.process.pid
    sent = time.monotonic()
    send()
    # (make is this test's child: poll() reaps it, or its zombie would keep the group alive)
    while run.process.poll() is None or _processes_of(data_dir) or _group_alive(pgid):
        left = _processes_of(data_dir)
        assert time.monotonic() - sent < STOPPED_WITHIN, f"still running after {STOPPED_WITHIN} s: {left}"
        time.sleep(0.1)
    stopped_after = time.monotonic() - sent
    run.reader.join(timeout=5)
    after = run.output(since=sent)
    shown = "\n".join(after)
    print(f"stopped after {stopped_after:.1f} s, {len(after)} lines:\n{shown}")
    assert len(after) < MOST_LINES, shown
    assert not [word for word in NEVER_PRINTED if word in shown], shown
    # One TERM each: Celery says what it does once per TERM it receives.
    said = sorted(line.split("|")[0].split()[-1] for line in after if "worker: Cold shutdown" in line)
    assert said == ["bulk.1", "index.1"], shown
    return after


def test_one_term_to_make_run_stops_everything_quietly(tmp_path):
    env = _environment(tmp_path, None)
    with make_run(env) as run:
        run.wait_until_serving()
        _stop_and_check(run, tmp_path, lambda: os.kill(run.process.pid, signal.SIGTERM))


def _extraction(data_dir: Path) -> tuple[str, int]:
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        rows = db.execute("SELECT status, attempts FROM memoryui_taskrun WHERE kind = 'extract'").fetchall()
    return rows[0] if rows else ("none", 0)


def test_ctrl_c_during_an_extraction_stops_everything_and_the_extraction_resumes_later(tmp_path):
    env = _environment(tmp_path, None)
    messages = []
    for week in range(3):  # nothing for L0: each turn goes to the LLM, which takes its time
        messages += [{"role": "user", "content": f"我们第{week}周要把支付服务迁到新机房,负责人是王芳"},
                     {"role": "assistant", "content": "好的"}]  # fmt: skip
    path = tmp_path / "transcript.json"
    path.write_text(json.dumps({"scope": "agent:main", "messages": messages}), encoding="utf-8")
    with FakeOpenAIServer(stall_seconds=30) as llm:
        llm.mode = "stall"
        env.update(MEMORYUI_LLM_BASE_URL=llm.base_url, MEMORYUI_LLM_MODEL="fake", MEMORYUI_L1_TIMEOUT_MS="60000")
        with make_run(env) as run:
            run.wait_until_serving()
            _manage(env, "extract", str(path), "--background", "--json")
            deadline = time.monotonic() + 60
            while _extraction(tmp_path)[0] != "running":
                assert time.monotonic() < deadline, "the extraction never started"
                time.sleep(0.1)
            # Ctrl-C: the terminal signals its whole foreground process group.
            after = _stop_and_check(run, tmp_path, lambda: os.killpg(run.process.pid, signal.SIGINT))
            assert "SIGINT received" in "\n".join(after)
        assert _extraction(tmp_path) == ("running", 1)  # interrupted, not failed

        llm.mode = "good"
        with running_worker(env) as worker:
            deadline = time.monotonic() + 90
            while _extraction(tmp_path)[0] != "succeeded":
                assert worker.poll() is None, worker.stderr.read()[-2000:]
                assert time.monotonic() < deadline, f"the extraction did not resume: {_extraction(tmp_path)}"
                time.sleep(0.2)
    assert _extraction(tmp_path) == ("succeeded", 2)
