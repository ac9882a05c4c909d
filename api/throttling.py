"""Rate limits, counted per API token when a token made the call, else per signed-in user.

Two limits, both named in settings and read when a call arrives (so `override_settings` and a
changed environment take effect without a restart): every call counts against MEMORYUI_API_RATE;
calls to views marked `throttle_scope = "expensive"` (recall, golden-set runs) also count against
the lower MEMORYUI_API_EXPENSIVE_RATE. The MCP server counts its calls here too, against the same
counts (mcpserver.limits). A refused call is a 429 whose JSON error has the code `throttled` and
whose `Retry-After` header says when to try again; it counts against nothing.

The counts live in Django's default cache, which every web process shares (settings: Redis when
MEMORYUI_CACHE_URL names one, else `FileCache` in the data dir), so a limit is one limit whatever
process answers. Each is a sliding log, as DRF's throttles keep: the times of the caller's calls in
the last period, a call refused when as many as the limit are there already, and told to come back
when the oldest of them leaves the period. Reading the log and adding a call to it is one atomic
step (a Lua script in Redis; an exclusive lock in `FileCache`), so two processes never both take the
last place, and the limit holds exactly: never more calls than it says in any period.

A refusal is not logged one warning each (a flood would write dozens of lines a second): each
process logs one line per period naming how many calls of each caller it refused (`refusals`).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import math
import os
import threading
import time
import uuid

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache
from django.db import DatabaseError
from redis.exceptions import RedisError
from rest_framework.throttling import BaseThrottle

from memoryui.models import ApiToken

logger = logging.getLogger(__name__)

API = "api"
EXPENSIVE = "expensive"
RATE_SETTINGS = {API: "MEMORYUI_API_RATE", EXPENSIVE: "MEMORYUI_API_EXPENSIVE_RATE"}
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
REFUSALS_LOG_SECONDS = 60.0
CACHE_TROUBLE_LOG_SECONDS = 60.0


def token_ident(token: ApiToken) -> str:
    return f"token:{token.pk}"


def caller_ident(request) -> str | None:
    """Who a call is counted against: its token, else its user; None for an anonymous caller."""
    if isinstance(request.auth, ApiToken):
        return token_ident(request.auth)
    if request.user and request.user.is_authenticated:
        return f"user:{request.user.pk}"
    return None


def rate(scope: str) -> tuple[int, int] | None:
    """The limit named `scope` as (calls, seconds), read from settings now; None when it is off."""
    value = getattr(settings, RATE_SETTINGS[scope], None)
    if not value:
        return None
    count, _, period = value.partition("/")
    return int(count), PERIODS[period[0]]


def hit(ident: str, scope: str, cache=None, now: float | None = None) -> int | None:
    """Count a call of `ident` against the limit named `scope`: None when it passes, else the whole
    seconds until a call would pass (the refused call is not counted)."""
    limit = rate(scope)
    if limit is None:
        return None
    calls, period = limit
    cache = caches["default"] if cache is None else cache
    now = time.time() if now is None else now
    try:
        seconds = _record(cache, f"rate:{scope}:{ident}", now, calls, period)
    except (OSError, RedisError, DatabaseError) as exc:  # the cache is away: the call goes through, uncounted
        _cache_trouble(exc)
        return None
    return None if seconds is None else max(1, math.ceil(seconds))


def admit(history: list[float], now: float, calls: int, period: int) -> tuple[list[float], float | None]:
    """The calls of the last period, this one added when there is room for it; and None, or the
    seconds until there is room (when the oldest call that fills it leaves the period)."""
    recent = sorted(t for t in history if t > now - period)
    if len(recent) < calls:
        return [*recent, now], None
    if calls <= 0:
        return recent, float(period)
    return recent, recent[len(recent) - calls] + period - now


REDIS_ADMIT = """
local key, now, period, calls = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
local held = redis.call('ZCARD', key)
if held < calls then
    redis.call('ZADD', key, now, ARGV[4])
    redis.call('EXPIRE', key, period + 1)
    return false
end
if calls <= 0 then
    return tostring(period)
end
local oldest = redis.call('ZRANGE', key, held - calls, held - calls, 'WITHSCORES')
return tostring(tonumber(oldest[2]) + period - now)
"""

_process_lock = threading.Lock()


def _record(cache, key: str, now: float, calls: int, period: int) -> float | None:
    """`admit` on the log kept under `key`, as one atomic step of the cache's kind."""
    if isinstance(cache, RedisCache):
        client = cache._cache.get_client(write=True)
        # A sorted set of the calls' times; members must be distinct, as two calls' times may not be.
        answer = client.eval(REDIS_ADMIT, 1, cache.make_and_validate_key(key), now, period, calls, uuid.uuid4().hex)
        return None if answer is None else float(answer)
    # Any other cache: a read and a write under a lock. FileCache's holds across processes; the
    # others' (Django's memory or database caches) only within one.
    with cache.lock() if isinstance(cache, FileCache) else _process_lock:
        history, seconds = admit(cache.get(key, []), now, calls, period)
        if seconds is None:
            cache.set(key, history, period + 1)
        return seconds


_cache_trouble_logged = -math.inf


def _cache_trouble(exc: Exception) -> None:
    global _cache_trouble_logged
    if time.monotonic() - _cache_trouble_logged >= CACHE_TROUBLE_LOG_SECONDS:
        _cache_trouble_logged = time.monotonic()
        logger.warning("rate limits not counted: the cache is unavailable: %s", exc)


# --- the API's throttles (REST_FRAMEWORK's DEFAULT_THROTTLE_CLASSES) ------------------------------


class ApiRateThrottle(BaseThrottle):
    """Every API call, per token or user (anonymous callers, who only ever get a 401, per address)."""

    scope = API

    def allow_request(self, request, view) -> bool:
        ident = caller_ident(request) or f"ip:{self.get_ident(request)}"
        self.seconds = hit(ident, self.scope)
        return self.seconds is None

    def wait(self) -> int | None:
        return self.seconds


class ExpensiveRateThrottle(ApiRateThrottle):
    """The lower rate of views with `throttle_scope = "expensive"`; other views are not counted here."""

    scope = EXPENSIVE

    def allow_request(self, request, view) -> bool:
        if getattr(view, "throttle_scope", None) != EXPENSIVE:
            self.seconds = None
            return True
        return super().allow_request(request, view)


# --- logging refusals ------------------------------------------------------------------------------


class Refusals:
    """Refused calls counted per caller and logged as one warning per period, once the period that
    began with a refusal has passed, instead of one warning per refusal."""

    def __init__(self, period: float = REFUSALS_LOG_SECONDS):
        self.period = period
        self._counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def note(self, ident: str, channel: str) -> None:
        """One refused call of `ident` over `channel` (`api`, `mcp`)."""
        with self._lock:
            self._counts[ident, channel] += 1
            if self._timer is None:
                self._timer = threading.Timer(self.period, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Log the refusals counted so far, if any, in one line, and start counting afresh."""
        with self._lock:
            counts, self._counts = self._counts, collections.Counter()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if not counts:
            return
        callers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for (ident, channel), n in counts.items():
            callers[ident][channel] = n
        parts = [
            f"{ident} x{sum(seen.values())} ({', '.join(f'{channel} {n}' for channel, n in sorted(seen.items()))})"
            for ident, seen in sorted(callers.items(), key=lambda item: (-sum(item[1].values()), item[0]))
        ]
        logger.warning(
            "rate limits refused calls (429) in the last %g s: %d in all; %s",
            self.period,
            counts.total(),
            ", ".join(parts),
        )


refusals = Refusals()


# --- the embedded default cache ----------------------------------------------------------------------


class FileCache(FileBasedCache):
    """Django's file-based cache with a lock every process can hold (`lock()`: flock on one file in
    the cache's directory), for the rate limits' read-and-write of a caller's log. Readers need none:
    an entry is written to a temporary file and renamed over the old one, so a read sees the one or
    the other, whole. When the directory holds MAX_ENTRIES entries, expired ones go first (Django's
    cull picks at random, which could drop a live log); and it is looked over at most every
    CULL_SECONDS, not at every write as Django's does (listing the directory cost more than the
    write itself)."""

    lock_name = "rates.lock"
    cull_seconds = 10.0
    _culled_at = -math.inf

    @contextlib.contextmanager
    def lock(self):
        self._createdir()
        with open(os.path.join(self._dir, self.lock_name), "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(held, fcntl.LOCK_UN)

    def _cull(self) -> None:
        if time.monotonic() - self._culled_at < self.cull_seconds:
            return
        self._culled_at = time.monotonic()
        filelist = self._list_cache_files()
        if len(filelist) < self._max_entries:
            return
        for fname in filelist:
            with contextlib.suppress(FileNotFoundError), open(fname, "rb") as f:
                self._is_expired(f)  # deletes the file when it is
        super()._cull()
