"""Keep one of `make run`'s processes running: restart it when it dies, or stop memoryui, saying why.

    python config/supervise.py bulk -- .venv/bin/celery -A config worker …

honcho, which runs the Procfile, stops everything when a process exits, but only notices the
exit once every process holding the line's output has gone: a Celery worker killed with SIGKILL
(or by the OOM killer) leaves its pool process behind, still holding it, so the app ran on with
no worker and nobody said so. Each Procfile line runs its process under this supervisor:

- when the process exits without being asked to, whatever it left behind is killed (the
  supervisor is the "child subreaper" of its descendants, so they are re-parented to it, not to
  init), a line says what happened, and it is started again after a short pause;
- a process that keeps dying (MAX_RESTARTS restarts within WINDOW seconds) is not restarted: the
  supervisor says so and exits with status 1, so honcho stops everything with that message last;
  never half a system;
- TERM, INT, QUIT or HUP means stop: honcho and the terminal signal the whole process group, so
  the process has the signal too; the supervisor waits for it to exit (sending TERM, then KILL,
  if it lingers, as when only the supervisor was signalled) and exits with its status.

`make run` itself starts honcho under this file's launcher (`supervise.py --launch -- honcho start …`),
so that a stop reaches honcho however it is sent, and a requested stop ends quietly:

- make passes a TERM on to its recipe's process (the launcher, which the recipe `exec`s), but not an
  INT: signalled alone, make blocks the signal, restores its default action and waits for its
  children before it dies of it. The launcher watches its parent for that (the stop signal now
  blocked and no longer caught) and takes it as the same stop;
- honcho runs in a process group of its own, so it is told once, by the launcher, even when a
  Ctrl-C signals the terminal's whole foreground group; it dies with the launcher if the launcher
  is killed;
- on a requested stop the launcher exits 0 once honcho is done, so make does not add
  "Error 130" (honcho's status after an INT) under a clean stop.

No Django here: it starts in a moment and depends on nothing that could fail to load.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

MAX_RESTARTS = 5
WINDOW = 600.0  # seconds
PAUSES = (1.0, 2.0, 5.0, 10.0)  # before each restart in a row, then the last one
LINGER = 15.0  # seconds a process may take to stop once told, before the supervisor insists
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def say(name: str, text: str) -> None:
    print(f"memoryui: {name} {text}", file=sys.stderr, flush=True)


def described(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def stat_of(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state, parent, …), or None when
    there is no such process. The name is in parentheses and may hold spaces and parentheses."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def parent_of(pid: int) -> int | None:
    stat = stat_of(pid)
    return int(stat[1]) if stat else None


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet waited for, does not)."""
    stat = stat_of(pid)
    return stat is not None and stat[0] != "Z"


def children_of(pid: int) -> list[int]:
    path = Path("/proc") / str(pid) / "task" / str(pid) / "children"
    try:
        return [int(child) for child in path.read_text().split()]
    except OSError:
        return []


def leftovers() -> list[int]:
    """The supervisor's children now: what a dead process left behind was re-parented to it."""
    me = os.getpid()
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and parent_of(int(entry.name)) == me
    ]


def reap_leftovers(name: str) -> None:
    """Kill what the dead process left behind (its pool processes, say), and wait for them."""
    pids = leftovers()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if pids:
        say(name, f"left {len(pids)} process(es) behind: killed ({', '.join(map(str, pids))})")


class Supervisor:
    def __init__(self, name: str, command: list[str]):
        self.name = name
        self.command = command
        self.stopping: int | None = None  # the stop signal received
        self.process: subprocess.Popen | None = None
        self.restarts: deque[float] = deque()
        self.max_restarts = MAX_RESTARTS
        self.pause_scale = 1.0

    def on_stop(self, signum, frame) -> None:
        self.stopping = self.stopping or signum

    def run(self) -> int:
        for stop in STOPS:
            signal.signal(stop, self.on_stop)
        become_subreaper()
        in_a_row = 0
        while True:
            started = time.monotonic()
            self.process = subprocess.Popen(self.command)
            status = self.wait()
            if self.stopping is not None:
                reap_leftovers(self.name)
                return status if status >= 0 else 128 - status
            lived = time.monotonic() - started
            reap_leftovers(self.name)
            now = time.monotonic()
            self.restarts.append(now)
            while self.restarts and now - self.restarts[0] > WINDOW:
                self.restarts.popleft()
            if len(self.restarts) > self.max_restarts:
                times = f"{len(self.restarts)} times in {WINDOW / 60:g} minutes"
                say(self.name, f"{described(status)}, {times}: not restarted again. Stopping memoryui; see the lines "
                    "above for why it died, then `make run` again.")  # fmt: skip
                return 1
            in_a_row = in_a_row + 1 if lived < WINDOW / MAX_RESTARTS else 1
            pause = PAUSES[min(in_a_row, len(PAUSES)) - 1] * self.pause_scale
            restart = f"restart {len(self.restarts)} of at most {self.max_restarts} in {WINDOW / 60:g} minutes"
            say(self.name, f"{described(status)} after {lived:.0f} s; restarting it in {pause:g} s ({restart})")
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and self.stopping is None:
                time.sleep(0.1)
            if self.stopping is not None:
                return 128 + self.stopping

    def wait(self) -> int:
        """The process's exit status; once told to stop, it is given LINGER seconds, then TERM,
        then KILL."""
        told = None
        insisted = 0
        while True:
            try:
                return self.process.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            if self.stopping is None:
                continue
            told = told or time.monotonic()
            if time.monotonic() - told > LINGER * self.pause_scale * (insisted + 1):
                self.process.send_signal(signal.SIGTERM if insisted == 0 else signal.SIGKILL)
                insisted += 1


PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_EVERY = 0.2  # seconds between looks at the parent


def _signal_mask(pid: int, field: str) -> int:
    """One of the signal masks /proc/<pid>/status shows (SigBlk, SigCgt, SigIgn), as a number."""
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _bit(signum: int) -> int:
    return 1 << (signum - 1)


def stop_taken_by(pid: int, caught: int) -> int | None:
    """The stop signal `pid` is dying of, if it is: one it caught (`caught`, its SigCgt when first
    seen) that is now blocked and no longer caught, as make's handler leaves it while it waits for
    its children before dying of the signal."""
    blocked, now_caught = _signal_mask(pid, "SigBlk"), _signal_mask(pid, "SigCgt")
    for stop in STOPS:
        bit = _bit(stop)
        if caught & bit and blocked & bit and not now_caught & bit:
            return stop
    return None


def _die_with_parent() -> None:
    """In the child, before exec: a TERM when the launcher dies (killed, say), so honcho never runs on alone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class Launcher:
    """Run `command` (honcho) until it ends or a stop is asked for, however it is asked."""

    def __init__(self, command: list[str]):
        self.command = command
        self.stopping: int | None = None
        self.process: subprocess.Popen | None = None

    def on_stop(self, signum, frame) -> None:
        self.stop(signum)

    def stop(self, signum: int) -> None:
        if self.stopping is not None:
            return
        self.stopping = signum
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    def run(self) -> int:
        parent = os.getppid()
        parent_catches = _signal_mask(parent, "SigCgt")
        for stop in STOPS:
            signal.signal(stop, self.on_stop)
        self.process = subprocess.Popen(self.command, process_group=0, preexec_fn=_die_with_parent)
        if self.stopping is not None:  # asked before the command had started
            self.process.send_signal(signal.SIGTERM)
        told = None
        insisted = 0
        while True:
            try:
                status = self.process.wait(timeout=WATCH_EVERY)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stopping is None:
                taken = stop_taken_by(parent, parent_catches) if parent > 1 else None
                if taken is not None or not alive(parent):
                    self.stop(taken or signal.SIGTERM)
                continue
            told = told or time.monotonic()
            if time.monotonic() - told > LINGER * (insisted + 1):
                self.process.send_signal(signal.SIGTERM if insisted == 0 else signal.SIGKILL)
                insisted += 1
        if self.stopping is not None:
            return 0
        return status if status >= 0 else 128 - status


def main(argv: list[str]) -> int:
    if argv[:2] == ["--launch", "--"] and len(argv) > 2:
        return Launcher(argv[2:]).run()
    if "--" not in argv or argv.index("--") != 1 or len(argv) < 3:
        print(
            "usage: supervise.py NAME -- COMMAND [ARG…]\n       supervise.py --launch -- COMMAND [ARG…]",
            file=sys.stderr,
        )
        return 2
    supervisor = Supervisor(argv[0], argv[2:])
    # How many restarts, and how long the pauses and the wait for a stop (scaled), set for a test's sake.
    supervisor.max_restarts = int(os.environ.get("MEMORYUI_SUPERVISE_MAX_RESTARTS", MAX_RESTARTS))
    supervisor.pause_scale = float(os.environ.get("MEMORYUI_SUPERVISE_PAUSE_SCALE", 1.0))
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
