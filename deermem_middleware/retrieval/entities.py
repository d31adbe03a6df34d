"""The entity route: facts that name what the message names — a person, a product, a place.

A question like "what did I tell you about Kubernetes?" or "我在杭州的时候…" names one thing; the
facts that name the same thing should not depend on an embedding model deciding that "k8s
cluster" is near "Kubernetes". Facts carry the entities they mention: the extraction model may
list them (the optional ``entities`` field of a new fact), and a cheap rule-based extractor
(:func:`extract_entities`) adds what it finds in every fact's text — capitalised names and
multi-word names ("Grand Canyon"), product-like tokens ("PostgreSQL", "GPT-4", "iPhone"), quoted
titles ("《三体》", "'Embracing Identity'"), Latin words inside Chinese or Japanese text ("我用Go"),
katakana runs, and Chinese place and organisation names ("杭州", "上海市", "浙江大学").

The *query* side does not run the extractor: a message rarely capitalises ("how do I deploy my go
service") and a name may be written in lower case. Instead every word n-gram (1–3 words) of the
message, and every 2–6 character run of its CJK text, is looked up in the vocabulary of the
facts' entities (:class:`EntityIndex`). Entities are weighted by inverse document frequency, and
an entity on more than ``max_share`` (5 %) of the facts is ignored: in a user's own memory the
user's name is on half of the facts and says nothing about which of them matter. Measured on
LoCoMo dev (hit@15, question mode, weight 0.1): names capped at 2 % or 5 % of the facts cost
nothing (77.1, as without the route); at 10 % or 20 % the route costs 2 questions of 885, and
with no cap 4–13 — frequent names are topics the character n-grams already match. LoCoMo's
facts carry no model-listed entities, so the route's gain — finding "runs our clusters on k8s"
for "kubernetes?" — does not show there.

The bonus of a fact is the idf-weighted share of the message's entities it shares, in [0, 1];
the score adds ``entity_weight`` × it (:mod:`deermem_middleware.retrieval.scoring`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Final

import numpy as np

from deermem_middleware.memory.document import MAX_ENTITIES, MAX_ENTITY_CHARS

__all__ = [
    "MAX_ENTITIES_PER_FACT",
    "EntityIndex",
    "extract_entities",
    "normalize_entity",
]

MAX_ENTITIES_PER_FACT: Final = MAX_ENTITIES

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff"

# Words that start sentences or questions in capitals without naming anything.
_CAPITAL_STOPWORDS: Final = frozenset(
    """
    a an and are as at be but by can could did do does for from had has have he her his how i if
    in is it its let may me might my no not of on or our she should so that the their them then
    there these they this those to was we were what when where which who whom whose why will with
    would yes you your user users assistant hi hello hey thanks thank please ok okay also just
    maybe sure today tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december
    ユーザー アシスタント
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Capitalised for grammar, not because they name something (weekday and month names are left
to the time route)."""

_WORD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'’+#\-]|\.(?=[A-Za-z0-9]))*")
"""A Latin word (``\\w`` would take in the CJK characters around it); a dot only inside it
("Node.js"), never the sentence's full stop."""
_CAPITALISED = re.compile(r"[A-Z][A-Za-z0-9'’+#.\-]*")
_MIXED = re.compile(
    r"(?<![A-Za-z0-9])(?:[a-z]+[A-Z][A-Za-z0-9]*|[A-Za-z]+-?\d+(?:\.\d+)*|\d+[A-Za-z]+)"
    r"(?![A-Za-z0-9])"
)
_QUOTED = re.compile(
    r"《([^《》]{1,40})》|「([^「」]{1,40})」|『([^『』]{1,40})』|“([^“”]{2,60})”"
    r"|\"([^\"]{2,60})\"|(?<![\w])'([^']{2,60})'(?![\w])"
)
_LATIN_IN_CJK = re.compile(
    rf"(?<=[{_CJK}])[A-Za-z][A-Za-z0-9+#.\-]*|[A-Za-z][A-Za-z0-9+#.\-]*(?=[{_CJK}])"
)
_KATAKANA = re.compile(r"[\u30a1-\u30fa\u30fc]{2,}")
_HAN_PLACE = re.compile(
    rf"([{_HAN}]{{2}})(市|省|县|州|区|镇|村)"
    rf"|([{_HAN}]{{2,4}}?)(大学|学院|公司|集团|银行|医院|中学|小学|酒店|机场|车站|公园|博物馆)"
)
_LEADING_FUNCTION_CHARS: Final = frozenset("在去到从住于是的了和与跟我你他她它们这那个也都很想要会")
_KNOWN_PLACES: Final = frozenset(
    """北京 上海 广州 深圳 杭州 成都 南京 武汉 西安 重庆 天津 苏州 厦门 青岛 长沙 香港 澳门 台北
    东京 大阪 京都 首尔 纽约 伦敦 巴黎 柏林 中国 日本 美国 韩国 英国 法国 德国 加拿大 澳大利亚
    新加坡""".split()  # noqa: SIM905
)
"""A few large places written without a suffix; everything else needs one (市, 大学…)."""


def normalize_entity(text: str) -> str:
    """The form entities are compared in: case-folded, spaces collapsed, possessives and edge
    punctuation stripped ("Caroline's" → "caroline", " PostgreSQL. " → "postgresql")."""
    value = re.sub(r"\s+", " ", text.strip()).casefold()
    value = re.sub(r"['’]s$", "", value)
    return value.strip(" .,;:!?()[]{}\"'’“”")


def _useful(entity: str) -> bool:
    if not entity or len(entity) > MAX_ENTITY_CHARS:
        return False
    if entity in _CAPITAL_STOPWORDS:
        return False
    if re.fullmatch(rf"[{_CJK}]", entity):
        return False  # one character says nothing on its own
    # a letter, or a bare number (a time or a count, not a name)
    return not (re.fullmatch(r"[a-z]", entity) or re.fullmatch(r"[\d.,:\-]+", entity))


_SENTENCE_VERB = re.compile(
    r"(?:prefers|likes|loves|enjoys|uses|works|lives|wants|needs|has|had|plans|thinks|believes"
    r"|finds|feels|keeps|makes|takes|gets|goes|went|says|said|is|was|\w+ed|\w+ing)",
    re.IGNORECASE,
)
"""A fact line may start with its verb ("Prefers tea", "Attended a workshop"): capitalised
there for grammar alone."""


def _sentence_start(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?:;\n-–—•*"


def _capitalised_runs(text: str) -> Iterable[str]:
    """Runs of capitalised words ("Grand Canyon", "New York City"), split at stopwords; a
    stopword-led run ("The Grand Canyon") keeps the rest."""
    words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]
    run: list[str] = []
    last_end = -1
    for word, start, end in words:
        capital = bool(_CAPITALISED.fullmatch(word))
        if capital and not run and _sentence_start(text, start):
            capital = not _SENTENCE_VERB.fullmatch(word)
        adjacent = run and text[last_end:start].strip() == ""
        if capital and normalize_entity(word) not in _CAPITAL_STOPWORDS:
            if run and not adjacent:
                yield " ".join(run)
                run = []
            run.append(word)
        else:
            if run:
                yield " ".join(run)
            run = []
        last_end = end
    if run:
        yield " ".join(run)


@lru_cache(maxsize=65536)
def extract_entities(text: str) -> tuple[str, ...]:
    """The entities the rules find in ``text``, normalised (:func:`normalize_entity`), in order
    of first appearance, at most :data:`MAX_ENTITIES_PER_FACT`. Pure; cached per text.

    A multi-word name also contributes its words ("Grand Canyon" → "grand canyon", "grand",
    "canyon"), so "the canyon" in a later message still meets it.
    """
    found: list[str] = []

    def add(raw: str) -> None:
        entity = normalize_entity(raw)
        if _useful(entity) and entity not in found:
            found.append(entity)

    for run in _capitalised_runs(text):
        add(run)
        parts = run.split()
        if len(parts) > 1:
            for part in parts:
                add(part)
    for match in _MIXED.finditer(text):
        add(match.group(0))
    for match in _QUOTED.finditer(text):
        add(next(g for g in match.groups() if g))
    for match in _LATIN_IN_CJK.finditer(text):
        add(match.group(0))
    for match in _KATAKANA.finditer(text):
        add(match.group(0))
    for match in _HAN_PLACE.finditer(text):
        name = match.group(1) or match.group(3)
        suffix = match.group(2) or match.group(4)
        while len(name) > 1 and name[0] in _LEADING_FUNCTION_CHARS:
            name = name[1:]
        add(name + suffix)
        if match.group(1) and len(name) >= 2:
            add(name)  # "杭州" for "杭州市"
    for place in _KNOWN_PLACES:
        if place in text:
            add(place)
    return tuple(found[:MAX_ENTITIES_PER_FACT])


def _query_candidates(text: str) -> set[str]:
    """Every string of ``text`` that could be an entity of the vocabulary: word 1–3-grams and
    2–6 character runs of CJK text, normalised."""
    candidates: set[str] = set()
    words = [normalize_entity(m.group(0)) for m in _WORD.finditer(text)]
    words = [w for w in words if w]
    for size in (1, 2, 3):
        for i in range(len(words) - size + 1):
            candidates.add(" ".join(words[i : i + size]))
    for run in re.findall(rf"[{_CJK}]+", text):
        for size in range(2, 7):
            for i in range(len(run) - size + 1):
                candidates.add(run[i : i + size])
    for entity in extract_entities(text):
        candidates.add(entity)  # quoted titles and the like, which are not plain n-grams
    return candidates


class EntityIndex:
    """Postings from entity to facts, for one list of facts (built once per memory revision).

    Kept as arrays — the names, and per name its facts (``ptr``/``post``) — so a derived
    snapshot can store the postings and a cold read open them without rebuilding them from
    every fact's entities (:meth:`from_postings`)."""

    def __init__(self, entities: Sequence[Iterable[str]], *, max_share: float = 0.05) -> None:
        size = len(entities)
        postings: dict[str, list[int]] = {}
        for position, names in enumerate(entities):
            for name in dict.fromkeys(names):
                postings.setdefault(name, []).append(position)
        limit = max(1, int(max_share * size)) if size >= 10 else size
        kept = sorted(name for name, where in postings.items() if len(where) <= limit)
        lengths = [len(postings[name]) for name in kept]
        ptr = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        post = np.fromiter(
            (p for name in kept for p in postings[name]), dtype=np.int64, count=int(ptr[-1])
        )
        self._set(size, kept, ptr, post)

    @classmethod
    def from_postings(
        cls, size: int, names: Sequence[str], ptr: np.ndarray, post: np.ndarray
    ) -> EntityIndex:
        """The index of ``size`` facts whose kept entities are ``names`` (in this order), the
        facts of name ``i`` being ``post[ptr[i]:ptr[i + 1]]`` (as :meth:`arrays` gives them)."""
        index = cls.__new__(cls)
        index._set(size, list(names), np.asarray(ptr, dtype=np.int64), np.asarray(post))
        return index

    def _set(self, size: int, names: list[str], ptr: np.ndarray, post: np.ndarray) -> None:
        self.size = size
        self.names = names
        """The entities kept: on at most ``max_share`` of the facts (with at least 10)."""
        self._where = {name: i for i, name in enumerate(names)}
        self._ptr = ptr
        self._post = post
        self._idf = np.log(1.0 + size / np.maximum(np.diff(ptr), 1)) if len(names) else ptr[:0]

    def arrays(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(names, ptr, post): what :meth:`from_postings` takes."""
        return self.names, self._ptr, self._post

    def facts_of(self, name: str) -> np.ndarray:
        """The facts (positions) that name ``name`` (empty when it is not kept)."""
        at = self._where.get(name)
        if at is None:
            return self._post[:0]
        return self._post[int(self._ptr[at]) : int(self._ptr[at + 1])]

    def idf(self, name: str) -> float:
        return float(self._idf[self._where[name]])

    @property
    def postings(self) -> dict[str, np.ndarray]:
        """Entity → facts naming it, for every kept entity."""
        return {name: self.facts_of(name) for name in self.names}

    def counts(self) -> np.ndarray:
        """Per fact, how many kept entities it names."""
        return np.bincount(np.asarray(self._post, dtype=np.int64), minlength=self.size).astype(
            np.float64
        )

    def __len__(self) -> int:
        return len(self.names)

    def matches(self, text: str) -> list[str]:
        """The vocabulary's entities that ``text`` names (sorted, for stable reports)."""
        if not self._where or not text.strip():
            return []
        return sorted(c for c in _query_candidates(text) if c in self._where)

    def bonus(self, text: str) -> tuple[np.ndarray, list[str]]:
        """Per fact, the idf-weighted share of the message's entities it names, in [0, 1]; and
        those entities."""
        values = np.zeros(self.size)
        names = self.matches(text)
        # a name inside a longer matched name ("canyon" in "grand canyon") counts once
        names = [n for n in names if not any(n != m and n in m.split() for m in names)]
        weights = {n: self.idf(n) for n in names}
        total = sum(weights.values())
        if total <= 0:
            return values, names
        for name in names:
            values[self.facts_of(name)] += weights[name] / total
        return np.minimum(values, 1.0), names
