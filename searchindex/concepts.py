"""Language-neutral concept tokens for the personal facts agents are asked about most.

A memory "my lucky number is 88" and the query "幸运数字" share no word, and the multilingual
embedder ranks them far apart; but both name the same *kind of fact*. The BM25 tokenizer adds
one concept token (`~lucky_number`) for every such fact name it finds, in any of the four
scripts the store is written in, so a query naming the fact in one language finds the memory
stating it in another. The list is the fact types the deterministic extractor stores
(docs/architecture.md "Write path", step 3) plus addresses and allergies: a closed vocabulary,
not a translator.

Concept tokens start with `~`, which no word token can (the tokenizer keeps letters, digits and
identifier joiners only), so a concept never collides with text.
"""

from __future__ import annotations

import re
from functools import cache

PREFIX = "~"

# concept → the phrases that name it, already NFKC-normalized and case-folded. Latin phrases
# match whole words; CJK ones match anywhere (CJK has no spaces between words).
CONCEPTS: dict[str, tuple[str, ...]] = {
    "lucky_number": (
        "lucky number",
        "lucky numbers",
        "幸运数字",
        "幸運數字",
        "吉祥数字",
        "幸运号码",
        "ラッキーナンバー",
        "幸運の数字",
        "행운의 숫자",
        "행운의 번호",
        "행운 숫자",
    ),
    "phone": (
        "phone",
        "phone number",
        "mobile number",
        "cell phone",
        "telephone",
        "手机号",
        "手机号码",
        "电话",
        "電話",
        "携帯番号",
        "전화번호",
        "휴대폰",
        "핸드폰",
    ),
    "email": (
        "e-mail",
        "email",
        "mail address",
        "邮箱",
        "电子邮件",
        "邮件地址",
        "メールアドレス",
        "メアド",
        "이메일",
        "메일 주소",
    ),
    "birthday": ("birthday", "date of birth", "生日", "出生日期", "誕生日", "생일", "생년월일"),
    "name": ("my name is", "her name is", "his name is", "full name", "名字", "姓名", "我叫", "名前", "이름"),
    "id_number": (
        "id number",
        "id card",
        "passport",
        "身份证",
        "护照",
        "身分証",
        "パスポート",
        "마이넘버",
        "여권",
        "주민등록번호",
    ),
    "address": ("home address", "postal address", "lives at", "地址", "住址", "住所", "주소"),
    "allergy": ("allergic", "allergy", "allergies", "过敏", "アレルギー", "알레르기"),
}


@cache
def _patterns() -> list[tuple[str, re.Pattern]]:
    patterns = []
    for concept, phrases in CONCEPTS.items():
        alternatives = []
        for phrase in sorted(phrases, key=len, reverse=True):
            escaped = re.escape(phrase).replace(r"\ ", r"\s+")
            alternatives.append(rf"(?<![^\W_]){escaped}(?![^\W_])" if phrase.isascii() else escaped)
        patterns.append((PREFIX + concept, re.compile("|".join(alternatives))))
    return patterns


def find(normalized: str) -> list[tuple[str, str]]:
    """(concept token, the phrase as written) for every fact name in NFKC + case-folded text."""
    found = []
    for token, pattern in _patterns():
        found.extend((token, match.group()) for match in pattern.finditer(normalized))
    return found
