"""The one way memoryui talks to an LLM: any OpenAI-compatible endpoint (MEMORYUI_LLM_*), JSON answers.

Used by the recall selector and the L1 extractor. Unset MEMORYUI_LLM_BASE_URL or
MEMORYUI_LLM_MODEL means no LLM: callers fall back to their deterministic path and say so.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class LLMEndpoint:
    base_url: str
    model: str
    api_key: str
    timeout_ms: int

    @classmethod
    def from_settings(cls, timeout_ms: int) -> LLMEndpoint | None:
        """The configured endpoint, or None when MEMORYUI_LLM_BASE_URL or _MODEL is unset."""
        if not settings.MEMORYUI_LLM_BASE_URL or not settings.MEMORYUI_LLM_MODEL:
            return None
        return cls(
            base_url=settings.MEMORYUI_LLM_BASE_URL,
            model=settings.MEMORYUI_LLM_MODEL,
            api_key=settings.MEMORYUI_LLM_API_KEY or "not-needed",  # the SDK insists on one
            timeout_ms=timeout_ms,
        )


NOT_CONFIGURED = "no LLM endpoint (set MEMORYUI_LLM_BASE_URL and MEMORYUI_LLM_MODEL)"


@functools.lru_cache(maxsize=8)
def client(endpoint: LLMEndpoint):
    """One client per endpoint and timeout, reused: its connection pool saves a TCP handshake per call.

    The SDK is imported on first use (most processes never call an LLM), and callers with a
    latency budget build the client before the budget starts: importing it takes longer than
    many a model's answer.
    """
    from openai import OpenAI

    return OpenAI(
        base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout_ms / 1000, max_retries=0
    )


def complete_json(llm_client, endpoint: LLMEndpoint, messages: list[dict]) -> str:
    """The model's answer to `messages`, asked for as a JSON object (temperature 0)."""
    response = llm_client.chat.completions.create(
        model=endpoint.model,
        messages=messages,
        temperature=0,
        response_format={"type": "json_object"},
    )
    if not response.choices:
        return ""
    return response.choices[0].message.content or ""


_FENCE_RE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def strip_fence(raw: str) -> str:
    """The answer without one ```json fence around it (models add it unasked)."""
    text = raw.strip()
    fenced = _FENCE_RE.match(text)
    return fenced.group(1).strip() if fenced else text


def describe_error(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if status is not None:
        return f"HTTP {status} from the LLM endpoint ({name})"
    return f"{name}: {str(exc)[:200]}"


def is_timeout(exc: Exception) -> bool:
    return "Timeout" in type(exc).__name__
