"""Step 2 of the write path (docs/architecture.md "Write path"): the salience gate. Plain functions, no database.

Greetings, nudges, follow-up complaints, one-off requests and questions ("我的幸运数字是啥?")
are not knowledge and produce nothing. What each clause is comes from
ingest.extraction.sentences; a message stating an L0 fact is knowledge however short or
however it is phrased ("我叫东升", "不要用 emoji").
"""

from __future__ import annotations

from ingest.extraction.l0_statements import l0_extract
from ingest.extraction.sentences import prepare, size, split_sentences

# Which reason a message gets when every clause is noise: the most specific one.
_REASON_ORDER = (("request", "one-off request"), ("question", "question"), ("complaint", "complaint"))
_TOO_SHORT = 3  # "Tokyo", "杭州": an answer to something we cannot see


def salience(text: str) -> str | None:
    """Why a user message is not knowledge — "greeting", "nudge", "complaint", "question",
    "one-off request", "too short" — or None when it may hold knowledge."""
    prepared = prepare(text)
    if l0_extract(prepared):
        return None  # a knowledge statement, however short ("我叫东升", "I prefer tabs")
    clauses = [clause for sentence in split_sentences(prepared) for clause in sentence.clauses]
    categories = {clause.category for clause in clauses}
    if not clauses:
        return "nudge"  # punctuation only: "?", "..."
    if "other" in categories:
        return "too short" if size(prepared) < _TOO_SHORT else None
    for category, reason in _REASON_ORDER:
        if category in categories:
            return reason
    return "nudge" if "nudge" in categories else "greeting"
