"""A real chromadb server of a test's own: the `chroma run` command of the chromadb package on
127.0.0.1, a free port and a temporary directory, which a test may stop, kill, freeze and start
again at the same port and path (its data kept), as a host of a multi-host deployment would see
its vector server go away and come back.

    with ChromaServer() as server:
        settings.CHROMA_URL = server.url
        server.stop()      # down: connections refused
        server.restart()   # up again, same URL, same data

The `chroma_server` fixture (tests/conftest.py) gives one per test.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

START_SECONDS = 60  # the server answers in ~1 s; the margin is for a loaded machine
STOP_SECONDS = 10


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def chroma_command() -> str:
    """The `chroma` command installed with the chromadb package (next to this Python)."""
    binary = Path(sys.executable).with_name("chroma")
    found = str(binary) if binary.exists() else shutil.which("chroma")
    if not found:
        pytest.fail("the `chroma` command of the chromadb package is not installed", pytrace=False)
    return found


class ChromaServer:
    """`chroma run --path <dir>/data --host 127.0.0.1 --port <port>`, started by `start()`."""

    def __init__(self, path: Path | None = None, port: int | None = None):
        self._own_dir = path is None
        self.dir = Path(tempfile.mkdtemp(prefix="memoryui-chroma-")) if path is None else Path(path)
        self.path = self.dir / "data"
        self.log = self.dir / "chroma.log"
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> ChromaServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> None:
        """Start the server (on the same port and path as before) and wait until it answers."""
        if self.running:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [chroma_command(), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"chroma exited with status {self.process.returncode}:\n{self._log_tail()}", pytrace=False)
            if self.answers():
                return
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"chroma did not answer within {START_SECONDS} s:\n{self._log_tail()}", pytrace=False)

    def answers(self) -> bool:
        """Whether the server answers its heartbeat."""
        try:
            return httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM, then SIGKILL if it lingers); the data stays."""
        if self.process is None:
            return
        self.thaw()  # a frozen process cannot act on SIGTERM
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """End the server abruptly (SIGKILL), as a crashed host would; the data stays."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Stop the server if it runs, and start it again at the same port and path."""
        self.stop()
        self.start()

    def freeze(self) -> None:
        """Suspend the server (SIGSTOP): it still accepts connections but never answers."""
        if self.running:
            self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.running:
            self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """Stop the server and remove its directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _log_tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else "(no log)"
