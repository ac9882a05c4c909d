"""The conversation and multilingual labelled sets (bench/data) stay well formed and as big as promised."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date

import pytest

from tests.recall.labelled import DATA, read

QUESTION_TYPES = {"single_hop", "multi_hop", "temporal", "open_domain", "unanswerable"}
_HAN = re.compile("[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    return json.loads((DATA / "conversation_set.json").read_text(encoding="utf-8"))["conversations"]


def test_the_conversation_set_is_as_big_as_promised(conversations):
    observations = [o for c in conversations for o in c["observations"]]
    questions = [q for c in conversations for q in c["questions"]]
    types = Counter(q["type"] for q in questions)

    assert len(conversations) >= 4 and len(observations) >= 400
    assert len(questions) - types["unanswerable"] >= 200 and types["unanswerable"] >= 40
    assert set(types) == QUESTION_TYPES
    assert {"zh", "mixed"} <= {c["lang"] for c in conversations}


def test_every_observation_has_a_dated_session_and_names_its_speaker(conversations):
    for c in conversations:
        sessions = {s["id"]: date.fromisoformat(s["date"]) for s in c["sessions"]}
        assert list(sessions.values()) == sorted(sessions.values()), c["id"]
        assert len(c["speakers"]) == 2 and c["scope"].startswith("user:")
        for o in c["observations"]:
            assert o["session"] in sessions and o["speaker"] in c["speakers"], o["key"]
            assert 8 <= len(o["text"]) <= 300 and o["lang"] in ("en", "zh"), o["key"]


def test_languages_are_what_each_conversation_says(conversations):
    for c in conversations:
        langs = Counter(o["lang"] for o in c["observations"])
        han = Counter(bool(_HAN.search(o["text"])) for o in c["observations"])
        if c["lang"] == "en":
            assert set(langs) == {"en"} and not han[True], c["id"]
        elif c["lang"] == "zh":
            assert set(langs) == {"zh"} and han[True] == len(c["observations"]), c["id"]
        else:  # mixed: both languages, a third of each at least
            assert min(langs["en"], langs["zh"]) >= len(c["observations"]) / 3, c["id"]


def test_keys_are_unique_and_evidence_exists_in_the_same_conversation(conversations):
    keys = [o["key"] for c in conversations for o in c["observations"]]
    ids = [q["id"] for c in conversations for q in c["questions"]]
    assert len(keys) == len(set(keys)) and len(ids) == len(set(ids))
    for c in conversations:
        own = {o["key"] for o in c["observations"]}
        for q in c["questions"]:
            assert q["type"] in QUESTION_TYPES, q["id"]
            assert set(q["evidence"]) <= own, q["id"]


def test_only_unanswerable_questions_lack_evidence_and_each_says_why(conversations):
    for q in (q for c in conversations for q in c["questions"]):
        if q["type"] == "unanswerable":
            assert q["evidence"] == [] and q["note"], q["id"]
        else:
            assert q["evidence"] and q["answer"], q["id"]
        if q["type"] == "multi_hop":
            assert len(set(q["evidence"])) >= 2, q["id"]


def test_the_multilingual_set_holds_two_small_stores_in_five_languages():
    memories, queries = read("multilingual_set")
    scopes = Counter(m["scope"] for m in memories)
    assert set(scopes) == {"agent:travel", "agent:home"} and all(n <= 30 for n in scopes.values())
    assert {m["lang"] for m in memories} == {"en", "zh", "ja", "ko", "mixed"}
    keys = {m["key"]: m["scope"] for m in memories}
    assert len(keys) == len(memories)
    for q in queries:
        assert all(keys[key] == q["scope"] for key in q["relevant"]), q["id"]
        assert bool(q["relevant"]) == (q["type"] != "unanswerable"), q["id"]
    assert Counter(q["type"] for q in queries)["unanswerable"] >= 10
