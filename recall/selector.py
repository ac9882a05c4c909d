"""The model selector: an LLM, behind any OpenAI-compatible endpoint, picks which candidates to recall.

It sees headers only (id, kind, tier, age, first line), the query and the recently used tools,
never whole memories: it chooses, it does not read. Its answer must validate against `ANSWER`,

    {"selected": [{"id": "<a candidate id>", "reason": "<why, a few words>"}, ...]}

sent to the endpoint as a strict structured output (memoryui.llm) and checked on return, and
every id must be one that was offered. Anything else (not JSON, other keys, an id that was not
offered) is refused with a reason naming the first error's JSON path, so that the caller falls
back to the heuristic. The call has a latency budget: past it the caller gets
`SelectorFailed("timeout", ...)` at once and the request is abandoned in a worker thread (its
HTTP timeout is the same budget, so the thread ends soon after).

The caller (recall.pipeline) post-filters the selection with the deterministic active-tool
filter: the instructions below ask the model to skip the same memories, but the protection
must hold when it does not listen.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from django.conf import settings

from memoryui import llm
from memoryui.llm import LLMEndpoint
from memoryui.reasons import Reason
from memoryui.reports import Report

FIRST_LINE_CHARS = 160
MAX_REASON_CHARS = 200
MAX_ANSWER_CHARS = 20_000  # kept in the trace: enough for any valid answer

ANSWER = llm.AnswerSchema(
    "selection",
    {
        "type": "object",
        "properties": {
            "selected": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
                    "required": ["id"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["selected"],
        "additionalProperties": False,
    },
)

INSTRUCTIONS = """\
You choose which stored memories an AI agent should see for its current turn.

You get the user's query, the tools the agent used recently (most recent last) and candidate
memories, each as a header: id, kind, tier, age and first line. Pick the memories that help
answer the query, best first, at most `limit`. Pick none when none helps: recalling nothing
is better than recalling noise.

The agent is in the middle of using the recent tools and already has their live definitions.
Do NOT pick, for a tool in active use: usage references, parameter schemas, field mappings,
guessed call formats, or transcripts of failed calls. They go stale and contradict the live
definition.
DO pick, also for tools in active use: warnings, gotchas, known issues, confirmed
workarounds, ownership, where credentials live, and escalation paths. They are durable.

Answer with JSON only, exactly this shape and nothing else:
{"selected": [{"id": "<candidate id>", "reason": "<why, a few words>"}]}
Use only ids from the candidates."""


@dataclass(frozen=True)
class Header(Report):
    """What the selector sees of one candidate."""

    id: str
    kind: str
    tier: str
    age: str
    first_line: str


@dataclass
class Selection:
    """A valid answer: the chosen ids, best first, each with the model's reason."""

    ids: list[str]
    reasons: dict[str, str]
    raw: str
    elapsed_ms: float
    notices: list[str] = field(default_factory=list)


class SelectorFailed(Exception):
    """The selector gave no usable answer; `code` is one of CODES, the message says why."""

    # Each code with the code of its reason (memoryui.reasons).
    REASONS = {
        "not_configured": "selector_no_endpoint",
        "error": "selector_error",
        "timeout": "selector_timeout",
        "invalid_json": "selector_invalid_json",
        "invalid_answer": "selector_invalid_answer",
    }
    CODES = tuple(REASONS)

    def __init__(self, code: str, message: str, *, raw: str = "", elapsed_ms: float | None = None):
        assert code in self.CODES, code
        self.code, self.raw, self.elapsed_ms = code, raw, elapsed_ms
        super().__init__(message)

    @property
    def reason(self) -> Reason:
        """One line for a trace: "timeout: no answer within 2500 ms"."""
        return Reason(self.REASONS[self.code], message=str(self))


class SelectorConfig(LLMEndpoint):
    """The selector's endpoint: MEMORYUI_LLM_* with the MEMORYUI_SELECTOR_TIMEOUT_MS budget."""

    @classmethod
    def from_settings(cls, timeout_ms: int | None = None) -> SelectorConfig | None:
        return super().from_settings(timeout_ms if timeout_ms is not None else settings.MEMORYUI_SELECTOR_TIMEOUT_MS)


def first_line(text: str, limit: int = FIRST_LINE_CHARS) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def build_messages(query: str, headers: list[Header], tools: list[str], limit: int) -> list[dict]:
    request = {
        "query": query,
        "recent_tools": tools,
        "limit": limit,
        "candidates": [header.to_dict() for header in headers],
    }
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": json.dumps(request, ensure_ascii=False)},
    ]


def parse_answer(raw: str, candidate_ids: list[str], limit: int) -> tuple[list[str], dict[str, str], list[str]]:
    """Validate the model's answer: (ids best first, reasons by id, notices), or SelectorFailed.

    A single ```json fence around the object is tolerated (models add it unasked); the shape
    inside is `ANSWER`'s, and every id one of the candidates. More than `limit` picks are cut to
    the limit and a repeated id counts once, both with a notice: the answer is still usable.
    """
    try:
        answer = ANSWER.parse(raw)
    except llm.AnswerRejected as exc:
        raise SelectorFailed(exc.code, str(exc)) from None
    offered = set(candidate_ids)
    ids: list[str] = []
    reasons: dict[str, str] = {}
    notices: list[str] = []
    for position, pick in enumerate(answer["selected"]):
        pick_id = pick["id"]
        if pick_id not in offered:
            raise SelectorFailed(
                "invalid_answer", f"$.selected[{position}].id: {pick_id[:64]!r} is not one of the candidates"
            )
        if pick_id in reasons:
            notices.append(f"the selector picked {pick_id} twice; counted once")
            continue
        ids.append(pick_id)
        reasons[pick_id] = " ".join(pick.get("reason", "").split())[:MAX_REASON_CHARS]
    if len(ids) > limit:
        notices.append(f"the selector picked {len(ids)} memories; the first {limit} are kept")
        ids = ids[:limit]
    return ids, reasons, notices


# Selector calls run here so that the caller can stop waiting at the budget. Threads are few
# and short-lived: each call's own HTTP timeout is the budget too.
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="memoryui-selector")
        return _pool


class PendingSelection:
    """A selector call under way: `wait()` gives its Selection, or raises SelectorFailed.

    The budget runs from `start()`, so the caller can do other work (the heuristic) meanwhile
    and still wait no longer than the budget in all.
    """

    def __init__(self, future, headers: list[Header], limit: int, config: SelectorConfig, started: float):
        self._future, self._headers, self._limit, self._config, self._started = future, headers, limit, config, started

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self._started) * 1000

    def wait(self) -> Selection:
        budget_ms = self._config.timeout_ms
        remaining = max(0.0, budget_ms - self.elapsed_ms()) / 1000
        try:
            raw = self._future.result(timeout=remaining)
        except FutureTimeout:
            self._future.cancel()
            raise SelectorFailed("timeout", f"no answer within {budget_ms} ms", elapsed_ms=self.elapsed_ms()) from None
        except Exception as exc:  # the SDK's errors: connection, HTTP status, its own timeout
            if llm.is_timeout(exc):
                raise SelectorFailed(
                    "timeout", f"no answer within {budget_ms} ms", elapsed_ms=self.elapsed_ms()
                ) from None
            raise SelectorFailed("error", llm.describe_error(exc), elapsed_ms=self.elapsed_ms()) from None
        raw = raw[:MAX_ANSWER_CHARS]
        try:
            ids, reasons, notices = parse_answer(raw, [header.id for header in self._headers], self._limit)
        except SelectorFailed as exc:
            exc.raw, exc.elapsed_ms = raw, self.elapsed_ms()
            raise
        return Selection(ids=ids, reasons=reasons, raw=raw, elapsed_ms=self.elapsed_ms(), notices=notices)


def start(
    query: str, headers: list[Header], tools: list[str], limit: int, config: SelectorConfig | None
) -> PendingSelection:
    """Send the question to the model and return at once; SelectorFailed when there is no endpoint."""
    if config is None:
        raise SelectorFailed("not_configured", llm.NOT_CONFIGURED)
    client = llm.client(config)
    started = time.perf_counter()
    messages = build_messages(query, headers, tools, limit)
    future = _executor().submit(llm.complete_json, client, config, messages, ANSWER)
    return PendingSelection(future, headers, limit, config, started)


def select(query: str, headers: list[Header], tools: list[str], limit: int, config: SelectorConfig | None) -> Selection:
    """Ask the model which of `headers` to recall; SelectorFailed when it gives no usable answer."""
    return start(query, headers, tools, limit, config).wait()
