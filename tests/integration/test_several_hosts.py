"""Several hosts, no shared disk, as deploy/ runs them: PostgreSQL, a chromadb server and Redis,
and memoryui processes each with a data dir of its own. A memory written on one host is found by
vector search on another once the index worker (a third host) has synced it, and any host can
verify the indexes.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.integration.services import free_port
from tests.memoryui.test_command_bootstrap_multi_host import ROOT, database, host_env, manage

__all__ = ["database"]  # the fixture, used by name

pytestmark = pytest.mark.e2e

STORE = [
    {"scope": "agent:main", "kind": "fact", "text": "Runs 1000 RTX 4070s in an IDC."},
    {"scope": "agent:main", "kind": "preference", "text": "Prefers terse answers without recaps."},
    {"scope": "agent:main", "kind": "procedure", "text": "Releases ship on Tuesdays after the smoke tests pass."},
]


@contextmanager
def running(command: list[str], env: dict | None, log: Path):
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _chroma_command(path: Path, port: int) -> list[str]:
    binary = Path(sys.executable).with_name("chroma")
    found = str(binary) if binary.exists() else shutil.which("chroma")
    assert found, "the chroma CLI (shipped with the chromadb package) is missing"
    return [found, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.2)


def _pending(database: str) -> int:
    with psycopg.connect(database) as db:
        return db.execute("SELECT COUNT(*) FROM memoryui_indexoutbox").fetchone()[0]


def test_a_write_on_one_host_is_found_by_vector_search_on_another_once_the_index_worker_synced_it(database, tmp_path):
    port = free_port()
    queue = f"memoryui-hosts-{uuid.uuid4().hex[:8]}"

    def host(name: str) -> dict:
        return host_env(
            database,
            tmp_path / name,
            CHROMA_URL=f"http://127.0.0.1:{port}",
            CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
            CELERY_TASK_DEFAULT_QUEUE=queue,
        )

    migrated = manage(host("ops"), "migrate", "-v0")
    assert migrated.returncode == 0, migrated.stderr
    chroma_log, worker_log = tmp_path / "chroma.log", tmp_path / "index-worker.log"
    index_worker = [sys.executable, "-m", "celery", "-A", "memoryui", "worker", "-n", f"index-{queue}@%h"]
    index_worker += ["-Q", f"{queue}.index", "--concurrency", "1", "--loglevel", "WARNING"]
    with (
        running(_chroma_command(tmp_path / "chroma", port), None, chroma_log) as chroma,
        running(index_worker, host("worker"), worker_log) as worker,
    ):
        _wait_for_port(port, chroma, chroma_log)
        store = tmp_path / "store.jsonl"
        store.write_text("".join(json.dumps(line) + "\n" for line in STORE), encoding="utf-8")
        imported = manage(host("web-1"), "import_memories", str(store), "--json")
        assert imported.returncode == 0, imported.stderr
        assert json.loads(imported.stdout)["imported"] == 3

        deadline = time.monotonic() + 180
        while _pending(database):
            assert worker.poll() is None, worker_log.read_text()[-3000:]
            assert time.monotonic() < deadline, worker_log.read_text()[-3000:]
            time.sleep(0.5)

        reader = host("web-2")
        found = manage(
            reader, "search", "how many GPUs", "--scope", "main", "--retriever", "vector", "--no-floor", "--json"
        )
        assert found.returncode == 0, found.stderr
        texts = [hit["text"] for hit in json.loads(found.stdout)["results"]]
        assert sorted(texts) == sorted(line["text"] for line in STORE)

        verified = manage(host("web-3"), "reindex", "--verify", "--json")
        vector = next(d for d in json.loads(verified.stdout)["indexes"] if d["index"] == "vector")
        assert (vector["ok"], vector["entries"]) == (True, 3), vector
