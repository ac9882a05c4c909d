"""The labelled retrieval set (bench/data/retrieval_set.json) is well formed and honest.

The recall benchmark and the floor calibration trust these labels, so a broken key, a
relevant memory in the wrong scope or a lost language mix must fail here, not skew a number.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from memoryui.rules import KINDS, normalize_entity_key, normalize_scope

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "retrieval_set.json"
QUERY_TYPES = ("paraphrase", "exact_token", "keyword", "cross_lingual", "cjk", "unanswerable", "single_cjk_char")
LANGS = ("en", "zh", "ja", "ko")

HAN = re.compile(r"[\u4e00-\u9fff]")
KANA = re.compile(r"[\u3040-\u30ff]")
HANGUL = re.compile(r"[\uac00-\ud7af]")
LATIN_WORD = re.compile(r"[A-Za-z]+")
CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def memories(data) -> dict[str, dict]:
    return {m["key"]: m for m in data["memories"]}


def script_of(text: str) -> str:
    if KANA.search(text):
        return "ja"
    if HANGUL.search(text):
        return "ko"
    han = len(HAN.findall(text))
    if han >= 4 or han > len(LATIN_WORD.findall(text)):  # "林晓" in an English sentence stays English
        return "zh"
    return "en"


def squeezed(text: str) -> str:
    """NFKC, case-folded, without whitespace: how an exact token must survive indexing."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).casefold())


def test_set_is_big_enough(data):
    assert len(data["memories"]) >= 170
    assert len(data["queries"]) >= 110


def test_keys_and_ids_are_unique(data):
    keys = Counter(m["key"] for m in data["memories"])
    ids = Counter(q["id"] for q in data["queries"])
    assert [k for k, n in keys.items() if n > 1] == []
    assert [i for i, n in ids.items() if n > 1] == []


def test_every_memory_is_a_valid_memory(data):
    for memory in data["memories"]:
        assert set(memory) <= {"key", "scope", "kind", "lang", "text", "entity_key", "tags"}, memory["key"]
        assert memory["kind"] in KINDS, memory["key"]
        assert normalize_scope(memory["scope"]) == memory["scope"], memory["key"]
        assert memory["text"].strip() == memory["text"] and memory["text"], memory["key"]
        if "entity_key" in memory:
            assert normalize_entity_key(memory["entity_key"]) == memory["entity_key"], memory["key"]
        assert all(isinstance(tag, str) and tag for tag in memory.get("tags", [])), memory["key"]


def test_entity_keys_are_unique_within_a_scope(data):
    pairs = Counter((m["scope"], m["entity_key"]) for m in data["memories"] if "entity_key" in m)
    assert [pair for pair, n in pairs.items() if n > 1] == []


def test_kinds_are_a_realistic_mix_with_few_notes(data):
    kinds = Counter(m["kind"] for m in data["memories"])
    assert set(kinds) == set(KINDS)
    assert kinds["note"] <= len(data["memories"]) * 0.05


def test_memory_language_labels_match_their_script_and_the_mix_holds(data):
    for memory in data["memories"]:
        assert memory["lang"] in LANGS and script_of(memory["text"]) == memory["lang"], memory["key"]
    langs = Counter(m["lang"] for m in data["memories"])
    total = len(data["memories"])
    assert 0.40 <= langs["en"] / total <= 0.50
    assert 0.35 <= langs["zh"] / total <= 0.45
    assert (langs["ja"] + langs["ko"]) / total >= 0.12
    assert langs["ja"] >= 10 and langs["ko"] >= 10
    assert sum(1 for m in data["memories"] if CJK.search(m["text"])) >= total * 0.5


def test_queries_mix_languages(data):
    scripts = Counter(script_of(q["query"]) for q in data["queries"])
    assert scripts["zh"] >= 25
    assert scripts["ja"] >= 5 and scripts["ko"] >= 5


def test_every_query_type_is_present(data):
    types = Counter(q["type"] for q in data["queries"])
    assert set(types) == set(QUERY_TYPES)
    assert types["paraphrase"] >= 15 and types["exact_token"] >= 15 and types["cross_lingual"] >= 15


def test_every_relevant_memory_exists_and_is_in_the_query_scope(data, memories):
    for query in data["queries"]:
        assert set(query) <= {"id", "query", "scope", "type", "relevant", "note"}, query["id"]
        assert query["type"] in QUERY_TYPES, query["id"]
        assert normalize_scope(query["scope"]) == query["scope"], query["id"]
        assert len(set(query["relevant"])) == len(query["relevant"]), query["id"]
        for key in query["relevant"]:
            assert key in memories, f"{query['id']}: {key} does not exist"
            assert memories[key]["scope"] == query["scope"], f"{query['id']}: {key} is in {memories[key]['scope']}"


def test_only_unanswerable_queries_have_nothing_relevant(data):
    empty = [q for q in data["queries"] if not q["relevant"]]
    assert len(empty) >= 20
    assert sum(1 for q in data["queries"] if q["type"] == "unanswerable") >= 20
    assert all(q["type"] in ("unanswerable", "single_cjk_char") for q in empty)
    assert all(not q["relevant"] for q in data["queries"] if q["type"] in ("unanswerable", "single_cjk_char"))


def test_single_character_queries_are_one_cjk_character(data):
    singles = [q["query"] for q in data["queries"] if q["type"] == "single_cjk_char"]
    assert len(singles) >= 3 and {"的", "我", "是"} <= set(singles)
    assert all(len(s) == 1 and CJK.match(s) for s in singles)


def test_exact_tokens_appear_verbatim_in_every_relevant_memory(data, memories):
    """After NFKC and case folding, so a full-width 'ＲＴＸ４０７０' still names 'RTX 4070'."""
    for query in data["queries"]:
        if query["type"] == "exact_token":
            for key in query["relevant"]:
                assert squeezed(query["query"]) in squeezed(memories[key]["text"]), f"{query['id']} / {key}"
    assert any(q["query"] != unicodedata.normalize("NFKC", q["query"]) for q in data["queries"])


def test_every_in_scope_memory_holding_an_exact_token_is_judged_relevant(data):
    for query in data["queries"]:
        if query["type"] == "exact_token":
            holders = {
                m["key"]
                for m in data["memories"]
                if m["scope"] == query["scope"] and squeezed(query["query"]) in squeezed(m["text"])
            }
            assert holders == set(query["relevant"]), query["id"]


def test_paraphrases_share_no_content_word_with_their_answers(data, memories):
    """Nor with their tags, which the BM25 index also reads."""
    stop = {"what", "when", "which", "where", "does", "with", "from", "that", "this", "your", "have", "should"}

    def stems(text: str) -> set[str]:
        return {w[:5] for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in stop}

    for query in data["queries"]:
        if query["type"] == "paraphrase":
            for key in query["relevant"]:
                memory = memories[key]
                shared = stems(query["query"]) & stems(" ".join([memory["text"], *memory.get("tags", [])]))
                assert not shared, f"{query['id']} shares {shared} with {key}"


def test_out_of_scope_memories_would_match_main_queries(data, memories):
    """Scope distractors: tokens of agent:main exact-token queries also occur in other scopes."""
    others = [m for m in data["memories"] if m["scope"] != "agent:main"]
    assert len(others) >= 10
    leaking = [
        q["id"]
        for q in data["queries"]
        if q["scope"] == "agent:main"
        and q["type"] == "exact_token"
        and any(squeezed(q["query"]) in squeezed(m["text"]) for m in others)
    ]
    assert len(leaking) >= 3
