"""Step 3 of the write path, L0 statements (docs/architecture.md "Write path"), and `l0_extract`,
the L0 entry point that runs every L0 rule over one user message. Plain functions, no database,
English and Chinese.

Besides the entities of ingest.extraction.l0_entities, L0 finds:

- Preferences: a cue opens a clause ("I prefer…", "我喜欢/不要…"), and the statement runs on
  over the clauses continuing it. "The user prefers …" / "用户喜欢…"; instructions to the agent
  stay imperative: "Never add Co-Authored-By to commits." / "以后都用中文回答。".
- One narrow world-fact rule: a first-person subject, an operating verb and a counted quantity
  ("we run 1000 RTX 4070s", "我们在 IDC 跑了 1000 张 RTX 4070"), at low confidence.
- Explicit remember requests ("/remember …", "记住…", "…，记一下"): kind `remember` with the
  command stripped; when what is remembered is itself an entity fact it becomes that entity
  (kind `entity`, with its key, `explicit=True`) so entity-key dedup and core placement apply.
  Each other statement is one memory, first person resolved to the user (third_person): "our
  freeze starts on Monday and my manager is Priya" → "The freeze starts on Monday." and "The
  user's manager is Priya.".

Deliberately left to L1 (the LLM extractor): facts about the user's world beyond that one
rule, project state, relationships, procedures, addresses, allergies, habits, "I'm X" /
"我是X" (a name or a job?), and numbers or e-mails without a cue saying whose they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ingest.extraction.l0_entities import Extracted, find_entities, stated_confidence
from ingest.extraction.sentences import (
    CJK,
    FILLER,
    Clause,
    Sentence,
    is_statement,
    prepare,
    sentence_starts,
    size,
    split_sentences,
    statement_spans,
)
from ingest.extraction.third_person import third_person
from memoryui.rules import normalize_text

EXPLICIT = 0.95  # the user asked for it to be remembered
WORLD_FACT = 0.6  # one narrow rule for what is really L1 territory

# Preferences: how the user likes things. A cue opens a clause; the statement runs on over the
# following clauses that are neither noise nor another statement ("I like apples, pears and plums").
_VAGUE_OBJECT = re.compile(
    r"(?:it|this|that|these|those|them|you|this one|that one|it a lot|that a lot|你|它|这个|那个|这样|这些|那些|"
    r"了|紧|管|急|客气|说了)[.!~]*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _PreferenceRule:
    rule: str
    lang: str
    pattern: re.Pattern  # matched at the clause start (after filler); group tail
    confidence: float
    style: str  # "subject": "I like X" → "The user likes X"; "instruction": kept imperative


_EN_SUBJECT_ADVERBS = r"(?:(?:really|strongly|generally|usually|also|much|definitely|do|just|still|always)\s+)*"
_ZH_SUBJECT_ADVERBS = (
    r"(?:比较|更|还是|其实|一般|平时|非常|很|特别|真的|也|都|一直|挺|还挺|最|超|蛮|向来|从来|一向|可能|也许|大概|好像)*"
)

_PREFERENCE_RULES: tuple[_PreferenceRule, ...] = (
    # Standing instructions to the agent: the strongest preferences there are.
    _PreferenceRule(
        "preference (always/never …)",
        "en",
        re.compile(
            r"(?:please\s+)?(?P<head>always|never(?:\s+ever)?|don't\s+ever|do\s+not\s+ever)\s+(?!mind\b|again\b)(?P<tail>\S+\s+\S.*)",
            re.I,
        ),
        0.9,
        "instruction",
    ),
    _PreferenceRule(
        "preference (from now on …)",
        "en",
        re.compile(
            r"(?P<head>from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|henceforth)(?:[\s,]+(?P<tail>.{2,}))?$",
            re.I,
        ),
        0.9,
        "instruction",
    ),
    _PreferenceRule(
        "preference (I want you to always …)",
        "en",
        re.compile(
            r"i(?:\s+want|'d\s+like|\s+would\s+like)\s+you\s+to\s+(?P<head>always|never)\s+(?P<tail>.{2,})", re.I
        ),
        0.9,
        "instruction",
    ),
    # The user describing their taste.
    _PreferenceRule(
        "preference (I prefer …)",
        "en",
        re.compile(rf"i\s+{_EN_SUBJECT_ADVERBS}(?P<verb>prefer)\s+(?P<tail>.{{2,}})", re.I),
        0.85,
        "subject",
    ),
    _PreferenceRule(
        "preference (I like / don't like …)",
        "en",
        re.compile(
            rf"i\s+{_EN_SUBJECT_ADVERBS}(?P<verb>like|love|enjoy|hate|dislike|can't\s+stand|don't\s+like|do\s+not\s+like"
            r"|don't\s+want|do\s+not\s+want|don't\s+enjoy|never\s+use|always\s+use)\s+(?P<tail>.{2,})",
            re.I,
        ),
        0.8,
        "subject",
    ),
    _PreferenceRule(
        "preference (I'd rather …)",
        "en",
        re.compile(r"i(?:'d|\s+would)\s+(?P<verb>rather)\s+(?P<tail>.{2,})", re.I),
        0.8,
        "subject",
    ),
    _PreferenceRule(
        "preference (以后都…)",
        "zh",
        re.compile(
            r"(?:请|麻烦)?(?:你)?(?P<head>(?:以后|今后)(?:都|一律|请|要|别|不要|不用|记得|也都)|从今以后|从现在开始|从现在起)"
            r"[\s,]*(?P<tail>.{2,})?$"
        ),
        0.9,
        "instruction",
    ),
    _PreferenceRule(
        "preference (永远不要…)",
        "zh",
        re.compile(
            r"(?:请)?(?:你)?(?P<head>永远不要|千万不要|千万别|绝对不要|永远别|别再|绝不要?|不准|禁止|不许|永远|始终|每次都|务必)"
            r"(?P<tail>.{2,})"
        ),
        0.9,
        "instruction",
    ),
    _PreferenceRule(
        "preference (不要…)",
        "zh",
        re.compile(r"(?:请)?(?:你)?(?P<head>不要)(?P<tail>.{2,})"),
        0.8,
        "instruction",
    ),
    _PreferenceRule(
        "preference (我更喜欢…)",
        "zh",
        re.compile(
            rf"(?P<subject>我){_ZH_SUBJECT_ADVERBS}(?P<verb>偏好|偏爱|更喜欢|更倾向于?|倾向于?)(?P<tail>.{{2,}})"
        ),
        0.85,
        "subject",
    ),
    _PreferenceRule(
        "preference (我喜欢/不喜欢…)",
        "zh",
        re.compile(
            rf"(?P<subject>我){_ZH_SUBJECT_ADVERBS}(?P<verb>喜欢|习惯|爱|讨厌|不喜欢|不太喜欢|不爱|受不了|反感)(?P<tail>.{{2,}})"
        ),
        0.8,
        "subject",
    ),
)

_THIRD_PERSON = {
    "prefer": "prefers", "like": "likes", "love": "loves", "enjoy": "enjoys", "hate": "hates", "dislike": "dislikes",
    "can't stand": "can't stand", "don't like": "doesn't like", "do not like": "does not like",
    "don't want": "doesn't want", "do not want": "does not want", "don't enjoy": "doesn't enjoy",
    "never use": "never uses", "always use": "always uses", "rather": "would rather",
}  # fmt: skip


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _finish(text: str, lang: str) -> str:
    text = text.strip().rstrip(",;:、。.!~ ")
    if lang == "zh":
        return re.sub(r"\s*,(?!\d)\s*", "，", text) + "。"  # NFKC turned "，" into ","
    return text + "."


def _statement_clauses(sentence: Sentence, first: int, taken: list[tuple[int, int]]) -> int:
    """The end of a statement that opens clause `first` and runs over the clauses continuing it."""
    end = sentence.clauses[first].end
    for clause in sentence.clauses[first + 1 :]:
        overlaps = any(start < clause.end and clause.start < stop for start, stop in taken)
        if clause.category != "other" or overlaps or _preference_match(clause.text) or _world_fact_match(clause.text):
            break
        end = clause.end
    return end


def _preference_match(text: str) -> tuple[_PreferenceRule, re.Match, int] | None:
    offset = FILLER.match(text).end()
    for rule in _PREFERENCE_RULES:
        match = rule.pattern.match(text, offset)
        if match and not _VAGUE_OBJECT.fullmatch((match.group("tail") or "-").strip()):
            return rule, match, offset
    return None


def _open_clauses(sentence: Sentence, taken: list[tuple[int, int]]) -> Iterator[tuple[int, Clause]]:
    """(index, clause) of the clauses a statement may start in: not a question, not overlapping
    a span an earlier rule took."""
    for index, clause in enumerate(sentence.clauses):
        if clause.category != "question" and not any(s < clause.end and clause.start < e for s, e in taken):
            yield index, clause


def _preferences(sentence: Sentence, taken: list[tuple[int, int]]) -> list[tuple[Extracted, int, int]]:
    found = []
    for index, clause in _open_clauses(sentence, taken):
        hit = _preference_match(clause.text)
        if hit is None:
            continue
        rule, match, _ = hit
        if match.group("tail") is not None:
            end = _statement_clauses(sentence, index, taken)
            tail = sentence.text[clause.start + match.start("tail") : end]
        else:  # an opener on its own: "From now on, answer in Chinese" / "从现在开始，用中文回答"
            following = sentence.clauses[index + 1] if index + 1 < len(sentence.clauses) else None
            if following is None or following.category == "question":
                continue
            end = _statement_clauses(sentence, index + 1, taken)
            tail = sentence.text[following.start : end]
        if rule.style == "instruction":
            head = re.sub(r"\s+", " ", match.group("head"))
            if rule.lang == "zh":
                text = head + tail
            elif "from now on" in rule.rule:
                text = _sentence_case(f"{head}, {tail}")  # "From now on, answer in Chinese."
            else:
                text = _sentence_case(f"{head} {tail}")  # "Never add Co-Authored-By to commits."
        elif rule.lang == "en":
            verb = re.sub(r"\s+", " ", match.group("verb").lower())
            text = f"The user {_THIRD_PERSON.get(verb, verb)} {tail}"
        else:
            text = "用户" + sentence.text[clause.start + match.end("subject") : end]
        found.append(
            (
                Extracted(
                    kind="preference",
                    text=_finish(text, rule.lang),
                    confidence=stated_confidence(rule.confidence, sentence, end),
                    entity_key=None,
                    rule=rule.rule,
                ),
                clause.start,
                end,
            )
        )
    return found


# Facts about the user's world are L1 territory. One shape is unambiguous enough for L0: a
# first-person subject operating a counted quantity of something ("我们在 IDC 跑了 1000 张 RTX 4070",
# "we run 1000 RTX 4070s"). Counting questions, minutes and the like is not a fact.
_NOT_ASSETS = (
    r"(?!.*(?:问题|事情|件事|分钟|小时|秒|次|questions?|things?|minutes?|hours?|seconds?|times|issues?|problems?"
    r"|ideas?|options?|days?\b))"
)
_WORLD_FACT_ZH = re.compile(
    r"(?P<subject>我们公司|我们团队|我们|我司|我)(?P<rest>(?:在[^,]{1,20}?)?\s*(?:里|上|中)?\s*"
    r"(?:跑了|跑着|运行着?|部署了|托管了?|维护着?|管理着?|养了|拥有|买了|有)\s*(?:约|大约|大概)?\s*\d[\d,]*\s*(?:多|余)?\s*"
    rf"(?:张|台|块|个|套|条|辆|家|名|位|人|万|千|百|k|K){_NOT_ASSETS}.*)"
)
_WORLD_FACT_EN = re.compile(
    r"(?P<subject>we|i|our team|our company)\s+"
    r"(?P<verb>run|operate|own|maintain|manage|host|have|deployed|bought|built)"
    rf"\s+(?P<rest>(?:about\s+|around\s+|over\s+|roughly\s+|some\s+|nearly\s+)?\d[\d,.]*k?\s+{_NOT_ASSETS}\S.*)",
    re.I,
)
_ZH_SUBJECTS = {
    "我们公司": "用户的公司",
    "我们团队": "用户的团队",
    "我们": "用户的团队",
    "我司": "用户的公司",
    "我": "用户",
}
_EN_SUBJECTS = {
    "we": "The user's team",
    "i": "The user",
    "our team": "The user's team",
    "our company": "The user's company",
}


def _world_fact_match(text: str) -> tuple[str, re.Match, int] | None:
    offset = FILLER.match(text).end()
    for lang, pattern in (("zh", _WORLD_FACT_ZH), ("en", _WORLD_FACT_EN)):
        match = pattern.match(text, offset)
        if match:
            return lang, match, offset
    return None


def _third_person(verb: str) -> str:
    verb = verb.lower()
    if verb == "have":
        return "has"
    if verb.endswith("ed") or verb in {"bought", "built", "ran"}:
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _world_facts(sentence: Sentence, taken: list[tuple[int, int]]) -> list[tuple[Extracted, int, int]]:
    found = []
    for index, clause in _open_clauses(sentence, taken):
        hit = _world_fact_match(clause.text)
        if hit is None:
            continue
        lang, match, _ = hit
        end = _statement_clauses(sentence, index, taken)
        rest = sentence.text[clause.start + match.start("rest") : end]
        if lang == "zh":
            text, rule = _ZH_SUBJECTS[match.group("subject")] + rest, "world fact (我们跑了 N 张…)"
        else:
            subject = _EN_SUBJECTS[re.sub(r"\s+", " ", match.group("subject").lower())]
            text, rule = f"{subject} {_third_person(match.group('verb'))} {rest}", "world fact (we run N …)"
        fact = Extracted("fact", _finish(text, lang), stated_confidence(WORLD_FACT, sentence, end), None, rule)
        found.append((fact, clause.start, end))
    return found


# Explicit remember requests. A leading command ("/remember …", "记住：…", "remember that …") or a
# trailing one ("…，记一下"). "remember to …" is a reminder for later, not knowledge.
_REMEMBER_WORDS_ZH = r"(?:记住|记下来|记下|记一下|记着|牢记|记好)"
_REMEMBER_PREFIX_ZH = r"(?:(?:请|麻烦|你|帮我|给我|替我|要|好好|一定要?|务必|然后|再|并且?)\s*)*"
_REMEMBER_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("explicit remember (/remember)", re.compile(r"/(?:remember|记住)\b[\s:,]*(?P<content>.*)", re.I | re.S)),
    (
        "explicit remember (remember that …)",
        re.compile(
            r"(?:(?:please|pls|hey|ok|okay|and|also)[\s,]+)*(?:remember|keep in mind|don'?t forget|do not forget"
            r"|make a note|note)(?:\s+(?:that|this))?\s*[:,\-]?\s+(?!to\b|me\b|when\b|what\b|how\b|why\b|where\b|who\b"
            r"|if\b|whether\b)(?P<content>.+)",
            re.I | re.S,
        ),
    ),
    (
        "explicit remember (记住…)",
        re.compile(rf"{_REMEMBER_PREFIX_ZH}{_REMEMBER_WORDS_ZH}(?:了|哦|啊|呀|吧)?\s*[:,]?\s*(?P<content>.+)", re.S),
    ),
    (
        "explicit remember (…，记一下)",
        re.compile(
            rf"(?P<content>.+?)[\s,.;!。]*{_REMEMBER_PREFIX_ZH}{_REMEMBER_WORDS_ZH}(?:了|哦|啊|呀|吧|这个|这点|这件事)*[\s.!。~]*",
            re.S,
        ),
    ),
    (
        "explicit remember (…, remember that)",
        re.compile(
            r"(?P<content>.+?)[\s,.;!\-—]*(?:please\s+)?(?:remember\s+(?:that|this|it)|keep\s+(?:that|this|it)\s+in\s+mind"
            r"|note\s+that|don'?t\s+forget(?:\s+(?:that|this|it))?)[\s.!]*",
            re.I | re.S,
        ),
    ),
)


_LEADING_REMEMBER_RULES = 3  # the first three rules put the command first


def _explicit_remember(text: str) -> tuple[str, str, bool] | None:
    """(content, rule, leading): what the user asked to remember, without the command."""
    for index, (rule, pattern) in enumerate(_REMEMBER_RULES):
        match = pattern.fullmatch(text)
        if match and match.group("content").strip():
            return match.group("content").strip(), rule, index < _LEADING_REMEMBER_RULES
    return None


def _later_remember(text: str) -> tuple[int, tuple[str, str, bool]] | None:
    """A remember command that opens a later sentence ("Do that. And remember that …"): where that
    sentence starts, and the request from there on. Only a command put first counts here: a
    trailing one ("…, remember that") already reads the whole message."""
    for start in sentence_starts(text):
        found = _explicit_remember(text[start:])
        if found is not None and found[2]:
            return start, found
    return None


def _from_sentences(text: str) -> list[tuple[Sentence, list[tuple[Extracted, int, int]]]]:
    found = []
    for sentence in split_sentences(text):
        facts = find_entities(sentence)
        facts += _preferences(sentence, [(start, end) for _, start, end in facts])
        facts += _world_facts(sentence, [(start, end) for _, start, end in facts])
        found.append((sentence, facts))
    return found


# An order that is a rule to keep ("Always run the tests.", "不要直接推 main"), not a task for now.
_STANDING_RULE = re.compile(
    r"(?:always|never|don'?t|do not|every\s+time|each\s+time|whenever|before|after|only|make sure"
    r"|永远|总是|始终|每次|不要|别|不能|务必|一定|只|之前|以后)",
    re.I,
)
_JOINING_WORDS = re.compile(r"^(?:(?:and|also|plus)\b[\s,]*)+", re.I)


def _remembered(content: str, rule: str, leading: bool) -> list[Extracted]:
    """What an explicit remember request keeps: its entity facts as entities, each other statement
    as one memory, in the third person ("my manager is Priya" → "The user's manager is Priya.").

    Statements are told apart where a clause or an "and" starts a new subject and verb
    (sentences.statement_spans); what is not a statement of its own stays with the one before.
    Dictated content ("记住：写代码前先跑测试") is kept even when it reads like an order; before a
    trailing command ("…，然后帮我记下来") an order is a task whose result was to be noted. In a
    sentence after the request's first, an order is this turn's task ("Remember that X. Now convert
    Y.") unless it is a rule to keep ("… Never deploy on Fridays."), which is a memory of its own.
    """
    keep = ("other", "request") if leading else ("other",)
    facts, statements = [], []  # statements: [(sentence, [part text, …])]
    for number, (sentence, found) in enumerate(_from_sentences(content)):
        entities = [(fact, start, end) for fact, start, end in found if fact.kind == "entity"]
        for fact, _, _ in entities:
            confidence = max(fact.confidence, stated_confidence(EXPLICIT, sentence, len(sentence.text)))
            facts.append(replace(fact, confidence=confidence, rule=f"{rule}: {fact.rule}", explicit=True))
        for clause in sentence.clauses:
            if clause.category not in keep:
                continue
            if clause.category == "request" and number and not _STANDING_RULE.match(FILLER.sub("", clause.text)):
                continue  # "Remember that X. Now convert Y.": the order after it is this turn's task
            for start, end in statement_spans(sentence.text, clause.start, clause.end):
                part = sentence.text[start:end].strip()
                covered = any(s < end and start < e for _, s, e in entities)
                if covered or size(FILLER.sub("", part, count=1)) < 2:
                    continue
                if number and _STANDING_RULE.match(FILLER.sub("", part)):
                    statements.append((sentence, [part]))  # "… Never deploy on Fridays.": a rule of its own
                elif statements and not (is_statement(part) and is_statement(statements[-1][1][0])):
                    statements[-1][1].append(part)
                else:
                    statements.append((sentence, [_JOINING_WORDS.sub("", part)]))
    lang = "zh" if CJK.search(content) else "en"
    joiner = "，" if lang == "zh" else ", "
    for sentence, parts in statements:
        text = re.sub(r"^(?:that|this)\s+", "", joiner.join(parts), flags=re.I)
        text = _sentence_case(third_person(text))
        confidence = stated_confidence(EXPLICIT, sentence, len(sentence.text))
        facts.append(Extracted("remember", _finish(text, lang), confidence, None, rule, explicit=True))
    return facts


def l0_extract(text: str) -> list[Extracted]:
    """Deterministic extraction from one user message."""
    prepared = prepare(text)
    if not prepared:
        return []
    explicit = _explicit_remember(prepared)
    later = None if explicit is not None else _later_remember(prepared)
    if explicit is not None:
        facts = _remembered(*explicit)
    elif later is not None:
        start, request = later
        facts = [fact for _, found in _from_sentences(prepared[:start]) for fact, _, _ in found]
        facts += _remembered(*request)
    else:
        facts = [fact for _, found in _from_sentences(prepared) for fact, _, _ in found]
    unique: dict[tuple[str, str], Extracted] = {}
    for fact in facts:
        key = (fact.kind, fact.entity_key or normalize_text(fact.text))
        if key not in unique or fact.confidence > unique[key].confidence:
            unique[key] = fact
    return list(unique.values())
