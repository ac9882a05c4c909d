"""Running an MCP client session from a test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import anyio

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def environment(data_dir: Path) -> dict:
    """This process's environment for a `manage.py` of a store of its own in `data_dir` (SQLite, tasks eager)."""
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(MEMORYUI_DATA_DIR=str(data_dir), CELERY_TASK_ALWAYS_EAGER="1", OMP_NUM_THREADS="1")
    return env


def manage(env: dict, *args: str) -> str:
    """Run `manage.py` with `env`; what it printed (the test fails, with its stderr, when it fails)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def run_client(session: Callable[[], Awaitable[T]]) -> T:
    """Run an async client session to its end, in a thread of its own: the browser tests' sync
    Playwright keeps an event loop running in the main thread, where anyio.run() would refuse."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, session).result()
