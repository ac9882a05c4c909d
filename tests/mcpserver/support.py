"""Running an MCP client session from a test."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio

T = TypeVar("T")


def run_client(session: Callable[[], Awaitable[T]]) -> T:
    """Run an async client session to its end, in a thread of its own: the browser tests' sync
    Playwright keeps an event loop running in the main thread, where anyio.run() would refuse."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, session).result()
