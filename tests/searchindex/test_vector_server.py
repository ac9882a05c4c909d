"""The vector index on a chromadb server (CHROMA_URL): bounded connects and requests, the first
connect included, and a server that comes back is used again by the same process.

The servers are real (`chroma run`, the `chroma_server` fixture), except two hosts that
misbehave on purpose: a socket that accepts connections and never answers, and a tiny HTTP
server that answers the heartbeat and then stalls in the middle of chromadb's handshake.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from searchindex.chroma import http_sessions
from searchindex.documents import IndexedMemory, IndexUnavailable
from searchindex.vector import EmbedderMismatch, VectorIndex
from tests.fakes import HashEmbedder
from tests.integration.chroma_server import free_port

DEPLOY = "00000000-0000-0000-0000-00000000000d"
HANG_GUARD_SECONDS = 60  # only so that a regression fails the test instead of hanging the suite


def memory(pk: str, text: str) -> IndexedMemory:
    return IndexedMemory(
        id=pk, scope="agent:main", kind="fact", tier="working", pinned=False, text=text, content_hash=f"h-{pk}"
    )


@pytest.fixture
def open_index():
    opened = []

    def open_(url: str, **kwargs) -> VectorIndex:
        index = VectorIndex(url=url, embedder=HashEmbedder(), **kwargs)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()


def outcome_of(call) -> BaseException | None:
    """Run `call` in a thread and return what it raised (None: it returned), or fail if it hangs."""
    outcome: list = []

    def run():
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_SECONDS)
    assert not worker.is_alive(), "the call hung on an unanswering chromadb server"
    return outcome[0]


def test_the_first_connect_to_a_closed_port_is_index_unavailable_naming_the_url(open_index):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    index = open_index(url, connect_timeout=0.5, timeout=1)
    with pytest.raises(IndexUnavailable, match=f"chromadb server at {url}") as excinfo:
        index.count()
    assert excinfo.value.index == "vector" and not isinstance(excinfo.value, EmbedderMismatch)
    # Refused by our own heartbeat, which has the timeouts, not inside chromadb's handshake.
    assert isinstance(excinfo.value.__cause__, httpx.ConnectError)


def test_a_host_that_accepts_connections_and_never_answers_fails_the_first_connect(open_index):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts connections for it; nothing ever reads or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        index = open_index(url, connect_timeout=0.5, timeout=0.5)
        raised = outcome_of(index.count)
    assert isinstance(raised, IndexUnavailable), raised
    assert url in str(raised) and "no answer within 0.5 s (MEMORYUI_CHROMA_TIMEOUT)" in str(raised)


class _StallsAfterHeartbeat(BaseHTTPRequestHandler):
    """Answers the heartbeat like chromadb, then holds every other request until released."""

    release = threading.Event()

    def do_GET(self):
        if self.path.endswith("/heartbeat"):
            body = json.dumps({"nanosecond heartbeat": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.release.wait(HANG_GUARD_SECONDS)
        self.send_error(503)

    def log_message(self, *args):
        pass


def test_a_server_that_stalls_inside_chromadbs_handshake_fails_the_first_connect(open_index):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StallsAfterHeartbeat)
    server.daemon_threads = True
    _StallsAfterHeartbeat.release.clear()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        index = open_index(url, connect_timeout=0.3, timeout=0.3)
        raised = outcome_of(index.count)
        assert isinstance(raised, IndexUnavailable), raised
        assert url in str(raised) and "no answer to the handshake" in str(raised)
    finally:
        _StallsAfterHeartbeat.release.set()
        server.shutdown()
        server.server_close()


class _NotChromadb(BaseHTTPRequestHandler):
    """Another web service on the port: it knows no GET at all (HTTP 501)."""

    def log_message(self, *args):
        pass


def test_a_url_that_is_not_a_chromadb_server_says_what_answered(open_index):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotChromadb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(IndexUnavailable, match="answered HTTP 501; is it a chromadb 1.x server") as excinfo:
            open_index(url).count()
        assert f"chromadb server at {url}" in str(excinfo.value)
    finally:
        server.shutdown()
        server.server_close()


def test_the_timeouts_come_from_the_settings_and_bound_every_request(settings, chroma_server, open_index):
    settings.MEMORYUI_CHROMA_CONNECT_TIMEOUT, settings.MEMORYUI_CHROMA_TIMEOUT = 0.7, 4.0
    index = open_index(chroma_server.url)
    assert (index.connect_timeout, index.timeout) == (0.7, 4.0)
    assert index.count() == 0
    sessions = http_sessions(index._client)
    assert sessions and all(session.timeout == httpx.Timeout(4.0, connect=0.7) for session in sessions)


def test_an_index_first_used_while_the_server_is_down_connects_once_it_is_up(chroma_server, open_index):
    chroma_server.stop()
    index = open_index(chroma_server.url)
    with pytest.raises(IndexUnavailable, match=chroma_server.url):
        index.count()
    chroma_server.start()
    index.upsert([memory(DEPLOY, "We deploy releases to production every Thursday afternoon.")])
    assert index.count() == 1


def test_the_same_index_is_usable_again_after_the_server_restarts(chroma_server, open_index):
    index = open_index(chroma_server.url)
    index.upsert([memory(DEPLOY, "We deploy releases to production every Thursday afternoon.")])
    chroma_server.kill()
    with pytest.raises(IndexUnavailable, match=chroma_server.url):
        index.search("which day do we ship releases", scopes=["agent:main"], k=1)
    chroma_server.start()  # same port, same data
    hits = index.search("which day do we ship releases", scopes=["agent:main"], k=1)
    assert [hit.id for hit in hits] == [DEPLOY]


@pytest.mark.parametrize("value", ["0", "-1", "off"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_at_startup(value, tmp_path):
    env = {**os.environ, "MEMORYUI_DATA_DIR": str(tmp_path), "MEMORYUI_CHROMA_TIMEOUT": value}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    check = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode != 0 and "MEMORYUI_CHROMA_TIMEOUT" in check.stderr
