"""The golden-set forms' rules: a query's expected memories by full id or by the 8-character short
id the pages show, resolved within the set's scope; "Should stay silent" ticked (or `none`) for a
query recall should stay silent on, never a blank list alone; every refusal names the id and why."""

from __future__ import annotations

import uuid

import pytest

from recall.models import GoldenSet
from web.forms_recall import GoldenQueryForm, GoldenSetForm

pytestmark = pytest.mark.django_db

# Two memories of agent:main whose ids share their first 8 characters, one elsewhere.
TWIN_A = uuid.UUID("5ab48963-0bf0-538b-adb7-9fbd1fd55725")
TWIN_B = uuid.UUID("5ab48963-77aa-4c1e-8a2b-000000000001")
LONE = uuid.UUID("484be380-73a0-5ce1-a431-66418c13276a")
OTHER = uuid.UUID("9e0c11aa-1111-4222-8333-444455556666")


@pytest.fixture
def golden_set() -> GoldenSet:
    return GoldenSet.objects.create(name="ops", scope="agent:main")


@pytest.fixture
def memories(make_memory) -> dict:
    return {
        "twin_a": make_memory("Deploys go out on Thursdays.", id=TWIN_A),
        "twin_b": make_memory("The on-call hotline is 400-800-1234.", id=TWIN_B),
        "lone": make_memory("Prometheus runs at prometheus.internal:9090.", id=LONE),
        "other": make_memory("Escalate to the ATA team.", scope="agent:other", id=OTHER),
    }


def add(golden_set: GoldenSet, expected: str, **data) -> GoldenQueryForm:
    return GoldenQueryForm(
        {"query": "when do deploys go out", "expected_text": expected, **data}, golden_set=golden_set
    )


def test_none_is_the_same_as_ticking_should_stay_silent(golden_set):
    for spelling in ("none", "None", "  NONE "):
        form = add(golden_set, spelling)
        assert form.is_valid(), form.errors
        assert form.save().expected_ids == []


def test_ticking_should_stay_silent_with_nothing_listed_saves_a_query_expecting_nothing(golden_set):
    form = add(golden_set, "", silent="on")
    assert form.is_valid(), form.errors
    assert form.save().expected_ids == []


def test_a_blank_list_without_the_box_ticked_is_refused_on_the_expected_field(golden_set):
    form = add(golden_set, "  ")
    assert not form.is_valid()
    assert form.errors == {
        "expected_text": [
            "list the memories recall should return, or tick “Should stay silent” if it should return nothing"
        ]
    }


def test_the_box_ticked_with_memories_listed_is_refused_on_the_box(golden_set, memories):
    form = add(golden_set, "484be380", silent="on")
    assert not form.is_valid()
    assert form.errors == {
        "silent": ["a query that should stay silent expects no memories: untick this or clear the list"]
    }
    assert add(golden_set, "none", silent="on").is_valid()


def test_none_together_with_ids_is_refused(golden_set, memories):
    form = add(golden_set, f"none, {LONE}")
    assert not form.is_valid()
    assert form.errors["expected_text"] == [
        "none means recall should return nothing: give it alone, or give memory ids"
    ]


def test_a_short_id_naming_one_memory_of_the_scope_resolves_to_it(golden_set, memories):
    form = add(golden_set, "484be380\n" + str(TWIN_A).upper(), tools_text="mcp__ata__article-list-query")
    assert form.is_valid(), form.errors
    query = form.save()
    assert query.expected_ids == [str(LONE), str(TWIN_A)]
    assert query.tools == ["mcp__ata__article-list-query"]


def test_a_longer_prefix_with_its_dash_tells_twins_apart(golden_set, memories):
    form = add(golden_set, "5ab48963-77")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["expected_text"] == [str(TWIN_B)]


def test_an_ambiguous_short_id_is_refused_naming_the_memories_it_could_be(golden_set, memories):
    form = add(golden_set, "5ab48963")
    assert not form.is_valid()
    [problem] = form.errors["expected_text"]
    assert problem == (
        "'5ab48963' is ambiguous: 2 memories of agent:main start with it: "
        "5ab48963-0 “Deploys go out on Thursdays.”; 5ab48963-7 “The on-call hotline is 400-800-1234.”; "
        "give more characters"
    )


def test_unknown_short_or_malformed_ids_and_other_scopes_are_refused_each_with_its_reason(golden_set, memories):
    form = add(golden_set, f"deadbeef, 484b, nonsense, {str(OTHER)[:8]}, {uuid.UUID(int=7)}")
    assert not form.is_valid()
    assert form.errors["expected_text"] == [
        "no memory's id starts with 'deadbeef'",
        "'484b' is too short: give at least the 8 characters the pages show",
        "'nonsense' is not a memory id (a full id, or its first 8 characters)",
        "'9e0c11aa' is in agent:other, not in this set's scope agent:main",
        f"no memory has the id {uuid.UUID(int=7)}",
    ]


def test_a_tombstoned_memory_cannot_be_expected(golden_set, memories):
    memories["lone"].tombstone("outdated", actor="test")
    form = add(golden_set, "484be380")
    assert not form.is_valid()
    assert form.errors["expected_text"] == [
        "'484be380' is tombstoned: recall never returns it; restore it or expect another"
    ]


def test_the_same_memory_given_twice_is_expected_once(golden_set, memories):
    form = add(golden_set, f"484be380, {LONE}")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["expected_text"] == [str(LONE)]


def test_the_forms_label_their_fields_in_words():
    golden_set = GoldenSet(name="ops", scope="agent:main")
    labels = {name: field.label for name, field in GoldenQueryForm(golden_set=golden_set).fields.items()}
    assert labels == {
        "query": "Query",
        "note": "Note",
        "tools_text": "Recent tools",
        "expected_text": "Expected memories",
        "silent": "Should stay silent",
    }
    assert [field.label for field in GoldenSetForm().fields.values()] == ["Name", "Scope", "Description"]
    assert "none" in GoldenQueryForm(golden_set=golden_set).fields["expected_text"].help_text


def test_a_golden_sets_scope_is_normalized():
    form = GoldenSetForm({"name": "ops", "scope": "ops-bot"})
    assert form.is_valid(), form.errors
    assert form.save().scope == "agent:ops-bot"
