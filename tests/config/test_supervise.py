"""The supervisor each of `make run`'s processes runs under (config/supervise.py): a process
killed from outside is restarted and what it left behind is killed; one that keeps dying stops
the supervisor with a message, so honcho stops everything; a stop signal to the group stops it
without a restart. Real processes, no Django: a small Python program stands in for a worker with
a pool process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.supervise import alive, children_of
from tests.signals import as_from_a_terminal

SUPERVISE = Path(__file__).resolve().parents[2] / "config" / "supervise.py"

# A "worker": writes its pid, starts a "pool process" that writes its own and sleeps, then sleeps.
WORKER = """
import os, subprocess, sys, time
out = sys.argv[1]
pool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(out, "a") as f:
    f.write(f"{os.getpid()} {pool.pid}\\n")
time.sleep(600)
"""


def start(tmp_path: Path, command: list[str], **env) -> subprocess.Popen:
    environment = {**os.environ, "MEMORYUI_SUPERVISE_PAUSE_SCALE": "0.1", **env}
    return subprocess.Popen(
        [sys.executable, str(SUPERVISE), "bulk", "--", *command],
        env=environment, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def generations(path: Path, count: int, supervisor: subprocess.Popen, timeout: float = 30) -> list[tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().split("\n") if path.exists() else []
        found = [tuple(map(int, line.split())) for line in lines if line.strip()]
        if len(found) >= count:
            return found
        assert supervisor.poll() is None, supervisor.stderr.read()
        assert time.monotonic() < deadline, f"only {len(found)} of {count} starts"
        time.sleep(0.05)


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_killed_process_is_restarted_and_what_it_left_behind_is_killed(tmp_path):
    pids = tmp_path / "pids"
    supervisor = start(tmp_path, [sys.executable, "-c", WORKER, str(pids)])
    try:
        [(worker, pool)] = generations(pids, 1, supervisor)
        os.kill(worker, signal.SIGKILL)

        [_, (second_worker, second_pool)] = generations(pids, 2, supervisor)

        assert wait_gone(pool)  # the first pool process did not live on as an orphan
        assert alive(second_worker) and alive(second_pool) and second_worker != worker
    finally:
        os.killpg(supervisor.pid, signal.SIGTERM)
        supervisor.wait(timeout=30)
    said = supervisor.stderr.read()
    assert "memoryui: bulk was killed by SIGKILL after 0 s; restarting it in 0.1 s (restart 1 of at most 5" in said
    assert f"memoryui: bulk left 1 process(es) behind: killed ({pool})" in said


def test_a_process_that_keeps_dying_stops_the_supervisor_with_a_message(tmp_path):
    supervisor = start(tmp_path, [sys.executable, "-c", "import sys; sys.exit(3)"], MEMORYUI_SUPERVISE_MAX_RESTARTS="2")

    status = supervisor.wait(timeout=60)

    said = supervisor.stderr.read()
    assert status == 1
    assert said.count("exited with status 3 after 0 s; restarting it") == 2
    assert "bulk exited with status 3, 3 times in 10 minutes: not restarted again. Stopping memoryui" in said


def test_a_stop_signal_to_the_group_stops_it_without_a_restart(tmp_path):
    pids = tmp_path / "pids"
    supervisor = start(tmp_path, [sys.executable, "-c", WORKER, str(pids)])
    [(worker, pool)] = generations(pids, 1, supervisor)

    os.killpg(supervisor.pid, signal.SIGTERM)  # as honcho and a terminal's Ctrl-C do
    status = supervisor.wait(timeout=30)

    assert status == 128 + signal.SIGTERM  # the worker's own end, passed on
    assert len(pids.read_text().split()) == 2  # one start only
    assert wait_gone(worker) and wait_gone(pool)
    assert "restarting" not in supervisor.stderr.read()


def test_a_stop_signal_to_the_supervisor_alone_is_passed_on(tmp_path):
    pids = tmp_path / "pids"
    supervisor = start(tmp_path, [sys.executable, "-c", WORKER, str(pids)])
    [(worker, pool)] = generations(pids, 1, supervisor)

    supervisor.send_signal(signal.SIGTERM)  # `kill <pid>` of the supervisor only

    assert supervisor.wait(timeout=60) == 128 + signal.SIGTERM
    assert wait_gone(worker) and wait_gone(pool)


# The launcher `make run` starts honcho under (`supervise.py --launch -- …`), in a make recipe as the
# Makefile has it. A "honcho": writes its pid, then on INT or TERM writes which, and exits as honcho
# does after one (130 or 143).
HONCHO = """
import os, signal, sys, time
out = sys.argv[1]
def stop(signum, frame):
    with open(out, "a") as f:
        f.write(f"{signal.Signals(signum).name}\\n")
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
with open(out, "w") as f:
    f.write(f"{os.getpid()}\\n")
time.sleep(600)
"""


def make_run(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    said = tmp_path / "honcho"
    (tmp_path / "honcho.py").write_text(HONCHO)
    (tmp_path / "Makefile").write_text(
        f"run:\n\texec {sys.executable} {SUPERVISE} --launch -- {sys.executable} honcho.py {said}\n"
    )
    make = subprocess.Popen(
        ["make", "-s", "run"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (said.exists() and said.read_text().endswith("\n")):
        assert make.poll() is None, make.stdout.read()
        assert time.monotonic() < deadline, "the stand-in for honcho never started"
        time.sleep(0.05)
    return make, said


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stop_signal_to_make_alone_reaches_honcho_once_and_make_reports_no_error(tmp_path, stop):
    make, said = make_run(tmp_path)
    honcho = int(said.read_text().split()[0])

    make.send_signal(stop)  # make's pid only: make passes a TERM on to its recipe, never an INT

    assert make.wait(timeout=30) == -stop  # make ends of the signal it was sent, as make does
    assert said.read_text().split()[1:] == [stop.name]  # told once
    assert wait_gone(honcho)
    output = make.stdout.read()
    assert "make: ***" not in output and "Error" not in output, output


def test_a_ctrl_c_to_the_whole_group_reaches_honcho_once(tmp_path):
    make, said = make_run(tmp_path)

    os.killpg(make.pid, signal.SIGINT)  # a terminal's Ctrl-C: make and the launcher both have it

    assert make.wait(timeout=30) == -signal.SIGINT
    assert said.read_text().split()[1:] == ["SIGINT"]
    assert "Error 130" not in make.stdout.read()


def test_honcho_is_stopped_when_the_launcher_is_killed(tmp_path):
    make, said = make_run(tmp_path)
    honcho = int(said.read_text().split()[0])
    [launcher] = children_of(make.pid)

    os.kill(launcher, signal.SIGKILL)

    assert wait_gone(honcho)
    assert said.read_text().split()[1:] == ["SIGTERM"]
    make.wait(timeout=30)
