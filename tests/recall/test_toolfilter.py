"""Active-tool filter (docs/architecture.md "Read path: recall", step 5): suppress a schema note about a tool in use,
keep anything durable about it.

Plain values only: no database, no index.
"""

from __future__ import annotations

import pytest

from recall.toolfilter import (
    DEFAULT_DURABLE_MARKERS,
    DEFAULT_SCHEMA_MARKERS,
    MAX_RECENT_TOOLS,
    ToolFilterDecision,
    active_tool_decision,
    recent_tools,
    tool_aliases,
)

MCP = "mcp__ata__article-list-query"
COLON = "ata::article-list-query"
SCHEMA_NOTE = (
    "Parameter schema and usage reference for article-list-query: page_size int ≤ 50, query string, locale enum"
)
ESCALATION_NOTE = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall"
GOTCHA_NOTE = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty"


# --- recent tools ---------------------------------------------------------------------------------


def test_recent_tools_splits_a_comma_separated_string_and_drops_blanks():
    assert recent_tools(" mcp__web__fetch, ,ata::article-list-query ,") == ["mcp__web__fetch", COLON]


def test_recent_tools_of_nothing_is_empty():
    assert recent_tools(None) == []
    assert recent_tools("") == []


def test_a_repeated_tool_appears_once_at_its_most_recent_position():
    assert recent_tools(["a", "b", "a", "c"]) == ["b", "a", "c"]


def test_repeats_are_recognised_case_insensitively_keeping_the_latest_spelling():
    assert recent_tools(["Fetch", "grep", "fetch"]) == ["grep", "fetch"]


def test_recent_tools_keeps_only_the_last_twenty_most_recent_last():
    tools = [f"tool{i}" for i in range(25)]

    recent = recent_tools(tools)

    assert MAX_RECENT_TOOLS == 20
    assert recent == [f"tool{i}" for i in range(5, 25)]


def test_the_bound_counts_distinct_tools_not_calls():
    tools = [f"tool{i}" for i in range(20)] + ["tool0"] * 5

    assert recent_tools(tools) == [f"tool{i}" for i in range(1, 20)] + ["tool0"]


# --- aliases --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "aliases"),
    [
        (MCP, (MCP, "article-list-query")),
        (COLON, (COLON, "article-list-query")),
        ("Web_Fetch", ("web_fetch",)),
        ("mcp__srv__a__b", ("mcp__srv__a__b", "a__b")),
        ("mcp__", ("mcp__",)),
        ("  ", ()),
    ],
)
def test_tool_aliases_are_the_case_folded_full_name_plus_the_bare_tool_name(tool, aliases):
    assert tool_aliases(tool) == aliases


def test_tool_aliases_fold_full_width_letters():
    assert tool_aliases("ＭＣＰ__ＡＴＡ__Article-List-Query") == (MCP, "article-list-query")


# --- the product scenario -------------------------------------------------------------------------


@pytest.mark.parametrize("tool", [MCP, COLON])
def test_a_schema_note_about_an_active_tool_is_suppressed(tool):
    decision = active_tool_decision(SCHEMA_NOTE, [tool])

    assert decision == ToolFilterDecision(
        suppressed=True,
        tool=tool,
        alias="article-list-query",
        schema_marker="parameter schema",
        reason=f"active tool {tool} + marker 'parameter schema'",
    )


@pytest.mark.parametrize("tool", [MCP, COLON])
def test_an_escalation_path_for_an_active_tool_is_kept(tool):
    decision = active_tool_decision(ESCALATION_NOTE, [tool])

    assert decision.suppressed is False
    assert decision.durable_marker == "escalation"
    assert decision.reason == f"names active tool {tool}, no schema marker"


def test_a_schema_note_that_also_names_a_durable_marker_is_kept_with_the_marker_as_reason():
    text = SCHEMA_NOTE + ". Escalation: page #ata-oncall"

    decision = active_tool_decision(text, [MCP])

    assert decision.suppressed is False
    assert (decision.schema_marker, decision.durable_marker) == ("parameter schema", "escalation")
    assert decision.reason == f"kept: durable marker 'escalation' (active tool {MCP})"


def test_nothing_is_suppressed_when_the_recent_tool_is_unrelated():
    for text in (SCHEMA_NOTE, ESCALATION_NOTE, GOTCHA_NOTE):
        assert active_tool_decision(text, ["mcp__web__fetch"]) == ToolFilterDecision(suppressed=False)


def test_nothing_is_suppressed_without_recent_tools():
    assert active_tool_decision(SCHEMA_NOTE, []) == ToolFilterDecision(suppressed=False)


def test_a_gotcha_for_an_active_tool_is_kept():
    decision = active_tool_decision(GOTCHA_NOTE + "; call format: query first", [MCP])

    assert decision.suppressed is False
    assert decision.durable_marker == "gotcha"


def test_a_chinese_call_format_note_is_suppressed():
    decision = active_tool_decision("article-list-query 的调用格式：先传 query 再传 page_size", [MCP])

    assert decision.suppressed is True
    assert decision.schema_marker == "调用格式"


def test_a_schema_note_titled_with_a_generic_word_for_notes_is_still_a_schema_note():
    chinese = active_tool_decision("调用格式注意事项：article-list-query 的 page_size 不超过 50", [MCP])
    english = active_tool_decision("Notes and tips: call format for article-list-query is query, then page_size", [MCP])

    assert chinese.suppressed is True
    assert english.suppressed is True


def test_a_chinese_durable_marker_keeps_a_chinese_schema_note():
    decision = active_tool_decision("article-list-query 调用格式的坑：page_size 超过 50 会报错", [MCP])

    assert decision.suppressed is False
    assert decision.durable_marker == "坑"


def test_a_tool_named_only_in_the_metadata_counts_as_named():
    text = "Parameter schema: page_size int ≤ 50, query string"

    assert active_tool_decision(text, [MCP]).suppressed is False
    decision = active_tool_decision(text, [MCP], tool_names=["article-list-query"])
    assert decision.suppressed is True
    assert decision.alias == "article-list-query"


def test_metadata_naming_the_same_tool_on_another_server_does_not_count():
    text = "Parameter schema: page_size int ≤ 50"

    assert active_tool_decision(text, [MCP], tool_names=["mcp__other__article-list-query"]).suppressed is False


def test_the_most_recent_named_tool_is_reported():
    text = "Call format for mcp__web__fetch and article-list-query"

    assert active_tool_decision(text, ["mcp__web__fetch", MCP]).tool == MCP


# --- alias boundaries -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mention",
    [
        "article-list-query",
        "Article-List-Query",
        MCP,
        COLON,
        "`article-list-query`",
        "(article-list-query)",
        "调用article-list-query时",
    ],
)
def test_a_whole_token_names_the_tool(mention):
    assert active_tool_decision(f"call format of {mention} here", [MCP]).suppressed is True


@pytest.mark.parametrize(
    "mention",
    [
        "article-list-query-v2",
        "myarticle-list-query",
        "article-list-query_old",
        "mcp__other__article-list-query",
        "article list query",
    ],
)
def test_a_longer_token_containing_the_alias_does_not_name_the_tool(mention):
    assert active_tool_decision(f"call format of {mention} here", [MCP]) == ToolFilterDecision(suppressed=False)


def test_the_full_name_in_the_text_is_reported_as_the_alias_found():
    assert active_tool_decision(f"call format of {MCP}", [MCP]).alias == MCP


def test_a_bare_recent_tool_is_named_by_its_colon_form_but_not_from_inside_an_mcp_name():
    # Whole tokens: "::" separates tokens, while "mcp__ata__article-list-query" is one token of its own.
    assert active_tool_decision(f"call format of {COLON}", ["article-list-query"]).suppressed is True
    assert active_tool_decision(f"call format of {MCP}", ["article-list-query"]).suppressed is False


def test_full_width_text_names_the_tool_and_its_markers():
    text = "ＰＡＲＡＭＥＴＥＲ\u3000ＳＣＨＥＭＡ：ａｒｔｉｃｌｅ－ｌｉｓｔ－ｑｕｅｒｙ"

    decision = active_tool_decision(text, [MCP])

    assert decision.suppressed is True
    assert decision.schema_marker == "parameter schema"


# --- markers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "marker"),
    [
        ("field mappings", "field mapping"),
        ("call-format", "call format"),
        ("call_format", "call format"),
        ("input_schema", "input schema"),
        ("JSON Schemas", "json schema"),
        ("the schema", "schema"),
        ("a guessed format", "guessed"),
        ("two failed calls", "failed call"),
        ("入参", "入参"),
        ("字段映射表", "字段映射"),
    ],
)
def test_schema_markers_match_at_word_starts_with_suffixes_and_any_separator(phrase, marker):
    decision = active_tool_decision(f"article-list-query: {phrase}", [MCP])

    assert decision.suppressed is True
    assert decision.schema_marker == marker


@pytest.mark.parametrize("phrase", ["schematic diagram", "reschema", "recall formats", "param"])
def test_schema_markers_do_not_match_inside_other_words(phrase):
    decision = active_tool_decision(f"article-list-query: {phrase}", [MCP])

    assert decision.suppressed is False
    assert decision.schema_marker is None


@pytest.mark.parametrize(
    ("phrase", "marker"),
    [
        ("owners", "owner"),
        ("ownership", "owner"),
        ("warnings", "warning"),
        ("escalated", "escalate"),
        ("on call", "on-call"),
        ("#ata-oncall", "on-call"),
        ("known issues", "known issue"),
        ("Confirmed workaround", "confirmed workaround"),
        ("API key location", "api key location"),
        ("已知问题", "已知问题"),
        ("密钥位置", "密钥位置"),
    ],
)
def test_durable_markers_keep_a_schema_note(phrase, marker):
    decision = active_tool_decision(f"article-list-query field mapping; {phrase}", [MCP])

    assert decision.suppressed is False
    assert decision.durable_marker == marker


@pytest.mark.parametrize("word", ["note", "notes", "tip", "tips", "注意", "注意事项", "important"])
def test_generic_words_are_not_durable_markers(word):
    assert active_tool_decision(f"article-list-query field mapping ({word})", [MCP]).suppressed is True


def test_default_markers_cover_english_and_chinese():
    for markers in (DEFAULT_SCHEMA_MARKERS, DEFAULT_DURABLE_MARKERS):
        assert any(marker.isascii() for marker in markers)
        assert any(not marker.isascii() for marker in markers)
    assert {"注意", "注意事项", "note", "notes", "tip"}.isdisjoint(DEFAULT_DURABLE_MARKERS)


def test_custom_schema_markers_replace_the_defaults():
    custom = active_tool_decision(SCHEMA_NOTE, [MCP], schema_markers=["quirk table"])
    quirk = active_tool_decision("article-list-query quirk tables", [MCP], schema_markers=["quirk table"])

    assert custom.suppressed is False
    assert quirk.suppressed is True
    assert quirk.schema_marker == "quirk table"


def test_custom_durable_markers_replace_the_defaults():
    text = SCHEMA_NOTE + "; owner: ATA platform team"

    assert active_tool_decision(text, [MCP]).suppressed is False
    assert active_tool_decision(text, [MCP], durable_markers=["runbook"]).suppressed is True
    assert active_tool_decision(text + ", runbook in wiki", [MCP], durable_markers=["runbook"]).suppressed is False


def test_empty_marker_lists_suppress_nothing():
    assert active_tool_decision(SCHEMA_NOTE, [MCP], schema_markers=[]).suppressed is False
