"""The guards of the write path (docs/architecture.md "Write path", steps 1 and 5): plain functions, no database.

    source_filter         step 1: who sent the message (role, channel, source marker)
    internal_fingerprint  step 1, second line: leaked internal prompts that carry no marker
    tool_guard            step 5: no tool schemas, call formats or failed-call transcripts;
                          confirmed workarounds and gotchas about a tool's behaviour pass

Step 1 runs on the message before anything is extracted from it; step 5 on every fact
extracted (L0 or L1) before it is written.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from memoryui.rules import normalize_text

# --- step 1: the source filter ----------------------------------------------------------------

NON_USER_SOURCES = ("internal", "banner", "repair", "compaction")
SYSTEM_CHANNELS = ("heartbeat", "cron", "system")


def source_filter(role: str, channel: str | None, source: str | None) -> str | None:
    """Why a message never becomes memory (its role, channel or source), or None."""
    role = (role or "").strip().lower()
    if role != "user":
        return f"{role} message" if role else "message without a role"
    channel = (channel or "").strip().lower()
    if channel in SYSTEM_CHANNELS:
        return f"{channel} channel"
    source = (source or "").strip().lower()
    if source in NON_USER_SOURCES:
        return f"{source} source"
    return None


# Prompts that reach the store with the user role but were written by a harness, a banner or a
# repair loop (docs/architecture.md "Internal prompts leak into memory"). Compared as substrings
# after normalize_text (NFKC, case-fold, whitespace collapse), so width and case do not matter.
DEFAULT_INTERNAL_FINGERPRINTS: tuple[str, ...] = (
    # multi-agent test harnesses and the agents' relay chatter
    "Multi-hop task: delegate",
    "Depth-3 chain test",
    "received the delegation from",
    "多智能体测试",
    # the ask_user preference-collection test prompt
    "ask_user 工具问我",
    # banners and onboarding
    "欢迎使用智能助手",
    "输入 /help 查看可用技能",
    "[Onboarding]",
    "New skills are available",
    # repair loops
    "[repair]",
    "The previous tool call failed because",
    "Repair the call and retry",
    "上一轮的工具调用没有 tool_result",
    # heartbeat and compaction prompts sent with the user role
    "HEARTBEAT_OK",
    "Summarize the conversation above for long-term memory",
)


def internal_fingerprint(text: str, fingerprints: Sequence[str] | None = None) -> str | None:
    """The fingerprint a leaked internal prompt matches, or None (None list = defaults)."""
    haystack = normalize_text(text)
    if not haystack:
        return None
    for fingerprint in DEFAULT_INTERNAL_FINGERPRINTS if fingerprints is None else fingerprints:
        needle = normalize_text(fingerprint)
        if needle and needle in haystack:
            return fingerprint
    return None


# --- step 5: the tool guard -------------------------------------------------------------------
# Live tool definitions are the source of truth; a stored schema or guessed call format goes
# stale and gets recalled while the agent is using that very tool (docs/architecture.md
# "Stale tool knowledge"). Gotchas, warnings and confirmed workarounds are what the store is for.

# A raw dump of a call or a schema is never knowledge, whatever else the text says.
_RAW_DUMPS: tuple[tuple[str, re.Pattern], ...] = (
    ("raw failed-call transcript (traceback)", re.compile(r"traceback \(most recent call last\)", re.I)),
    (
        "raw tool-call transcript",
        re.compile(
            r"\"tool_call_id\"|\"role\"\s*:\s*\"tool\"|</?tool_call>|<function_calls>|tool_use_id|\"arguments\"\s*:\s*[\"{]",
            re.I,
        ),
    ),
    (
        "parameter schema (JSON Schema)",
        re.compile(r"\"type\"\s*:\s*\"object\"|\"properties\"\s*:\s*\{|\"required\"\s*:\s*\[", re.I),
    ),
)
# What names a tool: MCP and server::tool ids, snake_case identifiers, or the word itself.
_TOOL_NAME = re.compile(r"mcp__[\w\-]+__[\w\-]+|\b[\w\-]+::[\w\-]+|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", re.I)
_TOOL_WORD = re.compile(r"\b(?:tool|function|api|endpoint|skill|plugin|command)s?\b|工具|接口|技能|插件|函数", re.I)
# Specific markers only: "调用格式注意事项" is still a call-format note.
_SCHEMA_MARKERS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "guessed call format",
        re.compile(r"\bguess(?:ed|ing)?\b|\bprobably\s+takes\b|\bmight\s+take\b|猜测|猜的|应该是这样调用", re.I),
    ),
    (
        "parameter schema",
        re.compile(
            r"\b(?:param(?:eter)?s?|input|argument)\s+schema\b|\bjson\s+schema\b|\bschema\b"
            r"|参数(?:格式|结构|定义|说明|列表)|入参|出参|请求体格式",
            re.I,
        ),
    ),
    (
        "field mapping",
        re.compile(
            r"\bfield\s+mapping\b|\bfields?\s+maps?\b|\bmaps?\s+(?:to|onto)\s+(?:the\s+)?(?:field|column)|字段(?:映射|对应|对照)|对应字段",
            re.I,
        ),
    ),
    (
        "call format",
        re.compile(
            r"\bcall(?:ing)?\s+(?:format|syntax|signature|convention)\b|\busage\s*:|\bsignature\b"
            r"|\b(?:invoke|call)\s+it\s+(?:as|like|with)\b|\b(?:arguments?|params?|parameters?)\s*:"
            r"|\btakes\s+(?:the\s+)?(?:arguments|parameters|params)\b|\b[a-z]\w*\((?:\w+\s*=|[\"']?\w+[\"']?\s*:)"
            r"|调用(?:格式|方式|方法|示例|语法)|用法\s*:|传参|参数\s*:",
            re.I,
        ),
    ),
    (
        "failed-call transcript",
        re.compile(
            r"\bfailed\s+(?:tool\s+)?call\b|\b(?:tool\s+)?call\s+failed\b|\berror\s+calling\b|\binvalid\s+arguments?\b"
            r"|调用失败|失败(?:的)?调用|参数错误",
            re.I,
        ),
    ),
)
# What makes a tool note durable: a gotcha, a warning, a confirmed workaround, who owns it.
_DURABLE = re.compile(
    r"\b(?:gotcha|warning|caveat|pitfall|beware|known\s+(?:issue|bug|problem|limitation)|workaround|instead"
    r"|owner|owned\s+by|maintainer|escalat\w*|on-?call|credentials?|avoid|don'?t\s+use|do\s+not\s+use)\b"
    r"|[—–\-;]\s*use\b|警告|坑|已知问题|解决办法|解决方法|绕过|改用|换用|负责人|升级路径|凭据|凭证|不要用|别用|避免",
    re.I,
)


def tool_guard(text: str) -> str | None:
    """Why a candidate text must not be stored (it holds a tool name with a parameter schema, field
    mapping, guessed call format or a raw failed-call transcript), or None. Confirmed workarounds
    and gotchas about a tool's behaviour pass ("X returns 500 when page > 10 — use the cursor")."""
    value = unicodedata.normalize("NFKC", text or "")
    for reason, pattern in _RAW_DUMPS:
        if pattern.search(value):
            return reason
    name = _TOOL_NAME.search(value)
    if not name and not _TOOL_WORD.search(value):
        return None
    if _DURABLE.search(value):
        return None
    for marker, pattern in _SCHEMA_MARKERS:
        if pattern.search(value):
            return f"{marker} for tool {name.group()}" if name else f"{marker} of a tool"
    return None
