"""The BM25 analyzer: text in any script is searchable, exact tokens survive, English stop words go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchindex.lexical import MemoryTokenizer, tokenize

COMMIT = "3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345"


def test_full_width_latin_is_normalized_and_case_folded():
    assert tokenize("ＲＴＸ４０７０") == tokenize("RTX4070") == tokenize("rtx4070")
    assert "rtx4070" in tokenize("ＲＴＸ４０７０")


def test_letters_and_digits_are_split_so_spacing_does_not_matter():
    assert {"rtx", "4070"} <= set(tokenize("RTX4070"))
    assert {"rtx", "4070"} <= set(tokenize("1000 RTX 4070s"))


def test_chinese_gets_bigrams_and_the_numbers_stay_whole():
    tokens = tokenize("我的幸运数字是88")
    assert {"幸运", "数字", "88"} <= set(tokens)


def test_chinese_words_of_three_characters_come_from_jieba():
    # "大学生" is no bigram: only the segmenter can produce it.
    assert "大学生" in tokenize("北京大学生前来应聘")
    assert "怎么回事" in tokenize("怎么回事")


def test_japanese_and_korean_are_indexed_as_bigrams():
    assert {"東京", "天気"} <= set(tokenize("東京の天気"))
    assert {"서울", "날씨"} <= set(tokenize("서울 날씨"))
    assert {"서울", "울의", "날씨"} <= set(tokenize("서울의 날씨는 맑음"))


def test_a_single_cjk_character_is_never_a_token():
    assert tokenize("在") == []
    assert tokenize("天") == []
    assert tokenize("在吗?") == ["在吗"]
    assert all(len(token) >= 2 for token in tokenize("我的幸运数字是88,東京の天気,서울 날씨"))


def test_a_phone_number_is_one_token_however_it_is_spaced():
    for written in ("18600000000", "186 0000 0000", "186-0000-0000", "电话18600000000"):
        assert "18600000000" in tokenize(written), written


def test_short_number_groups_stay_separate_numbers():
    tokens = tokenize("lucky numbers 88 66 99")
    assert {"88", "66", "99"} <= set(tokens)
    assert "886699" not in tokens


def test_thousands_separators_are_dropped_from_a_number():
    assert "1000" in tokenize("1,000 RTX 4070s")


def test_a_commit_hash_is_kept_whole_with_its_short_form():
    tokens = tokenize(f"pinned to commit {COMMIT.upper()} after the rollback")
    assert COMMIT in tokens
    assert COMMIT[:7] in tokens
    assert tokenize(COMMIT[:7]) == [COMMIT[:7]]


def test_an_email_address_is_kept_whole_and_split():
    tokens = tokenize("Send reports to Alice.Smith@Example.com")
    # the words of an identifier are stemmed like any English word, so "alice" finds them
    assert {"alice.smith@example.com", "alice.smith", "example.com", "alic", "smith", "exampl", "com"} <= set(tokens)


def test_a_tool_name_is_kept_whole_and_split_into_its_parts():
    tokens = tokenize("call mcp__ata__article-list-query with page=1")
    assert {"mcp__ata__article-list-query", "article-list-query", "mcp", "ata", "articl", "list", "queri"} <= set(
        tokens
    )


def test_versions_and_dotted_names_are_kept_whole():
    assert {"whoosh-reloaded", "2.7.5"} <= set(tokenize("Whoosh-Reloaded 2.7.5"))
    assert {"memoryui.settings", "memoryui", "set"} <= set(tokenize("memoryui.settings"))


def test_english_stop_words_are_dropped_but_never_digits_or_cjk():
    tokens = tokenize("What is the user's name? The user is in the IDC with 1 GPU 的")
    assert not {"what", "is", "the", "s", "in", "with"} & set(tokens)
    assert {"user", "name", "idc", "1", "gpu"} <= set(tokens)
    assert tokenize("the of and to") == []


def test_english_words_are_stemmed_so_inflections_match():
    assert tokenize("painted paintings") == ["paint", "paint"]
    assert tokenize("She adopted two puppies") == tokenize("adopt puppy")[:1] + ["two"] + tokenize("puppies")
    assert "4070" in tokenize("RTX4070") and "rtx" in tokenize("RTX4070")  # identifiers keep their parts


def test_a_phone_number_with_a_country_code_also_gives_the_number_without_it():
    tokens = tokenize("+86 139 1762 0458")
    assert {"8613917620458", "13917620458"} <= set(tokens)
    assert tokenize("１３９１７６２０４５８") == ["13917620458"]


def test_the_whoosh_analyzer_gives_the_same_tokens():
    text = "我的幸运数字是88, ＲＴＸ４０７０, alice@example.com"
    assert [token.text for token in MemoryTokenizer()(text)] == tokenize(text)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_jieba_builds_its_cache_in_the_data_dir_and_leaves_no_file_open(tmp_path):
    # A fresh process with an empty data dir: jieba builds its dictionary from scratch.
    env = {**os.environ, "MEMORYUI_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    script = "from searchindex.tokens import tokenize; import gc; print(tokenize('北京大学生前来应聘')); gc.collect()"
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "大学生" in result.stdout
    assert "ResourceWarning" not in result.stderr
    assert "Building prefix dict" not in result.stderr  # jieba's DEBUG chatter is silenced
    assert (tmp_path / "cache" / "jieba.cache").is_file()
