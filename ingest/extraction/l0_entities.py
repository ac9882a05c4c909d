"""Step 3 of the write path, L0 entities (docs/architecture.md "Write path"): the values a user
states about themselves or someone named, typed and keyed. Plain functions, no database, English
and Chinese.

`Extracted` is what every extractor (L0 and L1) hands to the write path. The entity rules here
find names, phone numbers, e-mail addresses, ID numbers, birthdays, lucky numbers and license
plates; ingest.extraction.l0_statements finds preferences, world facts and remember requests
and runs them all (`l0_extract`).

- Only with a cue saying whose the value is: "my", "我(的)", "用户的" (the user), "Bob's",
  "王芳的" (someone named, lower confidence). Pronouns and groups ("his", "我们的") leave the
  owner unknown and the value is not taken; a value in a question is not taken either.
- Texts are one self-contained third-person statement in the language of the rule that
  fired. English: "The user's <fact> is <value>.". Chinese: "用户的<fact>是<value>。" (a space
  before a value starting with a Latin letter or digit: "用户的手机号是 18600000000。"). Values
  are written in their canonical form (phone digits, ISO dates) so the exact token is searchable.
- Entity keys are `type:value`: `name:<casefolded, spaces→->` (`name:li-dongsheng`, `name:东升`),
  `phone:<digits>` (a Chinese mobile without +86/0086; other numbers keep their country code,
  without "+"), `email:<lower-case>`, `id_number:<upper-case>`, `birthday:YYYY-MM-DD`
  (`birthday:--MM-DD` when no year is given), `lucky_number:<numbers joined by ->` in the order
  stated (`lucky_number:88-66-99`), `license_plate:<upper-case, no spaces>`.
- Hedged statements ("maybe", "可能") are less certain: confidence says how sure the writer was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from ingest.extraction.sentences import EDGE_PUNCTUATION, FILLER, Sentence
from memoryui.rules import KINDS


@dataclass(frozen=True)
class Extracted:
    """One typed fact found in a user message."""

    kind: str  # one of rules.KINDS, never "note"
    text: str  # one self-contained statement (conventions in the module docstrings)
    confidence: float  # 0..1
    entity_key: str | None  # `type:value`, valid for rules.normalize_entity_key
    rule: str  # which rule fired, shown in the UI
    explicit: bool = False  # the user asked to remember it

    def __post_init__(self):
        if self.kind not in KINDS or self.kind == "note":
            raise ValueError(f"L0 does not write kind {self.kind!r}")


SELF_STATEMENT = 0.9  # the user stating their own identity or contact details
OTHER_PERSON = 0.8  # "王芳的电话是…": stated by the user, about someone else

# Hedged statements are less certain: confidence says how sure the writer was
# (docs/architecture.md "Tier and importance").
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i believe|not sure|might|kind of|sort of)\b"
    r"|可能|也许|大概|好像|应该是|我觉得|估计|或许|不确定",
    re.IGNORECASE,
)
HEDGE_PENALTY = 0.25

# Owners of a stated value. The user: "my", "我(的)", "用户的". Someone named: "Bob's", "王芳的".
# Pronouns and groups ("his", "我们的") leave the owner unknown, and the fact is not taken.
_EN_OWNER = r"(?P<owner>(?i:my|the user's)|[A-Z][a-z]+(?: [A-Z][a-z]+)?'s)\s+"
_ZH_OWNER = r"(?P<owner>我的?|本人的?|用户的?|(?<![\u3400-\u9fff])(?:(?!的)[\u3400-\u9fff]){2,3}的)\s*"
_EN_SEP = r"(?P<sep>\s*(?:\b(?:is|are|was)\b|:|=)\s*|\s+)"
_EN_DATE_SEP = r"(?P<sep>\s*(?:\b(?:is|was|falls on|on)\b|:|=)\s*|\s+)"
_ZH_SEP = r"(?P<sep>\s*(?:是|为|叫|:|=)\s*|\s*)"
_USER_OWNERS = {"my", "the user's", "我", "我的", "本人", "本人的", "用户", "用户的"}
_UNKNOWN_OWNERS = {"我们", "你们", "他们", "她们", "它们", "咱们", "大家", "自己", "别人", "对方"}
_NOT_NAMES = {"today", "tomorrow", "yesterday", "everyone", "someone", "it", "that", "this", "what", "who", "there"}
_BAD_PREFIX_ZH = set("的你他她它们")  # "你的名字是…", "他手机号是…": not the user's


@dataclass(frozen=True)
class _EntityRule:
    """A stated value: cue (with an optional owner), separator, value; canon gives key and display."""

    key: str
    rule: str
    lang: str
    pattern: re.Pattern
    canon: str  # name of the canonicalizer in _CANON
    confidence: float = SELF_STATEMENT
    template: str = ""  # overrides the "<owner> <label> is <value>" sentence


def _en(cue: str, value: str, sep: str = _EN_SEP) -> str:
    return rf"(?:{_EN_OWNER})?(?i:{cue}){sep}(?P<value>{value})"


def _zh(cue: str, value: str) -> str:
    return rf"(?:{_ZH_OWNER})?(?:{cue}){_ZH_SEP}(?P<value>{value})"


# A Chinese mobile first (so "138 0013 8000 12点" stops at the number), then any 7-15 digits.
_PHONE = r"(?:(?:\+|00)\s?86[\s-]?)?1[3-9]\d(?:[\s-]?\d){8}(?!\d)|\+?\(?\d[\d\s\-()]{5,22}\d"
_EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
# 18 characters: region, birth date, sequence, check character (X for 10).
_ID_NUMBER = (
    r"(?<![\dA-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![\dA-Za-z])"
)
_MONTH_NAMES = (
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"), ("november", "nov"),
    ("december", "dec"),
)  # fmt: skip
_MONTH_NUMBERS = {name: number for number, names in enumerate(_MONTH_NAMES, 1) for name in names}
_MONTHS = "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))
_DATE = (
    r"\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}\s*[日号]?"
    r"|\d{1,2}\s*月\s*\d{1,2}\s*[日号]"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?i:{_MONTHS})\b\.?(?:,?\s+\d{{4}})?"
    rf"|(?i:{_MONTHS})\b\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"
)
_NUMBERS = r"\d+(?:(?:\s*(?:,|、|/|和|跟|与|及|以及|&|\band\b|\bor\b)\s*|\s+)\d+)*"
_PLATE_ZH = r"[\u3400-\u9fff][A-Za-z]\s?[·.-]?\s?[A-Za-z0-9]{5,6}(?![A-Za-z0-9])"
_PLATE_EN = r"[A-Za-z0-9]{1,4}[\s-]?[A-Za-z0-9]{2,5}(?![A-Za-z0-9])"

# A name: Latin words (later ones capitalized: "Li Dongsheng", not "Bob and"), or 2-4 CJK
# characters ended by punctuation or a particle ("我叫东升以后就这么叫我" → 东升).
_EN_NAME = r"[A-Za-z\u3400-\u9fff][\w'\-]*(?:\s+(?!I\b)[A-Z][\w'\-]*){0,2}"
_ZH_NAME = (
    r"(?![了过着他她你它人车起吃去来回上下])(?:[\u3400-\u9fff·]{2,4}?"
    r"(?=$|[\s,.!?;:、。~]|以后|就|吧|啊|呀|哦|哈|嘛|了|好了|便|即可|今年|是|在|来自|住|的|我|你)"
    r"|[A-Za-z][A-Za-z'\-]*(?:\s[A-Z][A-Za-z'\-]*){0,2})"
)

_ENTITY_RULES: tuple[_EntityRule, ...] = (
    # Names: the user naming themselves; "call me X" only when nothing follows ("call me back").
    _EntityRule("name", "name (my name is …)", "en", re.compile(_en(r"(?:full |first )?name", _EN_NAME)), "name"),
    _EntityRule(
        "name",
        "name (call me …)",
        "en",
        re.compile(
            rf"(?P<me>(?i:(?:you can |please |just )?call me|i'm called|i am called))\s+(?P<value>{_EN_NAME})"
            r"(?=\s*(?:$|[,.!;]|(?i:please|from now on|instead|going forward|thanks)))"
        ),
        "name",
        0.85,
        "The user wants to be called {value}.",
    ),
    _EntityRule("name", "name (我叫…)", "zh", re.compile(rf"(?P<me>我)(?P<sep>叫)(?P<value>{_ZH_NAME})"), "name"),
    _EntityRule("name", "name (我的名字是…)", "zh", re.compile(_zh(r"(?:名字|姓名|全名)", _ZH_NAME)), "name"),
    _EntityRule(
        "name",
        "name (叫我…就行)",
        "zh",
        re.compile(
            rf"(?P<me>(?:你可以|可以|以后|请|大家都|都|就)叫我)(?P<value>{_ZH_NAME})"
            r"|(?P<me2>叫我)(?P<value2>[\u3400-\u9fff]{2,4}?)(?=就行|就好|就可以|就成|好了|吧)"
        ),
        "name",
        0.85,
        "用户希望被称呼为{value}。",
    ),
    # Phone numbers: only with a cue saying whose ("给 186… 打电话" names someone else's).
    _EntityRule(
        "phone",
        "phone number",
        "en",
        re.compile(
            _en(r"(?:phone|mobile|cell(?: ?phone)?|telephone)(?: number| no\.?)?", _PHONE)
            + rf"|(?P<me2>(?i:my))\s+(?i:number)\s*(?:(?i:\bis\b)|:)\s*(?P<value2>{_PHONE})"
            + rf"|(?P<me3>(?i:reach me|call me|text me|contact me))\s+(?i:at|on)\s+(?P<value3>{_PHONE})"
        ),
        "phone",
    ),
    _EntityRule(
        "phone",
        "phone number (手机号)",
        "zh",
        re.compile(_zh(r"手机号码|手机号|手机|电话号码|联系电话|电话|联系方式", _PHONE)),
        "phone",
    ),
    # E-mail addresses: the same rule, a cue says whose.
    _EntityRule(
        "email",
        "e-mail address",
        "en",
        re.compile(
            _en(r"e-?mail(?: address)?|mail address", _EMAIL)
            + rf"|(?P<me2>(?i:reach me|email me|mail me|contact me|write to me))\s+(?i:at|on)\s+(?P<value2>{_EMAIL})"
        ),
        "email",
    ),
    _EntityRule(
        "email",
        "e-mail address (邮箱)",
        "zh",
        re.compile(_zh(r"邮箱地址|邮箱|电子邮件地址|电子邮件|邮件地址|电邮|e-?mail", _EMAIL)),
        "email",
    ),
    # Chinese resident ID numbers: 18 characters with a valid birth date inside.
    _EntityRule(
        "id_number",
        "ID number",
        "en",
        re.compile(
            _en(r"(?:national |resident )?id(?: card)?(?: number| no\.?)?|identity card(?: number)?", _ID_NUMBER)
        ),
        "id_number",
    ),
    _EntityRule(
        "id_number",
        "ID number (身份证)",
        "zh",
        re.compile(_zh(r"身份证号码|身份证号|身份证件号|身份证", _ID_NUMBER)),
        "id_number",
    ),
    # Birthdays: a cue and a date; "I was born on …" / "我1988年12月12日出生" name the user.
    _EntityRule(
        "birthday",
        "birthday",
        "en",
        re.compile(
            _en(r"birthday|date of birth|dob|birth ?date", _DATE, _EN_DATE_SEP)
            + rf"|(?P<me2>(?i:i was born|i am born|i'm born))\s+(?i:on\s+|in\s+)?(?P<value2>{_DATE})"
        ),
        "birthday",
    ),
    _EntityRule(
        "birthday",
        "birthday (生日)",
        "zh",
        re.compile(
            _zh(r"生日|出生日期|出生年月日", _DATE)
            + rf"|(?P<me2>我)(?:是|在|于)?\s*(?P<value2>{_DATE})\s*(?:出生|生)"
            + rf"|(?P<me3>我)(?:出生于|出生在|生于)\s*(?P<value3>{_DATE})"
        ),
        "birthday",
    ),
    # Stated values: a named value the user wants known. Add a row per new value type.
    _EntityRule("lucky_number", "lucky number", "en", re.compile(_en(r"lucky numbers?", _NUMBERS)), "numbers"),
    _EntityRule(
        "lucky_number",
        "lucky number (幸运数字)",
        "zh",
        re.compile(_zh(r"幸运数字|幸运号码|吉祥数字|幸运数", _NUMBERS)),
        "numbers",
    ),
    _EntityRule(
        "license_plate",
        "license plate",
        "en",
        re.compile(_en(r"(?:car |licen[cs]e )?plate(?: number)?|licen[cs]e plate", _PLATE_EN)),
        "plate",
    ),
    _EntityRule(
        "license_plate", "license plate (车牌)", "zh", re.compile(_zh(r"车牌号码|车牌号|车牌", _PLATE_ZH)), "plate"
    ),
)

_LABELS = {
    "name": ("name", "名字"),
    "phone": ("phone number", "电话"),
    "email": ("e-mail address", "邮箱"),
    "id_number": ("ID number", "身份证号"),
    "birthday": ("birthday", "生日"),
    "lucky_number": ("lucky number", "幸运数字"),
    "license_plate": ("license plate", "车牌号"),
}


# Words that follow "call me" / "my name is" without being a name ("call me back", "is not").
_NAME_STOPWORDS = {
    "back", "later", "when", "if", "tomorrow", "tonight", "now", "asap", "at", "on", "in", "after", "before",
    "sometime", "again", "maybe", "please", "a", "an", "the", "any", "anytime", "soon", "whenever", "whatever",
    "anything", "up", "once", "today", "that", "this", "it", "out", "not", "also", "still", "unknown", "secret",
    "irrelevant", "none", "what", "who", "something", "crazy",
}  # fmt: skip


def _canon_name(raw: str) -> tuple[str, str] | None:
    value = raw.strip(EDGE_PUNCTUATION)
    if not value or value.casefold() in _NOT_NAMES or value.casefold().split()[0] in _NAME_STOPWORDS:
        return None
    if re.search(r"什么|啥|谁|多少|哪", value):
        return None
    return "-".join(value.casefold().split()), value


def _canon_phone(raw: str) -> tuple[str, str] | None:
    digits = re.sub(r"\D", "", raw)
    international = raw.lstrip().startswith("+") or digits.startswith("00")
    digits = digits[2:] if digits.startswith("00") else digits
    if international and digits.startswith("86") and re.fullmatch(r"861[3-9]\d{9}", digits):
        digits, international = digits[2:], False
    if not 7 <= len(digits) <= 15:
        return None
    return digits, ("+" + digits if international else digits)


def _canon_email(raw: str) -> tuple[str, str] | None:
    return raw.lower(), raw


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def id_number_checksum_ok(value: str) -> bool:
    """GB 11643: the 18th character checks the first 17."""
    total = sum(int(digit) * weight for digit, weight in zip(value[:17], _ID_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == value[17].upper()


def _canon_id_number(raw: str) -> tuple[str, str] | None:
    value = raw.upper()
    if _valid_date(int(value[6:10]), int(value[10:12]), int(value[12:14])) is None:
        return None
    return value, value


_DATE_PARTS = (
    re.compile(r"(?P<y>\d{4})\s*[-/.年]\s*(?P<m>\d{1,2})\s*[-/.月]\s*(?P<d>\d{1,2})"),
    re.compile(r"(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})"),
    re.compile(rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTHS})\.?(?:,?\s+(?P<y>\d{{4}}))?", re.I),
    re.compile(rf"(?P<mon>{_MONTHS})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{{4}}))?", re.I),
)


def _valid_date(year: int | None, month: int, day: int) -> date | None:
    try:
        return date(year or 2000, month, day)  # 2000 is a leap year: 02-29 without a year is fine
    except ValueError:
        return None


def _canon_date(raw: str) -> tuple[str, str] | None:
    for pattern in _DATE_PARTS:
        match = pattern.match(raw.strip())
        if not match:
            continue
        parts = match.groupdict()
        month = _MONTH_NUMBERS[parts["mon"].lower()] if parts.get("mon") else int(parts["m"])
        year = int(parts["y"]) if parts.get("y") else None
        day = int(parts["d"])
        found = _valid_date(year, month, day)
        if found is None or (year is not None and not 1900 <= year <= date.today().year):
            return None
        value = found.isoformat() if year else f"--{month:02d}-{day:02d}"
        return value, value
    return None


def _canon_numbers(raw: str) -> tuple[str, str] | None:
    numbers = re.findall(r"\d+", raw)
    return "-".join(numbers), " ".join(numbers)


def _canon_plate(raw: str) -> tuple[str, str] | None:
    value = re.sub(r"[\s·.\-]", "", raw).upper()
    if not re.search(r"\d", value) or len(value) < 4:
        return None
    return value, value


_CANON = {
    "name": _canon_name,
    "phone": _canon_phone,
    "email": _canon_email,
    "id_number": _canon_id_number,
    "birthday": _canon_date,
    "numbers": _canon_numbers,
    "plate": _canon_plate,
}


def _group(match: re.Match, name: str) -> tuple[str | None, int]:
    """The first of name, name2, name3 that took part in the match, and where it starts."""
    for suffix in ("", "2", "3"):
        key = name + suffix
        if key in match.re.groupindex and match.group(key) is not None:
            return match.group(key), match.start(key)
    return None, -1


def _owner_of(match: re.Match, sentence: Sentence, rule: _EntityRule) -> tuple[bool, str | None]:
    """(usable, owner): owner None is the user. Unowned cues need a separator or a clause start."""
    if _group(match, "me")[0] is not None:
        return True, None  # the cue itself names the user: "我叫", "call me", "I was born"
    owner, _ = _group(match, "owner")
    if owner is not None:
        owner = owner.strip()
        if owner.casefold() in _USER_OWNERS:
            return True, None
        bare = owner.removesuffix("的").removesuffix("'s")
        if bare in _UNKNOWN_OWNERS or bare.casefold() in _NOT_NAMES:
            return False, None
        return True, bare
    before = sentence.text[: match.start()].rstrip()
    if rule.lang == "zh":
        if before and before[-1] in _BAD_PREFIX_ZH:
            return False, None
        has_sep = bool((match.groupdict().get("sep") or "").strip())
        return has_sep or _at_clause_start(before), None
    return _at_clause_start(before), None


def _at_clause_start(before: str) -> bool:
    tail = re.split(r"[,;:、]", before)[-1]
    return not tail.strip() or FILLER.fullmatch(tail.strip() + " ") is not None


def _render(rule: _EntityRule, owner: str | None, display: str, key_value: str) -> str:
    english, chinese = _LABELS[rule.key]
    plural = rule.key == "lucky_number" and "-" in key_value
    if rule.key == "lucky_number":
        parts = display.split()
        if rule.lang == "en":
            display = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        else:
            display = parts[0] if len(parts) == 1 else "、".join(parts[:-1]) + " 和 " + parts[-1]
    if rule.key == "phone" and re.fullmatch(r"1[3-9]\d{9}", key_value):
        chinese = "手机号"
    if rule.key == "birthday" and key_value.startswith("--"):
        month, day = int(key_value[2:4]), int(key_value[5:7])
        display = f"{month}月{day}日" if rule.lang == "zh" else f"{date(2000, month, day):%B} {day}"
    if rule.lang == "zh":
        spaced = " " + display if display[:1].isascii() else display
        if rule.template:
            return rule.template.format(value=display)
        return f"{owner or '用户'}的{chinese}是{spaced}。"
    if rule.template:
        return rule.template.format(value=display)
    whose = f"{owner}'s" if owner else "The user's"
    label = english + "s" if plural else english
    return f"{whose} {label} {'are' if plural else 'is'} {display}."


def stated_confidence(base: float, sentence: Sentence, end: int) -> float:
    """`base`, lowered when the sentence hedges before `end`."""
    if _HEDGE.search(sentence.text[:end]):
        base -= HEDGE_PENALTY
    return round(min(max(base, 0.05), 1.0), 2)


def find_entities(sentence: Sentence) -> list[tuple[Extracted, int, int]]:
    """Entity facts with the span of the sentence they came from."""
    found = []
    for rule in _ENTITY_RULES:
        for match in rule.pattern.finditer(sentence.text):
            raw, start = _group(match, "value")
            if raw is None or sentence.asks_at(match.start()):
                continue
            usable, owner = _owner_of(match, sentence, rule)
            canon = _CANON[rule.canon](raw.strip()) if usable else None
            if canon is None:
                continue
            key_value, display = canon
            confidence = rule.confidence if owner is None else OTHER_PERSON
            if rule.key == "id_number" and not id_number_checksum_ok(key_value):
                confidence -= 0.15  # a typo or a made-up number; still what the user said
            fact = Extracted(
                kind="entity",
                text=_render(rule, owner, display, key_value),
                confidence=stated_confidence(confidence, sentence, match.end()),
                entity_key=f"{rule.key}:{key_value}",
                rule=rule.rule,
            )
            found.append((fact, match.start(), start + len(raw)))
    return found
