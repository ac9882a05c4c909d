"""No client can starve the index: the workers `make run` starts (the Procfile's `index` and
`bulk` lines, run as they are, on the embedded broker) keep index updates on a queue and a
worker of their own, so a new memory is searchable within seconds while the bulk worker is
busy with a long extraction and more are queued."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.test_worker_index_sync import ROOT, _environment, _manage

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]

# Each turn of the long transcript holds nothing for L0, so it goes to the (stalling) LLM.
TURNS = 12
STALL_SECONDS = 4.0  # per turn: the extraction runs for close to a minute
INDEXED_WITHIN = 5.0  # seconds from the write's commit (it took 68 s behind 15 extractions)


def procfile(path: Path = ROOT / "Procfile") -> dict[str, str]:
    """A Procfile's processes (`make run`'s, or one of deploy/'s): name -> command."""
    lines = path.read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if line.strip() and not line.startswith("#"))


@contextmanager
def procfile_processes(names: list[str], env: dict, logs: Path, path: Path = ROOT / "Procfile"):
    """Procfile lines run as honcho runs them (`sh -c`, each in its own process group), their
    output in `logs`/<name>.log; all stopped together however the test ends."""
    processes = {}
    try:
        for name in names:
            with (logs / f"{name}.log").open("w") as out:
                processes[name] = subprocess.Popen(
                    ["/bin/sh", "-c", procfile(path)[name]], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
        yield processes
    finally:
        for process in processes.values():
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _rows(data_dir: Path, sql: str) -> list:
    with sqlite3.connect(data_dir / "memoryui.sqlite3") as db:
        return db.execute(sql).fetchall()


def _wait(condition, what: str, timeout: float, workers: dict[str, subprocess.Popen], logs: Path):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        for name, worker in workers.items():
            assert worker.poll() is None, f"the {name} worker died:\n{(logs / f'{name}.log').read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def _write_memory(env: dict, text: str) -> float:
    """Write a memory through the write path in a process of its own; when it committed (its
    index update queued)."""
    code = (
        "import time; from ingest import writing; "
        f"writing.write(actor='test', scope='agent:main', kind='fact', text={text!r}); print(time.time())"
    )
    return float(_manage(env, "shell", "-c", code).split()[-1])


def test_a_new_memory_is_searchable_in_seconds_while_the_bulk_worker_is_busy(tmp_path):
    env = _environment(tmp_path, None)
    _manage(env, "migrate", "-v0")
    with FakeOpenAIServer(stall_seconds=STALL_SECONDS) as llm:
        llm.mode = "stall"
        env.update(MEMORYUI_LLM_BASE_URL=llm.base_url, MEMORYUI_LLM_MODEL="fake", MEMORYUI_L1_TIMEOUT_MS="60000")
        with procfile_processes(["index", "bulk"], env, tmp_path) as workers:
            synced = lambda: not _rows(tmp_path, "SELECT 1 FROM memoryui_indexoutbox")  # noqa: E731
            _write_memory(env, "Warm-up: the index worker has loaded its embedder.")
            _wait(synced, "the warm-up", 120, workers, tmp_path)

            for n in range(2):  # a long extraction running, another queued behind it
                messages = []
                for turn in range(TURNS):
                    content = f"我们第{turn}周要把第{n}号支付服务迁到新机房,负责人是王芳"
                    messages += [{"role": "user", "content": content}, {"role": "assistant", "content": "好的"}]
                path = tmp_path / f"transcript-{n}.json"
                path.write_text(json.dumps({"scope": "agent:main", "messages": messages}), encoding="utf-8")
                assert json.loads(_manage(env, "extract", str(path), "--background", "--json"))["status"] == "queued"
            runs = "SELECT status FROM memoryui_taskrun WHERE kind = 'extract' ORDER BY created_at"
            busy = lambda: [status for (status,) in _rows(tmp_path, runs)] == ["running", "queued"]  # noqa: E731
            _wait(busy, "the extraction to run", 60, workers, tmp_path)

            committed = _write_memory(env, "Deploy key ZX4471 rotates every Friday.")
            _wait(synced, "the index update", 30, workers, tmp_path)
            indexed_after = time.time() - committed

            # The bulk worker was busy all along: still on the first extraction, the second queued.
            assert busy()
            search = ["search", "ZX4471", "--scope", "agent:main", "--retriever", "bm25", "--json"]
            found = json.loads(_manage(env, *search))
            assert [r["text"] for r in found["results"]] == ["Deploy key ZX4471 rotates every Friday."]
            print(f"indexed {indexed_after:.2f} s after its commit, with the bulk worker busy")
            assert indexed_after < INDEXED_WITHIN
