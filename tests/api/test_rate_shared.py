"""One limit, whatever process answers: the counts live in a cache every web process shares, the
embedded default's files in the data dir (api.throttling.FileCache) or Redis, and a call is
counted in one atomic step, so two processes never both take the last place.

Each process is shown here as its own cache client on the same files or the same Redis (a fresh
FileCache or RedisCache object, as each gunicorn worker builds its own), and then as real processes
racing for one count. Rates are set through `settings`; the Redis is a server of the test's own.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import threading

import pytest
from django.core.cache.backends.redis import RedisCache

from api import throttling
from api.throttling import FileCache, admit, hit
from tests.integration.services import PrivateRedis, free_port

TOKEN = "token:1"


@pytest.fixture(autouse=True)
def _rates(settings):
    settings.MEMORYUI_API_RATE = "5/minute"
    settings.MEMORYUI_API_EXPENSIVE_RATE = "2/minute"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with PrivateRedis(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def file_clients(directory) -> tuple[FileCache, FileCache]:
    return FileCache(str(directory), {}), FileCache(str(directory), {})


def redis_clients(url: str) -> tuple[RedisCache, RedisCache]:
    return RedisCache(url, {}), RedisCache(url, {})


@pytest.fixture(params=["files", "redis"])
def clients(request, tmp_path, redis_url):
    pair = file_clients(tmp_path / "cache") if request.param == "files" else redis_clients(redis_url)
    pair[0].clear()
    yield pair
    pair[0].clear()


def test_two_processes_count_one_limit(clients):
    first, second = clients
    answers = [hit(TOKEN, throttling.API, cache=clients[n % 2], now=1000.0 + n) for n in range(5)]
    assert answers == [None] * 5

    assert hit(TOKEN, throttling.API, cache=first, now=1005.0) == 55  # the first call leaves the minute at 1060
    assert hit(TOKEN, throttling.API, cache=second, now=1005.0) == 55
    assert hit("token:2", throttling.API, cache=second, now=1005.0) is None  # another token: its own count
    assert hit(TOKEN, throttling.EXPENSIVE, cache=second, now=1005.0) is None  # another limit: its own count


def test_a_refused_call_is_not_counted_and_the_wait_is_exact(clients):
    first, second = clients
    for n in range(5):
        assert hit(TOKEN, throttling.API, cache=first, now=1000.0 + 10 * n) is None  # at 1000, 1010 … 1040
    for _ in range(20):
        assert hit(TOKEN, throttling.API, cache=second, now=1050.0) is not None

    assert hit(TOKEN, throttling.API, cache=second, now=1059.5) == 1  # 0.5 s, rounded up
    assert hit(TOKEN, throttling.API, cache=first, now=1060.5) is None  # the call at 1000 has left the minute
    assert hit(TOKEN, throttling.API, cache=first, now=1061.0) == 9  # full again until 1070


def racers(cache_of, results) -> None:
    """Forty calls from four threads of one process, the passed ones put in `results`."""
    cache = cache_of()
    passed = []
    threads = [
        threading.Thread(
            target=lambda: passed.extend(hit(TOKEN, throttling.API, cache=cache) is None for _ in range(10))
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(sum(passed))


@pytest.mark.parametrize("kind", ["files", "redis"])
def test_processes_racing_for_the_last_places_never_pass_more_than_the_limit(settings, tmp_path, redis_url, kind):
    settings.MEMORYUI_API_RATE = "50/minute"
    directory = tmp_path / "cache"
    cache_of = (lambda: FileCache(str(directory), {})) if kind == "files" else (lambda: RedisCache(redis_url, {}))
    cache_of().clear()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    processes = [fork.Process(target=racers, args=(cache_of, results)) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)

    assert sum(results.get(timeout=5) for _ in processes) == 50  # of 120 calls, exactly the limit passed
    cache_of().clear()


def test_the_file_cache_culls_expired_logs_before_live_ones(tmp_path):
    cache = FileCache(str(tmp_path / "cache"), {"OPTIONS": {"MAX_ENTRIES": 4}})
    cache.cull_seconds = 0  # look at every write, not every 10 s
    hit(TOKEN, throttling.API, cache=cache)  # a live log, kept for a minute
    for n in range(3):
        cache.set(f"gone-{n}", 1, timeout=-1)  # already expired, never read again

    cache.set("new", 1)  # the fifth entry: over MAX_ENTRIES

    assert cache.get(f"rate:{throttling.API}:{TOKEN}") is not None
    assert cache.get("new") == 1
    assert len(list((tmp_path / "cache").glob("*.djcache"))) == 2  # the three expired ones are gone


def test_a_cache_that_is_away_lets_calls_through_and_says_so_once(caplog):
    away = RedisCache(f"redis://127.0.0.1:{free_port()}/0", {"OPTIONS": {"socket_connect_timeout": 0.5}})
    throttling._cache_trouble_logged = -math.inf  # as if never logged

    with caplog.at_level(logging.WARNING, logger="api.throttling"):
        answers = [hit(TOKEN, throttling.API, cache=away) for _ in range(8)]

    assert answers == [None] * 8
    warnings = [r.getMessage() for r in caplog.records if r.name == "api.throttling"]
    assert len(warnings) == 1 and warnings[0].startswith("rate limits not counted: the cache is unavailable")


def test_admit_keeps_the_calls_of_the_last_period_and_says_when_one_leaves():
    history, wait = admit([900.0, 950.0, 990.0], now=1000.0, calls=2, period=60)
    assert (history, wait) == ([950.0, 990.0], 10.0)  # full: the call at 950 leaves at 1010

    history, wait = admit(history, now=1010.5, calls=2, period=60)
    assert (history, wait) == ([990.0, 1010.5], None)

    assert admit([], now=1000.0, calls=0, period=60) == ([], 60.0)  # `0/minute`: nothing passes
