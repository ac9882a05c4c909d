"""The deterministic rules of the write path (DESIGN.md "Write path", steps 1-3 and 5).

Plain functions over plain values, no database, English and Chinese:

    source_filter         step 1: who sent the message (role, channel, source marker)
    internal_fingerprint  step 1, second line: leaked internal prompts that carry no marker
    salience              step 2: greetings, nudges, complaints, questions, one-off requests
    l0_extract            step 3: typed facts from one user message
    tool_guard            step 5: no tool schemas, call formats or failed-call transcripts

Conventions of what L0 writes:

- Texts are one self-contained third-person statement in the language of the rule that
  fired. English: "The user's <fact> is <value>." / "The user prefers …". Chinese:
  "用户的<fact>是<value>。" / "用户喜欢…" (a space before a value starting with a Latin letter or
  digit: "用户的手机号是 18600000000。"). Instructions to the agent stay imperative:
  "Never add Co-Authored-By to commits." / "以后都用中文回答。". Values are written in their
  canonical form (phone digits, ISO dates) so the exact token is searchable.
- Entity keys are `type:value`: `name:<casefolded, spaces→->` (`name:li-dongsheng`, `name:东升`),
  `phone:<digits>` (a Chinese mobile without +86/0086; other numbers keep their country code,
  without "+"), `email:<lower-case>`, `id_number:<upper-case>`, `birthday:YYYY-MM-DD`
  (`birthday:--MM-DD` when no year is given), `lucky_number:<numbers joined by ->` in the order
  stated (`lucky_number:88-66-99`), `license_plate:<upper-case, no spaces>`.
- An explicit remember request ("/remember …", "记住…", "…，记一下") is kind `remember` with the
  command stripped; when what is remembered is itself an entity fact it becomes that entity
  (kind `entity`, with its key, `explicit=True`) so entity-key dedup and core placement apply.

Deliberately left to L1 (the LLM extractor): facts about the user's world beyond one narrow
rule ("we run 1000 RTX 4070s" — a first-person subject, an operating verb and a counted
quantity), project state, relationships, procedures, addresses, allergies, habits, "I'm X" /
"我是X" (a name or a job?), and numbers or e-mails without a cue saying whose they are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date

from memoryui.rules import KINDS, normalize_text

# --- step 1: the source filter ----------------------------------------------------------------

NON_USER_SOURCES = ("internal", "banner", "repair", "compaction")
SYSTEM_CHANNELS = ("heartbeat", "cron", "system")


def source_filter(role: str, channel: str | None, source: str | None) -> str | None:
    """Why a message never becomes memory (its role, channel or source), or None."""
    role = (role or "").strip().lower()
    if role != "user":
        return f"{role} message" if role else "message without a role"
    channel = (channel or "").strip().lower()
    if channel in SYSTEM_CHANNELS:
        return f"{channel} channel"
    source = (source or "").strip().lower()
    if source in NON_USER_SOURCES:
        return f"{source} source"
    return None


# Prompts that reach the store with the user role but were written by a harness, a banner or a
# repair loop (DESIGN "Internal prompts leak into memory"). Compared as substrings after
# normalize_text (NFKC, case-fold, whitespace collapse), so width and case do not matter.
DEFAULT_INTERNAL_FINGERPRINTS: tuple[str, ...] = (
    # multi-agent test harnesses and the agents' relay chatter
    "Multi-hop task: delegate",
    "Depth-3 chain test",
    "received the delegation from",
    "多智能体测试",
    # the ask_user preference-collection test prompt
    "ask_user 工具问我",
    # banners and onboarding
    "欢迎使用智能助手",
    "输入 /help 查看可用技能",
    "[Onboarding]",
    "New skills are available",
    # repair loops
    "[repair]",
    "The previous tool call failed because",
    "Repair the call and retry",
    "上一轮的工具调用没有 tool_result",
    # heartbeat and compaction prompts sent with the user role
    "HEARTBEAT_OK",
    "Summarize the conversation above for long-term memory",
)


def internal_fingerprint(text: str, fingerprints: Sequence[str] | None = None) -> str | None:
    """The fingerprint a leaked internal prompt matches, or None (None list = defaults)."""
    haystack = normalize_text(text)
    if not haystack:
        return None
    for fingerprint in DEFAULT_INTERNAL_FINGERPRINTS if fingerprints is None else fingerprints:
        needle = normalize_text(fingerprint)
        if needle and needle in haystack:
            return fingerprint
    return None


# --- sentences and clauses --------------------------------------------------------------------
# Rules look at clauses: "我叫东升,你叫什么?" states a name and asks a question. Entity values
# may span clause commas ("88, 66 and 99"), so value patterns run over the sentence and the
# clause a match starts in decides whether it counts.

_SENTENCE_END = re.compile(r"[。!?;\n…]+|\.(?=\s|$)")
# A comma followed by a digit separates list items ("88, 66"), not clauses.
_CLAUSE_END = re.compile(r",(?!\s*\d)")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
_EDGE_PUNCTUATION = " .!~-'\"()[]<>:*`_#"

# Openers that do not change what a clause is ("also, I prefer…", "另外我喜欢…").
_FILLER = re.compile(
    r"(?:(?:and|also|but|so|btw|oh|well|actually|personally|honestly|anyway|ps|by the way|"
    r"maybe|perhaps|probably|i think|i guess|i believe)\b[\s,]*"
    r"|(?:另外|还有|而且|并且|但是|不过|其实|对了|顺便说一下|顺便|哦|嗯|那|我觉得|可能|也许|大概|好像|估计)[\s,]*)*",
    re.IGNORECASE,
)

# Hedged statements are less certain (DESIGN: confidence says how sure the writer was).
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i believe|not sure|might|kind of|sort of)\b"
    r"|可能|也许|大概|好像|应该是|我觉得|估计|或许|不确定",
    re.IGNORECASE,
)
HEDGE_PENALTY = 0.25


@dataclass(frozen=True)
class _Clause:
    start: int
    end: int
    text: str
    category: str  # greeting | nudge | complaint | request | question | other


@dataclass(frozen=True)
class _Sentence:
    text: str
    clauses: tuple[_Clause, ...]

    def clause_at(self, position: int) -> _Clause | None:
        for clause in self.clauses:
            if clause.start <= position < clause.end:
                return clause
        return None

    def asks_at(self, position: int) -> bool:
        clause = self.clause_at(position)
        return clause is not None and clause.category == "question"


def _prepare(text: str) -> str:
    """NFKC (full-width forms to ASCII), spaces collapsed; newlines kept as sentence ends."""
    value = unicodedata.normalize("NFKC", text or "").replace("\r", "\n")
    value = re.sub(r"[^\S\n]+", " ", value)
    return "\n".join(line.strip() for line in value.split("\n")).strip()


def _size(text: str) -> int:
    """How much a text says: CJK characters plus Latin words and numbers."""
    return len(_CJK.findall(text)) + len(_LATIN_WORD.findall(text))


def _sentences(text: str) -> list[_Sentence]:
    sentences, start = [], 0
    for end_mark in [*_SENTENCE_END.finditer(text), None]:
        end = end_mark.start() if end_mark else len(text)
        body = text[start:end]
        asked = bool(end_mark and "?" in end_mark.group())
        start = end_mark.end() if end_mark else len(text)
        if body.strip():
            sentences.append(_sentence(body, asked))
    return sentences


def _sentence(body: str, asked: bool) -> _Sentence:
    spans, start = [], 0
    for comma in [*_CLAUSE_END.finditer(body), None]:
        end = comma.start() if comma else len(body)
        piece = body[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = comma.end() if comma else len(body)
    clauses = []
    for index, (start, end) in enumerate(spans):
        is_last = index == len(spans) - 1
        clauses.append(_Clause(start, end, body[start:end], _classify(body[start:end], asked and is_last)))
    # "My name is Bob, right?" asks whether the whole sentence holds.
    if clauses and asked and _TAG_QUESTION.fullmatch(_bare(clauses[-1].text)):
        clauses = [replace(clause, category="question") for clause in clauses]
    return _Sentence(body, tuple(clauses))


def _bare(text: str) -> str:
    return normalize_text(text).strip(_EDGE_PUNCTUATION + "?,")


# --- step 2: what a clause is -----------------------------------------------------------------
# Whole-clause patterns over normalize_text output (case-folded, CJK punctuation as ASCII).

# Social noise: greetings, thanks, acknowledgements, sign-offs. Any run of them ("ok thanks").
_PHATIC_WORDS = (
    r"hi|hello|hey|hiya|yo|howdy|good (?:morning|afternoon|evening|night)|(?:hi|hello|hey) there"
    r"|thanks?(?: you)?(?: (?:so|very) much)?|thx|ty|thank u|cheers|ok(?:ay)?|k+|sure|fine|cool|great|nice"
    r"|got it|alright|all right|yes|yeah|yep|no|nope|noted|understood|never ?mind|nvm|bye|goodbye"
    r"|see you|lol|(?:ha)+|that'?s all(?: for now)?|that is all|for now"
    r"|你好[呀啊]?|您好|嗨|哈喽|哈啰|早|早安|早上好|中午好|下午好|晚上好|晚安|拜拜|再见"
    r"|谢谢[你您啦]?|多谢|感谢|谢了|好的?|好吧|好哒|好滴|好嘞|行吧?|可以了?|嗯+|哦+|噢|收到|明白了?"
    r"|知道了|了解|没问题|对|是的|对的|就这样吧?|算了|不用了|晚点再说吧?|回头再说|(?:哈)+"
)
_PHATIC = re.compile(rf"(?:{_PHATIC_WORDS})(?:[\s,]*(?:{_PHATIC_WORDS}))*")

# Checking whether the agent is there or done (the user learns nothing new by sending them).
_NUDGE = re.compile(
    r"\?*|\.*"
    r"|(?:你)?(?:还)?在(?:吗|不在|嘛|么|没)|人呢|有人吗|(?:你)?还活着吗|ping|pong"
    r"|(?:are )?you (?:still )?there|anyone there|(?:any )?(?:updates?|news|progress)|status"
    r"|继续(?:吧|啊|呀)?|go on|continue|keep going|next|done(?: yet)?|are you done|still working(?: on it)?"
    r"|(?:搞|弄|做|跑)?完了(?:吗|没有?)?|(?:好|弄好|做好|搞好|搞定|完成|做完|跑完)了(?:吗|没有?)|好了没"
    r"|怎么样了|进度(?:如何|怎么样)?|快点|hurry(?: up)?|还要多久|(?:好像)?没反应了?|怎么没反应|卡住了(?:吗)?"
)

# Frustration with the agent: about this turn, not about the user's world.
_COMPLAINT = re.compile(
    r"怎么回事|怎么啦|怎么了|怎么还没|怎么这么|为什么(?:又|还|还是|一直)|又(?:失败|挂|错|出错|卡|不行)"
    r"|太慢|好慢|很慢|慢死|速度太慢|不对|错了|搞什么|什么鬼|没看懂|看不懂|不行|(?:连|登|打|用|启动)不(?:上|了|开)"
    r"|why is (?:this|it|that) (?:so|taking)|so slow|too slow|taking (?:so|too) long"
    r"|still (?:not|broken|failing|waiting)"
    r"|not working|doesn'?t work|does not work|didn'?t work|broken|wtf|come on|ugh|that'?s wrong|wrong again"
    r"|failed again|what'?s going on|what happened"
)
_COMPLAINT_MAX_SIZE = 12  # a long clause that merely contains "不对" is about something else

# A one-off task for this turn: imperative verbs at the clause start, or "一下/看看" softeners.
_REQUEST = re.compile(
    r"(?:(?:那|那就|然后|再|你|请|麻烦你?|能不能|可以|能否|帮忙|先|赶紧|现在)\s*)*"
    r"(?:帮我|帮忙|给我|替我|为我|用(?!户)|去|把|将|查|搜|找|看|瞧|打开|订|预订|买|发|写|改|跑|运行|执行|重启|启动|停|关"
    r"|列出|列一下|翻译|总结|概括|提醒我|算|计算|讲|说说|介绍|生成|做|删|推|提交|创建|新建|开个|安装|部署|测试|试"
    r"|重试|补全|解释|分析|检查|修|整理|导出|下载|上传|存|保存|简单(?:点|些)|commit|push|pull|merge|deploy)"
    r"|.*(?:一下|看看|看下|试试|瞧瞧|想想|一遍|提醒我)"
    r"|(?:(?:ok|okay|so|and|now|then|also|just|pls|please|hey)[\s,]+)*"
    r"(?:(?:can|could|would|will) you|you (?:should|need to|must)|let'?s|i need you to|i want you to|i'd like you to"
    r"|go ahead and|help me|(?:search|find|look up|lookup|check|show|list|open|book|send|write|run|fix|summari[sz]e"
    r"|translate|tell|give|make|create|delete|remove|retry|try|restart|reboot|deploy|push|commit|merge|explain|calculate"
    r"|compute|get|fetch|read|draft|plan|buy|order|schedule|remind|email|text|ask|add|update|install|generate|compare"
    r"|review|refactor|rename|move|copy|save|export|download|upload|print|format|convert|analy[sz]e|test|debug|start"
    r"|stop|kill|cancel)\b)"
)

# Asking for information. Chinese marks questions with particles and question words.
_QUESTION = re.compile(
    r"^(?:what|what'?s|who|who'?s|whom|whose|where|where'?s|when|why|how|how'?s|which|do|does|did|is|are|was|were"
    r"|can|could|would|will|should|shall|may|am)\b"
    r"|(?:吗|么|呢|嘛)$|啥|什么|多少|几(?:个|号|点|岁|次|时|天|月|年|分|台|张)|哪|谁|怎么|为什么|为啥|是不是|有没有|能不能"
    r"|可不可以|会不会|要不要|对不对|好不好|行不行"
)
_TAG_QUESTION = re.compile(
    r"right|correct|isn'?t it|aren'?t i|ok|okay|yes|no|对吧|对吗|是吧|是吗|对不对|是不是|没错吧|好吗|行吗|可以吗"
)


def _classify(text: str, asked: bool) -> str:
    bare = _bare(text)
    if not bare or _NUDGE.fullmatch(bare):
        return "nudge"
    if _PHATIC.fullmatch(bare):
        return "nudge" if asked else "greeting"  # "hello?" asks whether anyone is there
    if _size(bare) <= _COMPLAINT_MAX_SIZE and _COMPLAINT.search(bare):
        return "complaint"
    if _REQUEST.match(bare):
        return "request"
    if asked or _QUESTION.search(bare):
        return "question"
    return "other"


# Which reason a message gets when every clause is noise: the most specific one.
_REASON_ORDER = (("request", "one-off request"), ("question", "question"), ("complaint", "complaint"))
_TOO_SHORT = 3  # "Tokyo", "杭州": an answer to something we cannot see


def salience(text: str) -> str | None:
    """Why a user message is not knowledge — "greeting", "nudge", "complaint", "question",
    "one-off request", "too short" — or None when it may hold knowledge."""
    prepared = _prepare(text)
    if l0_extract(prepared):
        return None  # a knowledge statement, however short ("我叫东升", "I prefer tabs")
    clauses = [clause for sentence in _sentences(prepared) for clause in sentence.clauses]
    categories = {clause.category for clause in clauses}
    if not clauses:
        return "nudge"  # punctuation only: "?", "..."
    if "other" in categories:
        return "too short" if _size(prepared) < _TOO_SHORT else None
    for category, reason in _REASON_ORDER:
        if category in categories:
            return reason
    return "nudge" if "nudge" in categories else "greeting"


# --- step 3: L0 extraction --------------------------------------------------------------------


@dataclass(frozen=True)
class Extracted:
    """One typed fact found in a user message."""

    kind: str  # one of rules.KINDS, never "note"
    text: str  # one self-contained statement (conventions in the module docstring)
    confidence: float  # 0..1
    entity_key: str | None  # `type:value`, valid for rules.normalize_entity_key
    rule: str  # which rule fired, shown in the UI
    explicit: bool = False  # the user asked to remember it

    def __post_init__(self):
        if self.kind not in KINDS or self.kind == "note":
            raise ValueError(f"L0 does not write kind {self.kind!r}")


SELF_STATEMENT = 0.9  # the user stating their own identity or contact details
OTHER_PERSON = 0.8  # "王芳的电话是…": stated by the user, about someone else
EXPLICIT = 0.95  # the user asked for it to be remembered
WORLD_FACT = 0.6  # one narrow rule for what is really L1 territory

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
    value = raw.strip(_EDGE_PUNCTUATION)
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


def _owner_of(match: re.Match, sentence: _Sentence, rule: _EntityRule) -> tuple[bool, str | None]:
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
    return not tail.strip() or _FILLER.fullmatch(tail.strip() + " ") is not None


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


def _confidence(base: float, sentence: _Sentence, end: int) -> float:
    if _HEDGE.search(sentence.text[:end]):
        base -= HEDGE_PENALTY
    return round(min(max(base, 0.05), 1.0), 2)


def _entities(sentence: _Sentence) -> list[tuple[Extracted, int, int]]:
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
                confidence=_confidence(confidence, sentence, match.end()),
                entity_key=f"{rule.key}:{key_value}",
                rule=rule.rule,
            )
            found.append((fact, match.start(), start + len(raw)))
    return found


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


def _statement_clauses(sentence: _Sentence, first: int, taken: list[tuple[int, int]]) -> int:
    """The end of a statement that opens clause `first` and runs over the clauses continuing it."""
    end = sentence.clauses[first].end
    for clause in sentence.clauses[first + 1 :]:
        overlaps = any(start < clause.end and clause.start < stop for start, stop in taken)
        if clause.category != "other" or overlaps or _preference_match(clause.text) or _world_fact_match(clause.text):
            break
        end = clause.end
    return end


def _preference_match(text: str) -> tuple[_PreferenceRule, re.Match, int] | None:
    offset = _FILLER.match(text).end()
    for rule in _PREFERENCE_RULES:
        match = rule.pattern.match(text, offset)
        if match and not _VAGUE_OBJECT.fullmatch((match.group("tail") or "-").strip()):
            return rule, match, offset
    return None


def _open_clauses(sentence: _Sentence, taken: list[tuple[int, int]]) -> Iterator[tuple[int, _Clause]]:
    """(index, clause) of the clauses a statement may start in: not a question, not overlapping
    a span an earlier rule took."""
    for index, clause in enumerate(sentence.clauses):
        if clause.category != "question" and not any(s < clause.end and clause.start < e for s, e in taken):
            yield index, clause


def _preferences(sentence: _Sentence, taken: list[tuple[int, int]]) -> list[tuple[Extracted, int, int]]:
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
                    confidence=_confidence(rule.confidence, sentence, end),
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
    offset = _FILLER.match(text).end()
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


def _world_facts(sentence: _Sentence, taken: list[tuple[int, int]]) -> list[tuple[Extracted, int, int]]:
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
        fact = Extracted("fact", _finish(text, lang), _confidence(WORLD_FACT, sentence, end), None, rule)
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


def _from_sentences(text: str) -> list[tuple[_Sentence, list[tuple[Extracted, int, int]]]]:
    found = []
    for sentence in _sentences(text):
        facts = _entities(sentence)
        facts += _preferences(sentence, [(start, end) for _, start, end in facts])
        facts += _world_facts(sentence, [(start, end) for _, start, end in facts])
        found.append((sentence, facts))
    return found


def _remembered(content: str, rule: str, leading: bool) -> list[Extracted]:
    """What an explicit remember request keeps: its entity facts as entities, the rest as one memory.

    Dictated content ("记住：写代码前先跑测试") is kept even when it reads like an order; before a
    trailing command ("…，然后帮我记下来") an order is a task whose result was to be noted.
    """
    keep = ("other", "request") if leading else ("other",)
    facts, rest = [], []
    for sentence, found in _from_sentences(content):
        entities = [(fact, start, end) for fact, start, end in found if fact.kind == "entity"]
        for fact, _, _ in entities:
            confidence = max(fact.confidence, _confidence(EXPLICIT, sentence, len(sentence.text)))
            facts.append(replace(fact, confidence=confidence, rule=f"{rule}: {fact.rule}", explicit=True))
        for clause in sentence.clauses:
            covered = any(start < clause.end and clause.start < end for _, start, end in entities)
            if not covered and clause.category in keep and _size(_FILLER.sub("", clause.text, count=1)) >= 2:
                rest.append((sentence, clause))
    if rest:
        lang = "zh" if _CJK.search(content) else "en"
        joiner = "，" if lang == "zh" else ", "
        text = joiner.join(clause.text.strip() for _, clause in rest)
        text = _sentence_case(re.sub(r"^(?:that|this)\s+", "", text, flags=re.I))
        sentence = rest[0][0]
        confidence = _confidence(EXPLICIT, sentence, len(sentence.text))
        facts.append(Extracted("remember", _finish(text, lang), confidence, None, rule, explicit=True))
    return facts


def l0_extract(text: str) -> list[Extracted]:
    """Deterministic extraction from one user message."""
    prepared = _prepare(text)
    if not prepared:
        return []
    explicit = _explicit_remember(prepared)
    if explicit is not None:
        facts = _remembered(*explicit)
    else:
        facts = [fact for _, found in _from_sentences(prepared) for fact, _, _ in found]
    unique: dict[tuple[str, str], Extracted] = {}
    for fact in facts:
        key = (fact.kind, fact.entity_key or normalize_text(fact.text))
        if key not in unique or fact.confidence > unique[key].confidence:
            unique[key] = fact
    return list(unique.values())


# --- step 5: the tool guard -------------------------------------------------------------------
# Live tool definitions are the source of truth; a stored schema or guessed call format goes
# stale and gets recalled while the agent is using that very tool (DESIGN "Stale tool
# knowledge"). Gotchas, warnings and confirmed workarounds are what the store is for.

# A raw dump of a call or a schema is never knowledge, whatever else the text says.
_RAW_DUMPS: tuple[tuple[str, re.Pattern], ...] = (
    ("raw failed-call transcript (traceback)", re.compile(r"traceback \(most recent call last\)", re.I)),
    (
        "raw tool-call transcript",
        re.compile(
            r"\"tool_call_id\"|\"role\"\s*:\s*\"tool\"|</?tool_call>|<function_calls>|tool_use_id|\"arguments\"\s*:\s*[\"{]",
            re.I,
        ),
    ),
    (
        "parameter schema (JSON Schema)",
        re.compile(r"\"type\"\s*:\s*\"object\"|\"properties\"\s*:\s*\{|\"required\"\s*:\s*\[", re.I),
    ),
)
# What names a tool: MCP and server::tool ids, snake_case identifiers, or the word itself.
_TOOL_NAME = re.compile(r"mcp__[\w\-]+__[\w\-]+|\b[\w\-]+::[\w\-]+|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", re.I)
_TOOL_WORD = re.compile(r"\b(?:tool|function|api|endpoint|skill|plugin|command)s?\b|工具|接口|技能|插件|函数", re.I)
# Specific markers only: "调用格式注意事项" is still a call-format note.
_SCHEMA_MARKERS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "guessed call format",
        re.compile(r"\bguess(?:ed|ing)?\b|\bprobably\s+takes\b|\bmight\s+take\b|猜测|猜的|应该是这样调用", re.I),
    ),
    (
        "parameter schema",
        re.compile(
            r"\b(?:param(?:eter)?s?|input|argument)\s+schema\b|\bjson\s+schema\b|\bschema\b"
            r"|参数(?:格式|结构|定义|说明|列表)|入参|出参|请求体格式",
            re.I,
        ),
    ),
    (
        "field mapping",
        re.compile(
            r"\bfield\s+mapping\b|\bfields?\s+maps?\b|\bmaps?\s+(?:to|onto)\s+(?:the\s+)?(?:field|column)|字段(?:映射|对应|对照)|对应字段",
            re.I,
        ),
    ),
    (
        "call format",
        re.compile(
            r"\bcall(?:ing)?\s+(?:format|syntax|signature|convention)\b|\busage\s*:|\bsignature\b"
            r"|\b(?:invoke|call)\s+it\s+(?:as|like|with)\b|\b(?:arguments?|params?|parameters?)\s*:"
            r"|\btakes\s+(?:the\s+)?(?:arguments|parameters|params)\b|\b[a-z]\w*\((?:\w+\s*=|[\"']?\w+[\"']?\s*:)"
            r"|调用(?:格式|方式|方法|示例|语法)|用法\s*:|传参|参数\s*:",
            re.I,
        ),
    ),
    (
        "failed-call transcript",
        re.compile(
            r"\bfailed\s+(?:tool\s+)?call\b|\b(?:tool\s+)?call\s+failed\b|\berror\s+calling\b|\binvalid\s+arguments?\b"
            r"|调用失败|失败(?:的)?调用|参数错误",
            re.I,
        ),
    ),
)
# What makes a tool note durable: a gotcha, a warning, a confirmed workaround, who owns it.
_DURABLE = re.compile(
    r"\b(?:gotcha|warning|caveat|pitfall|beware|known\s+(?:issue|bug|problem|limitation)|workaround|instead"
    r"|owner|owned\s+by|maintainer|escalat\w*|on-?call|credentials?|avoid|don'?t\s+use|do\s+not\s+use)\b"
    r"|[—–\-;]\s*use\b|警告|坑|已知问题|解决办法|解决方法|绕过|改用|换用|负责人|升级路径|凭据|凭证|不要用|别用|避免",
    re.I,
)


def tool_guard(text: str) -> str | None:
    """Why a candidate text must not be stored (it holds a tool name with a parameter schema, field
    mapping, guessed call format or a raw failed-call transcript), or None. Confirmed workarounds
    and gotchas about a tool's behaviour pass ("X returns 500 when page > 10 — use the cursor")."""
    value = unicodedata.normalize("NFKC", text or "")
    for reason, pattern in _RAW_DUMPS:
        if pattern.search(value):
            return reason
    name = _TOOL_NAME.search(value)
    if not name and not _TOOL_WORD.search(value):
        return None
    if _DURABLE.search(value):
        return None
    for marker, pattern in _SCHEMA_MARKERS:
        if pattern.search(value):
            return f"{marker} for tool {name.group()}" if name else f"{marker} of a tool"
    return None
