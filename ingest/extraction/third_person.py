"""First person, resolved: what the user said about themselves, reworded so that a memory reads the
same whoever recalls it, in the style of the L0 statements ("I prefer…" → "The user prefers…").
Plain functions, no database.

    my, mine → the user's       I, me → the user (its verb agreeing: "I am" → "the user is")
    we, us → the user's team     our team / our company → the user's team / company; our X → the X
    我的 → 用户的, 我 → 用户      我们团队 / 我们公司 / 我司 → 用户的团队 / 用户的公司; 我们的X → X; 我们 → 用户的团队

"Bob and I have a cat" keeps its plural verb ("Bob and the user have a cat"): after "and" or
"or" the pronoun is part of a joined subject.
"""

from __future__ import annotations

import re

_ADVERBS = {
    "also", "really", "still", "usually", "always", "never", "often", "sometimes", "just", "only", "already",
    "mostly", "rarely", "generally", "definitely", "actually", "currently", "normally", "typically", "mainly",
    "even", "personally", "seldom", "hardly", "truly", "certainly", "not", "now",
}  # fmt: skip
# Verbs that read the same after "the user": modals and past forms.
_UNCHANGED = {
    "will", "would", "can", "could", "should", "must", "may", "might", "shall", "won't", "can't", "couldn't",
    "wouldn't", "shouldn't", "mustn't", "was", "had", "did", "didn't", "wasn't", "hadn't", "used", "went", "took",
    "made", "got", "said", "saw", "came", "left", "bought", "built", "ran", "sold", "began", "wrote", "met", "found",
    "gave", "knew", "thought", "told", "felt", "kept", "lost", "paid", "sent", "spent", "won", "became", "broke",
    "chose", "drove", "ate", "fell", "flew", "forgot", "grew", "heard", "held", "led", "meant", "quit", "rode",
    "sang", "sat", "slept", "spoke", "stood", "taught", "threw", "understood", "woke", "wore", "brought", "caught",
    "fought", "hung", "shot", "swore", "tore", "dealt", "lent", "bent", "hit",
}  # fmt: skip
_AGREEING = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't",
    "aren't": "isn't", "weren't": "wasn't", "go": "goes",
}  # fmt: skip
_CONTRACTIONS = {"m": "is", "re": "is", "ve": "has", "d": "would", "ll": "will", "s": "is"}
_EN_OWNED_GROUPS = r"team|company|org|organi[sz]ation|startup|department|group|squad"

_EN_PRONOUN = re.compile(
    r"(?<![\w/'’-])(?:"
    r"(?P<subject>I|i|We|we)(?:['’](?P<contraction>m|re|ve|d|ll)\b)?"
    r"|(?P<owner>My|my|Mine|mine)"
    r"|(?P<object>Me|me|Us|us)"
    r"|(?P<reflexive>Myself|myself|Ourselves|ourselves)"
    rf"|(?P<our>Our|our)(?=\s+(?P<group>{_EN_OWNED_GROUPS})\b)?"
    r")(?![\w/'’-]|\.\w)"
)
_WORD = re.compile(r"\s+([A-Za-z][A-Za-z'’]*)")
_JOINED_SUBJECT = re.compile(r"\b(?:and|or|nor)\s*$", re.IGNORECASE)


def _agree(verb: str) -> str:
    """The third-person singular of a present-tense verb after "the user"."""
    lower = verb.lower()
    if lower in _AGREEING:
        return _AGREEING[lower]
    if lower in _UNCHANGED or lower.endswith("ed") or not verb.islower():
        return verb
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _subject_with_verb(text: str, match: re.Match, subject: str) -> tuple[str, int]:
    """The resolved subject and the verb agreeing with it, and where the text goes on after them."""
    contraction = match.group("contraction")
    if contraction:
        return f"{subject} {_CONTRACTIONS[contraction]}", match.end()
    if _JOINED_SUBJECT.search(text[: match.start()]):
        return subject, match.end()
    words, position = [], match.end()
    while word := _WORD.match(text, position):
        position = word.end()
        if word.group(1).lower() in _ADVERBS:
            words.append(word.group(1))
            continue
        words.append(_agree(word.group(1)))
        return " ".join([subject, *words]), position
    return subject, match.end()


def third_person_en(text: str) -> str:
    """English first-person words resolved to the user."""
    parts, position = [], 0
    for match in _EN_PRONOUN.finditer(text):
        parts.append(text[position : match.start()])
        position = match.end()
        if match.group("subject"):
            pronoun = match.group("subject").lower()
            subject = "the user" if pronoun == "i" else "the user's team"
            resolved, position = _subject_with_verb(text, match, subject)
            parts.append(resolved)
        elif match.group("owner"):
            parts.append("the user's")
        elif match.group("object"):
            parts.append("the user" if match.group("object").lower() == "me" else "the user's team")
        elif match.group("reflexive"):
            parts.append("themselves")
        else:
            parts.append("the user's" if match.group("group") else "the")
    parts.append(text[position:])
    return "".join(parts)


_ZH_PRONOUNS = (
    (re.compile(r"(?:我们|咱们)的?(公司|团队)|我司"), lambda m: "用户的" + (m.group(1) or "公司")),
    (re.compile(r"(?:我们|咱们)的"), lambda m: ""),
    (re.compile(r"我们|咱们"), lambda m: "用户的团队"),
    (re.compile(r"(?<!自)我(?:的)?"), lambda m: "用户" + ("的" if m.group().endswith("的") else "")),
)


def third_person_zh(text: str) -> str:
    """Chinese first-person words resolved to the user."""
    for pattern, replacement in _ZH_PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def third_person(text: str) -> str:
    """First-person words resolved to the user, in English and Chinese."""
    return third_person_zh(third_person_en(text))
