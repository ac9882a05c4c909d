"""Tokenization for the BM25 index and for anything that must agree with it (the heuristic's
field matching, why-not-recalled): `tokenize` is used for both indexing and queries, so they
can never disagree.

- Text is NFKC-normalized and case-folded: "ＲＴＸ４０７０" is "rtx4070".
- CJK text (Han, kana, hangul) is indexed as character bigrams, whatever the language, so any
  two-character substring is searchable; Han runs of three or more characters are also cut
  with jieba and its words of three or more characters added (jieba's two-character words
  are already bigrams; counting them twice would inflate their term frequency).
- No single CJK characters, neither indexed nor queried: one character matches too much to
  be evidence of relevance, and a one-character query must recall nothing
  (docs/architecture.md "Read path: recall", step 1). The price: a lone CJK character between
  other text (a one-syllable Korean word) is not searchable on its own.
- Words of other scripts are kept whole. Identifiers joined by `. _ - : / @` are kept whole
  *and* split: `mcp__ata__article-list-query` gives the whole name, `article-list-query`
  (parts split on `__`, `::`, `/`, `@`, which is how tool aliases and e-mail domains are
  written) and `mcp`, `ata`, `article`, `list`, `query`. An e-mail address gives itself,
  its local part and domain, and their words; a version string `2.7.5` itself and its numbers.
- A word mixing letters and digits in at most three runs is split as well ("rtx4070" gives
  "rtx" and "4070"), so "RTX 4070" finds "RTX4070"; hashes have more runs and stay whole.
- Hex strings of 8–64 characters with letters and digits (commit hashes, sha256) also give
  their 7-character prefix, the short hash git prints: a query with the full hash or its
  short form finds a memory that stores either one.
- Digit groups written with single separators ("186 0000 0000", "186-0000-0000") also give
  the joined number when it has at least 7 digits, so a phone number matches however it is
  spaced, and so does each tail of at least 7 digits ("+86 139 1762 0458" gives 13917620458
  too); "1,000" also gives "1000". Shorter groups ("88 66 99") stay separate numbers.
- English words (ASCII letters only, longer than three) are reduced to their Porter2 stem:
  "painted" finds "paints".
- A small English stop-word list is dropped; never CJK, digits or an identifier's whole form.
- Tokens longer than 128 characters are dropped (blobs, not searchable words).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import jieba
from django.conf import settings
from whoosh.lang.porter2 import stem

from searchindex import concepts

MAX_TOKEN_CHARS = 128

# fmt: off
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do", "does", "for", "from", "had",
    "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of",
    "on", "or", "our", "s", "she", "so", "t", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
    "with", "would", "you", "your",
})
# fmt: on

_HAN = "\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_KANA = "\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
_HANGUL = "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
_CJK_RUN_RE = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")
_HAN_WORDS_RE = re.compile(f"[{_HAN}]{{3,}}")

_JOINERS = r"._\-:/@"
_WORD = r"[^\W_]+"  # letters and digits of any script (CJK runs are cut out before)
_COMPOUND_RE = re.compile(rf"{_WORD}(?:[{_JOINERS}]+{_WORD})*")
_PART_SPLIT_RE = re.compile(r"__+|::+|/+|@")
_ATOM_SPLIT_RE = re.compile(rf"[{_JOINERS}]+")
_LETTER_DIGIT_RUNS_RE = re.compile(r"\d+|[^\W\d_]+")
_HEX_RE = re.compile(r"[0-9a-f]{8,64}")
_DIGIT_GROUPS_RE = re.compile(r"(?<![^\W_])\d+(?:[ ,.\-]\d+){1,5}(?![^\W_])")
_THOUSANDS_RE = re.compile(r"\d{1,3}(?:,\d{3})+")
_MIN_JOINED_DIGITS = 7


def normalize(text: str) -> str:
    """NFKC-normalize and case-fold, the form every token is taken from."""
    return unicodedata.normalize("NFKC", text).casefold()


def tokenize(text: str) -> list[str]:
    """The index terms of `text`, in order (repeats kept: they are term frequency).

    Word tokens first, then one concept token per fact name found (searchindex.concepts).
    """
    text = normalize(text)
    tokens = _word_tokens_of(text)
    tokens.extend(concept for concept, _phrase in concepts.find(text))
    return tokens


def concept_phrases(text: str) -> dict[str, set[str]]:
    """Each concept token of `text` → the word tokens of the phrases that named it.

    A memory that holds the concept answers those words too (for BM25 coverage): "幸运数字"
    is fully answered by "my lucky number is 88", though they share no word.
    """
    found: dict[str, set[str]] = {}
    for concept, phrase in concepts.find(normalize(text)):
        found.setdefault(concept, set()).update(_word_tokens_of(phrase))
    return found


def _word_tokens_of(text: str) -> list[str]:
    tokens: list[str] = []
    start = 0
    for run in _CJK_RUN_RE.finditer(text):
        _latin_tokens(text[start : run.start()], tokens)
        _cjk_tokens(run.group(), tokens)
        start = run.end()
    _latin_tokens(text[start:], tokens)
    return [token for token in tokens if len(token) <= MAX_TOKEN_CHARS]


def _latin_tokens(text: str, out: list[str]) -> None:
    if not text:
        return
    for match in _COMPOUND_RE.finditer(text):
        compound = match.group()
        atoms = _ATOM_SPLIT_RE.split(compound)
        if len(atoms) > 1:
            out.append(compound)
            parts = _PART_SPLIT_RE.split(compound)
            if len(parts) > 1:
                out.extend(part for part in parts if _ATOM_SPLIT_RE.search(part))
        for atom in atoms:
            _word_tokens(atom, out)
    for match in _DIGIT_GROUPS_RE.finditer(text):
        written = match.group()
        if _THOUSANDS_RE.fullmatch(written):
            out.append(re.sub(r"\D", "", written))
            continue
        # Each tail of the groups too: "+86 139 1762 0458" is also 13917620458 without its
        # country code.
        groups = re.findall(r"\d+", written)
        for start in range(len(groups) - 1):
            digits = "".join(groups[start:])
            if len(digits) < _MIN_JOINED_DIGITS:
                break
            out.append(digits)


def _word_tokens(word: str, out: list[str]) -> None:
    if not word or word in STOP_WORDS:
        return
    out.append(_stem(word) if word.isascii() and word.isalpha() else word)
    runs = _LETTER_DIGIT_RUNS_RE.findall(word)
    if 1 < len(runs) <= 3:
        out.extend(run for run in runs if run not in STOP_WORDS)
    if _HEX_RE.fullmatch(word) and not word.isdigit() and not word.isalpha():
        out.append(word[:7])


@lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    """An English word's Porter2 stem: "painted", "painting" and "paints" all match "paint".

    Remembered: a store's words repeat, and stemming was half of tokenizing a memory."""
    return stem(word) if len(word) > 3 else word


def _cjk_tokens(run: str, out: list[str]) -> None:
    out.extend(run[i : i + 2] for i in range(len(run) - 1))
    for han in _HAN_WORDS_RE.findall(run):
        out.extend(word for word in _segmenter().cut_for_search(han) if len(word) >= 3)


_jieba_lock = threading.Lock()
_jieba = None


def _segmenter():
    """jieba's shared tokenizer, initialized once, with its ~9 MB cache in the data directory.

    Loading the default dictionary closes its file (jieba 0.42.1); `load_userdict` and
    `jieba.analyse` leave theirs open (a ResourceWarning), so neither is used here.
    """
    global _jieba
    if _jieba is not None:
        return _jieba
    with _jieba_lock:
        if _jieba is None:
            jieba.setLogLevel(logging.WARNING)  # it logs every load at DEBUG to stderr
            cache_dir = Path(settings.DATA_DIR) / "cache"
            cache_dir.mkdir(parents=True, exist_ok=True)
            jieba.dt.tmp_dir = str(cache_dir)
            jieba.dt.cache_file = "jieba.cache"
            jieba.dt.initialize()
            _jieba = jieba.dt
    return _jieba


def load_segmenter_for(texts: Iterable[str]) -> None:
    """Load jieba now if any of `texts` has Han words to cut (before taking a lock others wait on)."""
    if any(_HAN_WORDS_RE.search(text) for text in texts):
        _segmenter()
