"""`make run` stops when make alone is signalled, as a process manager or `kill <make's pid>` does:
make passes a TERM on to its recipe but not an INT, so the launcher the recipe runs must notice
either. Every process `make run` started is gone within a bound, and a requested stop ends quietly:
no "make: *** … Error 130" under it."""

from __future__ import annotations

import os
import signal
import time

import pytest

from config.supervise import alive, children_of
from tests.integration.test_run_shutdown import _processes_of, make_run
from tests.integration.test_worker_index_sync import _environment

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

STOPPED_WITHIN = 20.0  # seconds: Celery's cold shutdown of both workers on a busy machine


def _descendants(pid: int) -> dict[int, str]:
    """Every process under `pid` now, by pid: its command line."""
    found: dict[int, str] = {}
    waiting = children_of(pid)
    while waiting:
        child = waiting.pop()
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                found[child] = cmdline.read().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
        waiting.extend(children_of(child))
    return found


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stop_signal_to_make_alone_stops_every_process_and_no_error_is_reported(tmp_path, stop):
    env = _environment(tmp_path, None)
    with make_run(env) as run:
        run.wait_until_serving()
        started = _descendants(run.process.pid)
        commands = " ".join(started.values())
        assert "honcho" in commands and "gunicorn" in commands, commands
        assert "-n index@" in commands and "-n bulk@" in commands, commands

        sent = time.monotonic()
        os.kill(run.process.pid, stop)  # make's pid only, not its group
        # (make is this test's child: poll() reaps it)
        while run.process.poll() is None or any(alive(pid) for pid in started) or _processes_of(tmp_path):
            left = {pid: command for pid, command in started.items() if alive(pid)}
            assert time.monotonic() - sent < STOPPED_WITHIN, f"still running after {STOPPED_WITHIN} s: {left}"
            time.sleep(0.1)
        run.reader.join(timeout=5)
        shown = "\n".join(run.output(since=sent))
        print(shown)
        assert "make: ***" not in shown and "Error 130" not in shown, shown
        assert "Traceback" not in shown, shown
        # make itself ends as a signalled make does: of the signal it was sent.
        assert run.process.returncode == -stop
