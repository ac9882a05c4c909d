"""Transcript projection (docs/architecture.md "Transcript projection"): trimming, rounds, focus window. No database."""

from __future__ import annotations

import json

import pytest

from ingest.transcripts import FOCUS_ROUNDS, FOCUS_TOKENS, Msg, ToolCall, estimate_tokens, project


def user(text: str = "hello", **extra) -> dict:
    return {"role": "user", "content": text, **extra}


def answer(text: str = "done") -> dict:
    return {"role": "assistant", "content": text}


def call(*ids: str, content: str = "", arguments: str | dict = "{}") -> dict:
    calls = [{"id": call_id, "name": "search", "arguments": arguments} for call_id in ids]
    return {"role": "assistant", "content": content, "tool_calls": calls}


def result(call_id: str, text: str = "ok") -> dict:
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def system(text: str = "agent restarted") -> dict:
    return {"role": "system", "content": text, "channel": "system"}


def transcript(*messages: dict) -> list[Msg]:
    return [Msg.from_dict(index, data) for index, data in enumerate(messages)]


def indexes(messages) -> list[int]:
    return [message.index for message in messages]


def states(projection) -> list[str]:
    return [round_.state for round_ in projection.rounds]


def focused(projection) -> list[int]:
    return [round_.number for round_ in projection.rounds if round_.in_focus]


def test_transcript_ending_in_a_tool_call_without_result_projects_without_it():
    projection = project(transcript(user("find flights"), answer("Sure."), call("c1")))

    assert indexes(projection.messages) == [0, 1]
    assert indexes(projection.trimmed) == [2]
    assert any("trimmed message #2" in note and "c1" in note for note in projection.notes)


def test_chained_dangling_calls_are_trimmed_back_to_the_last_answered_call():
    projection = project(transcript(user(), call("a"), result("a"), call("b"), call("c")))

    assert indexes(projection.trimmed) == [3, 4]
    assert indexes(projection.messages) == [0, 1, 2]
    assert sum("trimmed message" in note for note in projection.notes) == 2


def test_leading_orphan_tool_results_are_kept_and_never_emptied():
    only_orphans = project(transcript(result("x"), result("y")))
    assert indexes(only_orphans.messages) == [0, 1]
    assert indexes(only_orphans.leading) == [0, 1]
    assert only_orphans.trimmed == []
    assert only_orphans.rounds == []

    before_user = project(transcript(result("x"), user(), answer()))
    assert indexes(before_user.leading) == [0]
    assert indexes(before_user.messages) == [0, 1, 2]
    assert any("#0" in note and "no preceding call" in note for note in before_user.notes)


def slack_calls() -> dict:
    calls = [
        {"id": "toolu_post", "name": "mcp__slack__post", "arguments": {"channel": "#ops", "text": "deployed"}},
        {"id": "toolu_lookup", "name": "mcp__slack__lookup", "arguments": {"user": "ada"}},
    ]
    return {"role": "assistant", "content": "Posting and looking up Ada.", "tool_calls": calls}


def test_a_trailing_partly_answered_exchange_is_trimmed_whole_with_its_partial_results():
    projection = project(transcript(user("post it"), slack_calls(), result("toolu_post", "posted")))

    assert indexes(projection.messages) == [0]
    assert indexes(projection.trimmed) == [1, 2]
    assert states(projection) == ["in_flight"]
    call_note = next(note for note in projection.notes if "trimmed message #1" in note)
    assert "partly answered" in call_note and "mcp__slack__lookup (toolu_lookup) has no result" in call_note
    assert any("trimmed message #2" in note and "toolu_post" in note for note in projection.notes)
    assert any("round 1 is in flight" in note and "trimmed" in note for note in projection.notes)


def test_trimming_a_partial_exchange_keeps_the_answered_exchange_before_it():
    projection = project(
        transcript(user("one"), answer(), user("two"), call("a"), result("a"), slack_calls(), result("toolu_lookup"))
    )

    assert indexes(projection.messages) == [0, 1, 2, 3, 4]
    assert indexes(projection.trimmed) == [5, 6]
    assert states(projection) == ["complete", "in_flight"]
    assert projection.round_of(6).number == 2


def test_a_fully_answered_trailing_exchange_is_kept_and_in_flight():
    projection = project(transcript(user(), call("a", "b"), result("b"), result("a")))

    assert projection.trimmed == []
    assert indexes(projection.messages) == [0, 1, 2, 3]
    assert states(projection) == ["in_flight"]


def test_a_partial_exchange_followed_by_anything_but_results_is_kept_and_noted():
    projection = project(transcript(user(), call("a", "b"), result("a"), system()))

    assert projection.trimmed == []
    assert indexes(projection.messages) == [0, 1, 2, 3]
    assert any("#1" in note and "(b)" in note and "kept" in note for note in projection.notes)


def test_trailing_orphan_results_after_a_user_message_are_kept():
    projection = project(transcript(user(), answer(), user("again"), result("x")))

    assert projection.trimmed == []
    assert indexes(projection.messages) == [0, 1, 2, 3]


def test_an_unanswered_call_in_the_middle_stays_and_is_noted():
    projection = project(transcript(user(), call("a"), system(), user("next"), answer()))

    assert projection.trimmed == []
    assert indexes(projection.messages) == [0, 1, 2, 3, 4]
    assert states(projection) == ["interrupted", "complete"]
    assert any("#1" in note and "(a)" in note and "kept" in note for note in projection.notes)


def test_a_round_that_lost_its_trimmed_call_is_in_flight_even_if_what_remains_looks_answered():
    looks_answered = project(transcript(user(), answer("Let me check."), call("a")))
    assert indexes(looks_answered.rounds[0].messages) == [0, 1]
    assert states(looks_answered) == ["in_flight"]
    assert any("round 1 is in flight" in note and "trimmed" in note for note in looks_answered.notes)

    only_the_user_left = project(transcript(user(), call("a")))
    assert indexes(only_the_user_left.messages) == [0]
    assert states(only_the_user_left) == ["in_flight"]


def test_round_states_follow_the_last_tool_exchange_and_the_answer_after_it():
    projection = project(
        transcript(
            user("one"),
            answer(),  # complete: answered, no tools
            user("two"),
            call("a"),
            result("a"),
            answer(),  # complete: answer after the tools
            user("three"),
            answer(),
            call("b"),
            result("b"),  # interrupted: the answer came before the tools, and the user spoke again
            user("four"),
            {"role": "assistant", "content": "  "},  # open: an empty reply is no answer
            user("five"),  # open: only the user spoke
            call("c"),
            result("c"),  # in flight: the last round, no answer after its tools yet
        )
    )

    assert states(projection) == ["complete", "complete", "interrupted", "open", "in_flight"]


def test_only_the_last_round_can_be_in_flight_a_round_the_user_went_on_from_is_interrupted():
    projection = project(
        transcript(
            user("remember that the release job runs on ubuntu-24.04"),
            call("edit"),
            result("edit", "The user doesn't want to proceed with this tool use."),
            user("[Request interrupted by user for tool use]", channel="system", source="internal"),
            user("leave the workflow alone"),
            answer(),
        ),
        focus_rounds=0,
        focus_tokens=0,
    )

    assert states(projection) == ["interrupted", "open", "complete"]
    assert [round_.number for round_ in projection.extractable_rounds] == [1, 2, 3]
    assert [round_.number for round_ in projection.rollup_rounds] == [1, 3]  # an open round is never rolled up
    assert any(note.startswith("round 1 was interrupted") for note in projection.notes)
    assert not any("in flight" in note for note in projection.notes)


def test_a_trailing_round_after_a_rejected_call_stays_in_flight_until_the_user_speaks_again():
    projection = project(transcript(user("one"), answer(), user("two"), call("a"), result("a", "rejected")))

    assert states(projection) == ["complete", "in_flight"]


def test_the_last_round_in_flight_is_excluded_from_extractable_rounds():
    projection = project(transcript(user("one"), answer(), user("two"), call("a"), result("a")))

    assert [round_.number for round_ in projection.extractable_rounds] == [1]


def test_an_open_round_is_extractable_but_not_rolled_up():
    projection = project(transcript(user("one"), answer(), user("my name is Ada")), focus_rounds=0, focus_tokens=0)

    assert [round_.number for round_ in projection.extractable_rounds] == [1, 2]
    assert [round_.number for round_ in projection.rollup_rounds] == [1]


def test_focus_window_is_the_last_three_rounds_by_default():
    long_english = "word " * 6400  # 32,000 characters: 8,000 tokens, so the token floor alone would stop at 1 round
    projection = project(transcript(*[m for _ in range(5) for m in (user(long_english), answer())]))

    assert (FOCUS_ROUNDS, FOCUS_TOKENS) == (3, 8000)
    assert focused(projection) == [3, 4, 5]
    assert [round_.number for round_ in projection.rollup_rounds] == [1, 2]
    assert any("focus window starts at round 3" in note for note in projection.notes)


def test_focus_window_extends_back_until_it_holds_enough_tokens():
    projection = project(transcript(*[m for _ in range(6) for m in (user("short"), answer())]))

    assert focused(projection) == [1, 2, 3, 4, 5, 6]
    assert projection.rollup_rounds == []


def test_cjk_text_fills_the_focus_window_four_times_faster_than_english():
    cjk = project(transcript(*[m for _ in range(10) for m in (user("记" * 2000), answer("好"))]), focus_rounds=1)
    english = project(transcript(*[m for _ in range(10) for m in (user("a" * 2000), answer("ok"))]), focus_rounds=1)

    # 2,000 CJK characters are ~2,000 tokens: 4 rounds reach 8,000; the same length in English is ~500.
    assert focused(cjk) == [7, 8, 9, 10]
    assert cjk.rounds[0].tokens == 2001
    assert english.rounds[0].tokens == 501
    assert len(focused(english)) == 10


def test_tool_call_arguments_count_toward_a_rounds_tokens():
    projection = project(transcript(user("go"), call("a", arguments="x" * 400), result("a"), answer("done")))

    assert projection.rounds[0].tokens == 1 + 100 + 1 + 1


def test_focus_window_is_tunable():
    messages = transcript(*[m for _ in range(5) for m in (user("short"), answer())])

    assert focused(project(messages, focus_rounds=1, focus_tokens=0)) == [5]
    assert focused(project(messages, focus_rounds=0, focus_tokens=0)) == []
    assert focused(project(messages, focus_rounds=2, focus_tokens=3)) == [4, 5]
    assert focused(project(messages, focus_rounds=1, focus_tokens=4)) == [4, 5]  # 3 tokens a round
    with pytest.raises(ValueError):
        project(messages, focus_rounds=-1)


def test_rollup_rounds_exclude_focus_and_in_flight_rounds_and_take_interrupted_ones():
    projection = project(
        transcript(
            user("one"),
            answer(),
            user("two"),
            call("a"),  # round 2 is interrupted: no answer after its call, then the user went on
            user("three"),
            answer(),
            user("four"),
            answer(),
            user("five"),
            call("b"),
            result("b"),  # round 5 is in flight
        ),
        focus_rounds=0,
        focus_tokens=0,
    )

    assert focused(projection) == []
    assert states(projection) == ["complete", "interrupted", "complete", "complete", "in_flight"]
    assert [round_.number for round_ in projection.rollup_rounds] == [1, 2, 3, 4]
    in_focus = project(projection.messages, focus_rounds=2, focus_tokens=0)
    assert [round_.number for round_ in in_focus.rollup_rounds] == [1, 2, 3]


def test_from_dict_dumps_dict_arguments_and_keeps_string_arguments():
    as_dict = Msg.from_dict(3, call("a", arguments={"city": "北京", "days": 2}))
    as_string = Msg.from_dict(4, call("b", arguments="plain words"))

    assert as_dict.index == 3
    assert as_dict.tool_calls == (ToolCall(id="a", name="search", arguments='{"city": "北京", "days": 2}'),)
    assert json.loads(as_dict.tool_calls[0].arguments) == {"city": "北京", "days": 2}
    assert as_string.tool_calls[0].arguments == "plain words"


def test_from_dict_rejects_nothing():
    stored_row = Msg.from_dict(0, {"role": "user", "content": "hi", "tool_call_id": "", "channel": "", "source": ""})
    assert (stored_row.tool_call_id, stored_row.channel, stored_row.source) == (None, None, None)

    bare = Msg.from_dict(1, {})
    assert (bare.role, bare.content, bare.tool_calls) == ("", "", ())

    provider_shape = Msg.from_dict(
        2,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "web", "arguments": {"q": "x"}}}, "garbage"],
        },
    )
    assert provider_shape.content == ""
    assert provider_shape.tool_calls == (
        ToolCall(id="c", name="web", arguments='{"q": "x"}'),
        ToolCall(id="", name="", arguments="garbage"),
    )

    marked = Msg.from_dict(3, user("ping", channel="heartbeat", source="internal"))
    assert (marked.channel, marked.source) == ("heartbeat", "internal")


def test_estimate_tokens_counts_cjk_per_character_and_other_text_per_four_characters():
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("在吗？") == 3
    assert estimate_tokens("我叫Ada") == 3
    assert estimate_tokens("x" * 8000) == 2000
    assert estimate_tokens("字" * 8000) == 8000


def test_round_of_finds_the_round_by_message_index():
    projection = project(transcript(system(), user("one"), answer(), user("two"), call("a")))

    assert projection.round_of(0) is None  # leading
    assert projection.round_of(2).number == 1
    assert projection.round_of(3).number == 2
    assert projection.round_of(4).number == 2  # trimmed, but it was part of round 2
    assert projection.round_of(99) is None
    assert projection.rounds[1].user_message.content == "two"


def test_an_empty_transcript_projects_to_nothing():
    projection = project([])

    assert (projection.messages, projection.trimmed, projection.leading, projection.rounds) == ([], [], [], [])
    assert projection.extractable_rounds == projection.rollup_rounds == []
    assert projection.round_of(0) is None


def test_a_transcript_without_user_messages_is_all_leading():
    projection = project(transcript(system(), answer("scheduled report"), call("a")))

    assert indexes(projection.leading) == [0, 1]
    assert indexes(projection.trimmed) == [2]
    assert projection.rounds == []
    assert projection.round_of(2) is None


def test_system_messages_anywhere_stay_where_they_are():
    projection = project(transcript(system(), user("one"), system(), answer(), system(), user("two"), system()))

    assert indexes(projection.leading) == [0]
    assert [indexes(round_.messages) for round_ in projection.rounds] == [[1, 2, 3, 4], [5, 6]]
    assert states(projection) == ["complete", "open"]
