"""Typed memory ids: a full id with or without its dashes, or a prefix of at least 8 hex digits (the
short id the pages show), resolved to exactly one memory, optionally within a scope or scopes.
Tombstoned memories resolve too: being tombstoned is something to report, not an unknown id."""

from __future__ import annotations

import uuid

import pytest

from memoryui import memory_ids

pytestmark = pytest.mark.django_db

# Two memories of agent:main whose ids share their first 8 hex digits (and more), one alone, one elsewhere.
TWIN_A = uuid.UUID("37ddb874-0bf0-438b-adb7-9fbd1fd55725")
TWIN_B = uuid.UUID("37ddb874-0bf7-4c1e-8a2b-000000000001")
LONE = uuid.UUID("484be380-73a0-4ce1-a431-66418c13276a")
ELSEWHERE = uuid.UUID("37ddb874-9999-4222-8333-444455556666")


@pytest.fixture
def memories(make_memory) -> dict:
    return {
        "twin_a": make_memory("Deploys go out on Thursdays   at noon.", id=TWIN_A),
        "twin_b": make_memory("The on-call hotline is 400-800-1234 " + "and more words " * 10, id=TWIN_B),
        "lone": make_memory("Prometheus runs at prometheus.internal:9090.", id=LONE),
        "elsewhere": make_memory("Escalate to the ATA team.", scope="agent:other", id=ELSEWHERE),
    }


def refusal(typed: str, **kwargs) -> memory_ids.MemoryIdError:
    with pytest.raises(memory_ids.MemoryIdError) as caught:
        memory_ids.resolve(typed, **kwargs)
    return caught.value


def test_a_unique_short_id_resolves_to_its_memory(memories):
    assert memory_ids.resolve("484be380") == LONE
    assert memory_ids.resolve("  484BE380 ") == LONE


def test_a_full_id_resolves_with_or_without_dashes_in_any_case(memories):
    assert memory_ids.resolve(str(LONE)) == LONE
    assert memory_ids.resolve(LONE.hex) == LONE
    assert memory_ids.resolve(str(LONE).upper()) == LONE


def test_a_longer_prefix_across_a_dash_tells_twins_apart(memories):
    assert memory_ids.resolve("37ddb874-0bf7") == TWIN_B
    assert memory_ids.resolve("37ddb8740bf0") == TWIN_A


def test_an_ambiguous_prefix_lists_its_candidates_by_the_prefix_that_tells_them_apart(memories):
    problem = refusal("37ddb874-0bf", scopes="agent:main")
    assert problem.code == "ambiguous"
    assert [c.id for c in problem.candidates] == [TWIN_A, TWIN_B]
    assert str(problem) == (
        "'37ddb874-0bf' is ambiguous: 2 memories of agent:main start with it: "
        "37ddb874-0bf0 “Deploys go out on Thursdays at noon.”; "
        "37ddb874-0bf7 “The on-call hotline is 400-800-1234 and…”; give more characters"
    )


def test_without_a_scope_limit_the_candidates_say_their_scopes(memories):
    problem = refusal("37ddb874")
    assert problem.code == "ambiguous" and len(problem.candidates) == 3
    assert str(problem).startswith("'37ddb874' is ambiguous: 3 memories start with it: 37ddb874-0bf0 (agent:main) “")
    assert "; 37ddb874-9999 (agent:other) “Escalate to the ATA team.”; give" in str(problem)


def test_an_ambiguous_prefix_lists_a_handful_and_counts_the_rest(make_memory):
    for n in range(memory_ids.CANDIDATES_SHOWN + 2):
        make_memory(f"Fact number {n} about the deploy window.", id=uuid.UUID(f"abcdef12-0000-4000-8000-{n:012d}"))
    problem = refusal("abcdef12")
    assert len(problem.candidates) == memory_ids.CANDIDATES_SHOWN
    assert "7 memories start with it" in str(problem) and "; and 2 more; give more characters" in str(problem)


def test_a_scope_limit_resolves_a_prefix_shared_with_another_scope_and_hides_the_other_scope(memories):
    assert memory_ids.resolve("37ddb874", scopes="agent:other") == ELSEWHERE
    assert memory_ids.resolve("37ddb874-9", scopes=["agent:main", "agent:other"]) == ELSEWHERE
    hidden = refusal(str(LONE), scopes=["agent:other"])
    assert hidden.code == "unknown" and str(hidden) == f"no memory has the id {LONE}"
    assert refusal("484be380", scopes=[]).code == "unknown"


def test_an_unknown_id_or_prefix_says_so(memories):
    assert str(refusal("deadbeef")) == "no memory's id starts with 'deadbeef'"
    unknown = uuid.UUID(int=7)
    assert str(refusal(unknown.hex)) == f"no memory has the id {unknown}"


def test_a_prefix_shorter_than_a_short_id_or_not_hex_is_refused(memories):
    short = refusal("484be38")
    assert short.code == "too_short"
    assert str(short) == "'484be38' is too short: give at least the 8 characters the pages show"
    for typed in ("nonsense", "484be380!", "", str(LONE) + "0", "484be380 73a0"):
        problem = refusal(typed)
        assert problem.code == "malformed", typed
        assert "is not a memory id (a full id, or its first 8 characters)" in str(problem)


def test_a_tombstoned_memory_resolves_and_says_its_status(memories):
    memories["lone"].tombstone("outdated", actor="test")
    match = memory_ids.lookup("484be380")
    assert match.id == LONE and match.status == "tombstoned" and match.short_id == "484be380"


def test_a_tombstoned_candidate_is_marked_in_the_list(memories):
    memories["twin_b"].tombstone("outdated", actor="test")
    assert "37ddb874-0bf7 (tombstoned) “The on-call" in str(refusal("37ddb874-0bf", scopes="agent:main"))


def test_the_scopes_holding_a_prefix_are_listed_within_the_scopes_given(memories):
    assert memory_ids.scopes_holding("37ddb874") == ["agent:main", "agent:other"]
    assert memory_ids.scopes_holding("37ddb874", scopes=["agent:main"]) == ["agent:main"]
    assert memory_ids.scopes_holding("nonsense") == []
