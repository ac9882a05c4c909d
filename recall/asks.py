"""What a query asks for, and whether a memory's text holds that kind of answer.

"When is the staging cluster redeployed?" asks for a time, "how many GPUs…" for a number: a
memory that names no time or holds no number cannot be the answer, however close its words are.
The heuristic lets such a memory keep only a share of its score (`RecallSettings.
weight_answer_type`). Only these two kinds are told apart, in English, Chinese, Japanese and
Korean question forms: they are the ones a text shows plainly (a date, a weekday, a clock time;
a digit or a number word). A query that asks for anything else asks for nothing here.
"""

from __future__ import annotations

import re

TIME = "time"
NUMBER = "number"
KINDS = (TIME, NUMBER)

_ASKS_TIME = re.compile(
    r"^\s*when\b|\bwhen (?:is|was|did|does|do|are|were|will|would|should|can)\b"
    r"|\bwhat (?:time|date|day|year|month)\b|\bwhich (?:day|date|year|month|week)\b|\bhow long ago\b"
    r"|\bbirthday\b|\bdate of birth\b|\bbirth ?date\b|\banniversary\b|\bdeadline\b"
    r"|什么时候|几点|哪天|哪一天|几号|几月|何时|哪年|哪一年|生日|出生|截止"
    r"|いつ|何時|何日|何曜日|誕生日|언제|몇 시|며칠|생일",
    re.IGNORECASE,
)
_ASKS_NUMBER = re.compile(
    r"\bhow (?:much|many|old|long|far|often|big|large|tall|heavy)\b"
    r"|\bwhat(?:'s| is| was| are)? (?:the |my |our |his |her |their )?(?:price|cost|number|score|total|amount"
    r"|percentage|salary|budget|count)\b"
    r"|多少|几[个岁次天年月本家只台位张块元分人]|多大|多久|多长|多远|多高|多重|いくら|何人|何回|何歳|몇|얼마",
    re.IGNORECASE,
)

_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|yesterday|today|tomorrow|tonight"
_HOLDS_TIME = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS})\b"
    r"|\b(?:last|next|this|every|each) (?:week|month|year|night|weekend|morning|evening|spring|summer|autumn"
    r"|fall|winter|day)\b|\bago\b|\b(?:daily|weekly|monthly|yearly|annually)\b"
    r"|\b(?:morning|evening|afternoon|noon|midnight|o'clock)\b|\b[ap]\.m\.|\b\d{1,2} ?[ap]m\b|\butc\b"
    r"|\b(?:1[89]|20)\d\d\b|\b\d{1,2}:\d\d\b|\d{4}-\d\d-\d\d|\b\d+ ?(?:days?|weeks?|months?|years?|hours?|minutes?)\b"
    r"|\d+\s*[年月日号點点時时]|[一二三四五六七八九十两]+\s*[月日号点时]|周[一二三四五六日天末]|星期|礼拜"
    r"|[上下这本每]个?(?:周|月|星期)|[去今明前后]年|[昨今明前后]天|月底|月初|年底|年初|春节|国庆|中秋|元旦"
    r"|早上|晚上|下午|上午|中午|凌晨|每天|小时|分钟|曜日|先週|来週|毎週|毎日|午前|午後"
    r"|[월화수목금토일]요일|어제|오늘|내일|지난주|다음주|매주",
    re.IGNORECASE,
)
_HOLDS_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty"
    r"|hundred|thousand|million|billion|dozen|half|once|twice|a few|several)\b"
    r"|[一二三四五六七八九十两半百千万亿]+\s*[个岁次天年月号日本家只台位张块元分人周点倍斤里米层]",
    re.IGNORECASE,
)


def asked(query: str) -> tuple[str, ...]:
    """The kinds of answer `query` asks for (TIME, NUMBER), in that order; () for any other question."""
    return tuple(kind for kind, pattern in ((TIME, _ASKS_TIME), (NUMBER, _ASKS_NUMBER)) if pattern.search(query))


def holds(text: str, kind: str) -> bool:
    """Whether `text` holds an answer of `kind`: a time (a date, a weekday, a clock time…) or a number."""
    return bool((_HOLDS_TIME if kind == TIME else _HOLDS_NUMBER).search(text))
