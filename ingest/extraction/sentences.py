"""Sentences and clauses of a user message, and what each clause is: the vocabulary the
salience gate (step 2) and the L0 rules (step 3) share. Plain functions, no database.

Rules look at clauses: "我叫东升,你叫什么?" states a name and asks a question. A clause is a
greeting, nudge, complaint, one-off request, question, or "other" (it may state something):

    prepare          NFKC (full-width forms to ASCII), spaces collapsed, newlines kept
    split_sentences  sentences, each split into classified clauses
    sentence_starts  where the sentences after the first start
    size             how much a text says (CJK characters plus Latin words and numbers)
    FILLER           openers that do not change what a clause is ("also, …", "另外…")
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace

from memoryui.rules import normalize_text

# --- sentences and clauses --------------------------------------------------------------------
# Entity values may span clause commas ("88, 66 and 99"), so value patterns run over the
# sentence and the clause a match starts in decides whether it counts.

_SENTENCE_END = re.compile(r"[。!?;\n…]+|\.(?=\s|$)")
# A comma followed by a digit separates list items ("88, 66"), not clauses.
_CLAUSE_END = re.compile(r",(?!\s*\d)")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
EDGE_PUNCTUATION = " .!~-'\"()[]<>:*`_#"

# Openers that do not change what a clause is ("also, I prefer…", "另外我喜欢…").
FILLER = re.compile(
    r"(?:(?:and|also|but|so|btw|oh|well|actually|personally|honestly|anyway|ps|by the way|"
    r"maybe|perhaps|probably|i think|i guess|i believe)\b[\s,]*"
    r"|(?:另外|还有|而且|并且|但是|不过|其实|对了|顺便说一下|顺便|哦|嗯|那|我觉得|可能|也许|大概|好像|估计)[\s,]*)*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Clause:
    start: int
    end: int
    text: str
    category: str  # greeting | nudge | complaint | request | question | other


@dataclass(frozen=True)
class Sentence:
    text: str
    clauses: tuple[Clause, ...]

    def clause_at(self, position: int) -> Clause | None:
        for clause in self.clauses:
            if clause.start <= position < clause.end:
                return clause
        return None

    def asks_at(self, position: int) -> bool:
        clause = self.clause_at(position)
        return clause is not None and clause.category == "question"


def prepare(text: str) -> str:
    """NFKC (full-width forms to ASCII), spaces collapsed; newlines kept as sentence ends."""
    value = unicodedata.normalize("NFKC", text or "").replace("\r", "\n")
    value = re.sub(r"[^\S\n]+", " ", value)
    return "\n".join(line.strip() for line in value.split("\n")).strip()


def size(text: str) -> int:
    """How much a text says: CJK characters plus Latin words and numbers."""
    return len(CJK.findall(text)) + len(_LATIN_WORD.findall(text))


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of a prepared text, each with its classified clauses."""
    sentences, start = [], 0
    for end_mark in [*_SENTENCE_END.finditer(text), None]:
        end = end_mark.start() if end_mark else len(text)
        body = text[start:end]
        asked = bool(end_mark and "?" in end_mark.group())
        start = end_mark.end() if end_mark else len(text)
        if body.strip():
            sentences.append(_sentence(body, asked))
    return sentences


def sentence_starts(text: str) -> list[int]:
    """Where each sentence after the first of a prepared text starts (its first visible character)."""
    starts = []
    for end_mark in _SENTENCE_END.finditer(text):
        rest = text[end_mark.end() :]
        if rest.strip():
            starts.append(end_mark.end() + len(rest) - len(rest.lstrip()))
    return starts


def _sentence(body: str, asked: bool) -> Sentence:
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
        clauses.append(Clause(start, end, body[start:end], _classify(body[start:end], asked and is_last)))
    # "My name is Bob, right?" asks whether the whole sentence holds.
    if clauses and asked and _TAG_QUESTION.fullmatch(_bare(clauses[-1].text)):
        clauses = [replace(clause, category="question") for clause in clauses]
    return Sentence(body, tuple(clauses))


def _bare(text: str) -> str:
    return normalize_text(text).strip(EDGE_PUNCTUATION + "?,")


# --- what a clause is -------------------------------------------------------------------------
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
    if size(bare) <= _COMPLAINT_MAX_SIZE and _COMPLAINT.search(bare):
        return "complaint"
    if _REQUEST.match(bare):
        return "request"
    if asked or _QUESTION.search(bare):
        return "question"
    return "other"


# --- statements -------------------------------------------------------------------------------
# One clause may join several facts ("our freeze starts on Monday and my manager is Priya").
# A split is made only where both sides are whole statements, each with its own subject and
# verb; "I like tea and coffee", "Tom and Jerry are my cats" and "R&D and QA share the floor"
# stay whole. A wrong split is worse than none, so subjects and verbs come from closed lists.

_EN_ADVERBS = (
    r"(?:(?:also|really|still|usually|always|never|often|sometimes|just|only|already|mostly|rarely|generally"
    r"|definitely|actually|currently|normally|now|not)\s+)*"
)
_EN_SINGULAR_VERBS = (
    r"is|was|has|had|does|did|isn't|wasn't|hasn't|doesn't|didn't|will|would|can|could|should|must|may|might"
    r"|won't|can't|couldn't|wouldn't|shouldn't"
    r"|starts|started|begins|began|ends|ended|lives|lived|works|worked|runs|ran|owns|owned|uses|used|needs|wants"
    r"|likes|loves|hates|prefers|leads|led|manages|managed|reports|moved|joined|left|costs|opens|closes|expires"
    r"|expired|ships|shipped|launches|launched|meets|met|teaches|speaks|knows|belongs|falls|happens|stays|takes"
    r"|goes|went|comes|came|owes|pays|paid|earns|resets|renews|handles|handled|lasts"
)
_EN_VERBS = rf"(?:{_EN_SINGULAR_VERBS}|are|were|am|have|do|aren't|weren't|haven't|don't)\b"
_EN_NOUN_WORD = r"(?!(?:and|or|but|nor|is|are|was|were)\b)[\w'&-]+"
_EN_STATEMENT = re.compile(
    # a pronoun and a verb: "I review PRs", "we ship on Fridays", "I'm on call"
    r"(?i:i|we|he|she|they)(?:['’](?i:m|re|ve|d|ll|s)\b|\s+(?!(?:and|or|but|nor|too|either)\b)[a-z][a-z'’]*\b)"
    # a determined noun phrase and a verb: "my manager is Priya", "our payments freeze starts …"
    rf"|(?i:my|our|his|her|their|the|this)\s+(?:{_EN_NOUN_WORD}\s+){{1,4}}?{_EN_ADVERBS}{_EN_VERBS}"
    # a name and a singular verb: "Priya leads QA" (not "Jerry are my cats")
    rf"|[A-Z][a-z][\w'-]*(?:\s+[A-Z][\w'-]*){{0,2}}\s+{_EN_ADVERBS}(?:{_EN_SINGULAR_VERBS})\b"
)
# Chinese: a first-person subject ("我的经理是王芳", "我们的支付冻结从12月15日开始").
_ZH_STATEMENT = re.compile(r"(?:我们|咱们|我|本人)的?(?:[\u3400-\u9fff]|\s*[A-Za-z0-9])[^,]")
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)


def is_statement(text: str) -> bool:
    """Whether a text opens with a subject and its verb (after filler), by the closed lists above."""
    offset = FILLER.match(text).end()
    return bool(_EN_STATEMENT.match(text, offset) or _ZH_STATEMENT.match(text, offset))


def statement_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of text[start:end], split at "and" where both sides are whole statements.

    A part after a split starts after its filler ("… and also my manager is Priya").
    """
    if not is_statement(text[start:end]):
        return [(start, end)]
    spans, first = [], start
    for joiner in _AND.finditer(text, start, end):
        if is_statement(text[joiner.end() : end]):
            spans.append((first, joiner.start()))
            first = FILLER.match(text, joiner.end(), end).end()
    spans.append((first, end))
    return spans
