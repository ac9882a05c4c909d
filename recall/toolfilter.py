"""Active-tool filter (docs/architecture.md "Read path: recall", step 5), shared by the model selector and
the heuristic.

An agent that is calling a tool right now already has that tool's live schema in its context; a stored
usage reference, field mapping or guessed call format for it is at best a duplicate and at worst stale.
What it does not have is the experience around the tool: gotchas, confirmed workarounds, owners,
escalation paths, where the credentials live. So a memory is suppressed only when all three hold:
it names a recently used tool (by any alias), it carries a schema-ish marker, and it carries no
durable marker. Everything else is kept.

Plain values only: no database, no index.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from memoryui.reasons import Reason

MAX_RECENT_TOOLS = 20

# Markers are matched in NFKC + case-folded text. English ones match at word starts and tolerate a
# plural or similar suffix ("owner" finds "owners", "ownership"); Chinese ones match anywhere, since
# Chinese has no spaces between words. Only specific words: generic ones such as "note", "tip",
# 注意 or 注意事项 mark nothing, so "调用格式注意事项" stays a schema note.
DEFAULT_SCHEMA_MARKERS: tuple[str, ...] = (
    # en
    "parameter schema",
    "parameters schema",
    "param schema",
    "input schema",
    "json schema",
    "schema",
    "field mapping",
    "call format",
    "calling format",
    "usage reference",
    "usage example",
    "example call",
    "how to call",
    "guessed",
    "failed call",
    "failed attempt",
    "error transcript",
    # zh
    "参数格式",
    "参数说明",
    "调用格式",
    "调用方式",
    "调用示例",
    "字段映射",
    "失败调用",
    "调用失败",
    "猜测的",
    "入参",
)
DEFAULT_DURABLE_MARKERS: tuple[str, ...] = (
    # en
    "gotcha",
    "warning",
    "caution",
    "known issue",
    "known bug",
    "confirmed workaround",
    "workaround",
    "owner",
    "maintainer",
    "escalation",
    "escalate",
    "escalating",
    "on-call",
    "credential",
    "api key location",
    "secret",
    # zh
    "警告",
    "坑",
    "已知问题",
    "解决办法",
    "规避方法",
    "负责人",
    "维护人",
    "升级路径",
    "升级联系人",
    "凭据",
    "密钥位置",
)

# Han, kana and Hangul are letters to Python's \w, but CJK text runs words together ("调用article-list-query时"),
# so a CJK character never extends a Latin token.
_CJK = "\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003134f"
_WORD = rf"[^\W_{_CJK}]"  # a letter or digit outside CJK
_TOKEN = rf"[^\W{_CJK}]|-"  # ... or "_" / "-", which join the parts of a tool name
_SUFFIX = "(?:s|es|d|ed|ing|ship)?"
_SEPARATOR = r"[\s_-]*"


@dataclass(frozen=True)
class ToolFilterDecision:
    """Whether the filter suppresses one memory, and what it found, for traces and the UI."""

    suppressed: bool
    tool: str | None = None  # the recent tool the memory names (as given, full name)
    alias: str | None = None  # the alias found in the memory
    schema_marker: str | None = None
    durable_marker: str | None = None
    reason: str = ""  # a Reason (memoryui.reasons) when the memory names a recent tool


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _clean(tools: Iterable[str] | str | None) -> list[str]:
    if tools is None:
        return []
    if isinstance(tools, str):
        tools = tools.split(",")
    return [name for name in (tool.strip() for tool in tools) if name]


def recent_tools(tools: Iterable[str] | str | None) -> list[str]:
    """Normalized recent-tools list: accepts a list or a comma-separated string; strips, drops empties,
    keeps each tool once at its most recent (last) position, most recent last, bounded to the last 20."""
    latest: dict[str, str] = {}
    for name in _clean(tools):
        key = _normalize(name)
        latest.pop(key, None)  # a repeat moves the tool to the end
        latest[key] = name
    return list(latest.values())[-MAX_RECENT_TOOLS:]


def tool_aliases(tool: str) -> tuple[str, ...]:
    """Case-folded aliases: the full name; for mcp__<server>__<tool> also <tool>; for <server>::<tool> also <tool>."""
    full = _normalize(tool).strip()
    if not full:
        return ()
    aliases = [full]
    if full.startswith("mcp__"):
        server, _, short = full.removeprefix("mcp__").partition("__")
        if server and short:
            aliases.append(short)
    server, separator, short = full.partition("::")
    if separator and server and short:
        aliases.append(short)
    return tuple(dict.fromkeys(aliases))


@cache
def _alias_pattern(alias: str) -> re.Pattern:
    # Whole tokens only: "article-list-query" is not named by "article-list-query-v2" or "myarticle-list-query".
    return re.compile(rf"(?<!{_TOKEN}){re.escape(alias)}(?!{_TOKEN})")


@cache
def _marker_pattern(marker: str) -> re.Pattern:
    if not marker.isascii():
        return re.compile(re.escape(marker))
    words = [re.escape(word) for word in re.split(r"[\s_-]+", marker) if word]
    return re.compile(rf"(?<!{_WORD}){_SEPARATOR.join(words)}{_SUFFIX}(?!{_WORD})")


def _first_marker(normalized: str, markers: Sequence[str]) -> str | None:
    """The marker (as listed) found earliest in the text; at one position the longest wins."""
    found = []
    for marker in markers:
        key = _normalize(marker).strip()
        match = _marker_pattern(key).search(normalized) if key else None
        if match:
            found.append((match.start(), -len(key), marker))
    return min(found)[2] if found else None


def _named_tool(normalized: str, tools: list[str], tool_names: list[str]) -> tuple[str, str] | None:
    """(recent tool, alias) for the most recent tool the memory names, in its text or its metadata."""
    haystacks = [normalized, *(_normalize(name) for name in tool_names)]
    for tool in reversed(tools):
        for alias in tool_aliases(tool):
            if any(_alias_pattern(alias).search(haystack) for haystack in haystacks):
                return tool, alias
    return None


def active_tool_decision(
    text: str,
    tools: Sequence[str],
    *,
    tool_names: Iterable[str] = (),
    schema_markers: Sequence[str] | None = None,
    durable_markers: Sequence[str] | None = None,
) -> ToolFilterDecision:
    """`text` is the memory text (plus entity key/tags if the caller joins them); `tool_names` are tool names
    stored in the memory's metadata (they count as naming the tool too). None markers = the defaults."""
    normalized = _normalize(text)
    named = _named_tool(normalized, _clean(tools), _clean(tool_names))
    if named is None:
        return ToolFilterDecision(suppressed=False)
    tool, alias = named
    schema = _first_marker(normalized, DEFAULT_SCHEMA_MARKERS if schema_markers is None else schema_markers)
    durable = _first_marker(normalized, DEFAULT_DURABLE_MARKERS if durable_markers is None else durable_markers)
    found = {"tool": tool, "alias": alias, "schema_marker": schema, "durable_marker": durable}
    if schema is None:
        return ToolFilterDecision(suppressed=False, reason=Reason("names_active_tool", tool=tool), **found)
    if durable is not None:
        return ToolFilterDecision(suppressed=False, reason=Reason("durable_marker", marker=durable, tool=tool), **found)
    return ToolFilterDecision(suppressed=True, reason=Reason("active_tool_schema", tool=tool, marker=schema), **found)
