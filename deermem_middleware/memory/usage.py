"""The usage signal: which of the injected facts did the model's answer use? (pure)

Injection counts say what the memory *offered*; they cannot tell a fact the model built its answer
on from one it ignored. After a turn, the answer is compared with each fact that was injected for
it: a fact whose content shows up in the answer counts as **used**. Per fact the stored ``used``
count grows; selection adds ``usage_weight`` × :func:`access_frequency` to the score, and
``deermem stats`` reports the memory's hit rate (facts used / facts injected).

**What is compared.** The *content units* of each text (:func:`content_units`): words of three
letters or more, cut to their first five letters (a cheap stemmer: "painting", "paints" and
"painted" meet at "paint", "allergy" and "allergic" at "aller"), and digit groups; in Chinese,
Japanese or Korean text, the Chinese characters (猫, 茶: one-character words) and the character
pairs inside runs of those scripts, split at particles (的, 了, は, が…; a pair of hiragana is
grammar, not content). Stopwords and the words every fact shares — "user", "用户", "ユーザー", the
frame verbs "likes", "prefers", "uses"… — are not content: "The user likes tea" is about *tea*.
The overlap of a fact and an answer is the overlap coefficient of their units,
``|shared| / min(|fact|, |answer|)`` — for an answer longer than the fact, the share of the fact
that the answer repeats; for a short answer ("Sweden"), the share of the answer the fact holds —
and a fact counts as used when the overlap reaches :data:`USAGE_MIN_OVERLAP` (0.6, measured) with
at least :data:`USAGE_MIN_SHARED` shared units (all of them when the smaller side has fewer).

**Measured** (``benchmarks/usage_weight.py``, LoCoMo dev): each observation against the dialogue
turn it was written from (how an answer restates a fact) versus the other facts a selection puts
next to it (topically close, so the hard case): see :data:`USAGE_MIN_OVERLAP` for the figures.
An estimate, not a proof: a model may use a fact without repeating its words, or repeat a word
of a fact it did not need; the counts are a ranking signal and a health figure, nothing more.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from deermem_middleware.memory.conversation import message_text

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Fact

__all__ = [
    "USAGE_MIN_OVERLAP",
    "USAGE_MIN_SHARED",
    "USAGE_PRIOR",
    "FactUse",
    "access_frequency",
    "content_units",
    "estimate_use",
    "overlap",
    "turn_answer",
    "usage_ratios",
]

USAGE_MIN_OVERLAP: Final = 0.6
"""Overlap (see the module docstring) from which a fact counts as used by an answer.

Measured on LoCoMo dev (``benchmarks/usage_weight.py``): 1,480 observations, each against the
dialogue turn it was written from (positive), and 20,560 negatives: the other facts of a top-15
selection for that turn — topically close, so the hard case — with both speakers' names treated
as the generic subject, like "user". Precision / recall / F1 (%):

======  =========  ======  =====
 min    precision  recall   F1
======  =========  ======  =====
 0.4      33.9      86.5   48.7
 0.5      46.4      79.2   58.5
 0.6      64.4      64.5   64.4
 0.7      83.7      49.8   62.4
 0.8      86.6      37.0   51.8
======  =========  ======  =====

0.6 has the best F1, and there precision ≈ recall: the uses it wrongly counts and those it
misses cancel out, so the hit rate ``deermem stats`` shows is about right in total even though
single estimates err. A real answer restates the fact it uses more fully than a chatty turn
restates its observation (and its other facts are less alike than a selection made *for that
turn*), so it does better in use; ``usage_min_overlap`` moves it (0.7: fewer, surer uses)."""

USAGE_MIN_SHARED: Final = 2
"""Shared units a use needs at the least (fewer when the smaller text has fewer units): one
common word — "coffee", "Berlin" — in a long answer does not make a fact used."""

USAGE_PRIOR: Final = 2.0
"""The smoothing of :func:`access_frequency`: ``used / (injections + USAGE_PRIOR)``. A fact
injected once and used once gets 1/3, not 1: one lucky overlap is weak evidence, ten out of ten
(10/12 = 0.83) is strong; a fact injected often and never used sinks to 0, like one never
injected."""

_CJK: Final = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u309f]")
"""Hiragana: a pair of them is grammar (いる, って), not content."""
_STEM_CHARS: Final = 5

_STOPWORDS: Final = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn doing
    don down during each few for from further had hadn has hasn have haven having he her here
    hers herself him himself his how i if in into is isn it its itself just let me more most
    much must my myself no nor not now of off on once only or other ought our ours ourselves out
    over own same shan she should shouldn so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was wasn we
    were weren what when where which while who whom why will with won would wouldn you your
    yours yourself yourselves yes okay ok sure well really maybe may might shall also still even
    ever never always often sometimes usually already yet one two get gets got getting make
    makes made go goes going went gone come comes came know knows knew think thinks thought
    want wants wanted like likes liked love loves loved enjoy enjoys enjoyed prefer prefers
    preferred use uses used using need needs needed say says said tell tells told mention
    mentions mentioned mentioning note notes noted state states stated since around
    actually currently recently lately today
    user users person people someone somebody assistant human
    thing things something anything everything lot lots kind sort way
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Function words, chat filler, and the frame of a fact — its generic subject ("user") and the
verbs every fact uses to say what it is ("likes", "prefers", "uses", "mentioned")."""

_CJK_GENERIC: Final = (
    "用户",
    "使用者",
    "用戶",
    "ユーザー",
    "ユーザ",
    "사용자",
    "喜欢",
    "喜歡",
    "偏好",
    "使用",
    "提到",
    "表示",
    "一个",
    "一個",
    "这个",
    "那个",
    "我们",
    "你们",
    "他们",
    "她们",
    "可以",
    "因为",
    "所以",
    "但是",
    "如果",
    "就是",
    "还是",
    "没有",
    "什么",
    "已经",
    "现在",
    "です",
    "ます",
    "でした",
    "ました",
    "さん",
)
"""Generic words of Chinese, Japanese and Korean texts: cut out before pairing characters."""

_CJK_SEPARATORS: Final = frozenset(
    "的了是在我你他她它们也都和与及或就还很这那有个一不吗呢吧啊呀着过被把给对从为"
    "はがをにのでともへやかよねな"
)
"""Single-character particles and pronouns: a run of characters is split at them, so "我喜欢喝茶"
and "用户喜欢喝茶" share the pairs of 喝茶, not of 我喜 or 户喜."""

_CJK_GENERIC_RE = re.compile("|".join(sorted(map(re.escape, _CJK_GENERIC), key=len, reverse=True)))


@lru_cache(maxsize=8192)
def content_units(text: str) -> frozenset[str]:
    """The content units of ``text`` (see the module docstring); cached by text, since the same
    facts are compared with every answer."""
    normal = unicodedata.normalize("NFKC", text).lower()
    units: set[str] = set()
    for word in _WORD.findall(normal):
        if word.isdigit():
            if len(word) >= 2:
                units.add(word)
        elif len(word) >= 3 and word not in _STOPWORDS:
            units.add(word[:_STEM_CHARS])
    if _CJK_RUN.search(normal):
        cut = _CJK_GENERIC_RE.sub(" ", normal)
        for run in _CJK_RUN.findall(cut):
            piece: list[str] = []
            for ch in (*run, " "):
                if ch not in _CJK_SEPARATORS and ch != " ":
                    piece.append(ch)
                    continue
                units.update(ch for ch in piece if _HAN.match(ch))  # 猫, 茶: words of their own
                units.update(
                    piece[i] + piece[i + 1]
                    for i in range(len(piece) - 1)
                    if not (_KANA.match(piece[i]) and _KANA.match(piece[i + 1]))
                )
                piece = []
    return frozenset(units)


def overlap(fact: frozenset[str], answer: frozenset[str]) -> tuple[float, int]:
    """(overlap coefficient, shared units) of two unit sets; (0, 0) when either is empty."""
    if not fact or not answer:
        return 0.0, 0
    shared = len(fact & answer)
    return shared / min(len(fact), len(answer)), shared


@dataclass(frozen=True, slots=True)
class FactUse:
    """One fact the answer used: its id, the overlap and the shared units' count."""

    fact_id: str
    overlap: float
    shared: int


def estimate_use(
    answer: str,
    facts: Iterable[tuple[str, str]],
    *,
    min_overlap: float = USAGE_MIN_OVERLAP,
    min_shared: int = USAGE_MIN_SHARED,
) -> list[FactUse]:
    """The facts (``(id, content)`` pairs, e.g. those injected for a turn) that ``answer``
    used, best overlap first. Pure; a fact listed twice counts once."""
    answer_units = content_units(answer)
    if not answer_units:
        return []
    uses: dict[str, FactUse] = {}
    for fact_id, content in facts:
        units = content_units(content)
        score, shared = overlap(units, answer_units)
        needed = min(min_shared, len(units), len(answer_units))
        if score >= min_overlap and shared >= max(1, needed) and fact_id not in uses:
            uses[fact_id] = FactUse(fact_id, round(score, 4), shared)
    return sorted(uses.values(), key=lambda u: (-u.overlap, -u.shared, u.fact_id))


def turn_answer(messages: Sequence[Any]) -> str:
    """What the model answered in the turn that just ended: the text of every AI message after
    the newest user message, oldest first ("" when there is none). The text written next to a
    tool call counts too: "you are in Berlin, so I searched for…" used the fact as much as the
    final reply does."""
    texts: list[str] = []
    for message in reversed(messages):
        kind = getattr(message, "type", None)
        if kind == "human":
            break
        if kind == "ai":
            text = message_text(getattr(message, "content", None))
            if text.strip():
                texts.append(text)
    return "\n".join(reversed(texts))


def access_frequency(facts: Sequence[Fact], prior: float = USAGE_PRIOR) -> np.ndarray:
    """Per fact ``used / (injections + prior)`` in [0, 1): how often the model used a fact when
    it was offered, smoothed (see :data:`USAGE_PRIOR`). A ratio, not a raw count, so a fact that
    is injected in every call (a correction, a frequent topic) is not rewarded for that alone;
    ``used`` is clamped to ``injections`` (a hand-edited file may say more)."""
    used = np.fromiter((getattr(f, "used", 0) for f in facts), np.float64, len(facts))
    injections = np.fromiter((f.injections for f in facts), np.float64, len(facts))
    return usage_ratios(used, injections, prior)


def usage_ratios(
    used: np.ndarray, injections: np.ndarray, prior: float = USAGE_PRIOR
) -> np.ndarray:
    """:func:`access_frequency` of counts already read (a derived snapshot's columns)."""
    used = np.asarray(used, dtype=np.float64)
    clamped = np.maximum(np.asarray(injections, dtype=np.float64), used)
    return np.divide(used, clamped + prior, out=np.zeros(len(used)), where=used > 0)
