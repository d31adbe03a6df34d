"""When two fact texts are the same fact, and when they contradict each other (pure, cached).

Apart from the fact algebra (:mod:`~deermem_middleware.memory.facts`) because reading is not
applying: imports and manual edits compare by :func:`normalize_fact_text`, recall's precedence asks
:func:`facts_conflict`, benchmarks measure :func:`is_near_duplicate` — none of them apply an update.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

__all__ = [
    "NEAR_DUPLICATE_THRESHOLD",
    "FactShape",
    "fact_shape",
    "fact_similarity",
    "facts_conflict",
    "is_near_duplicate",
    "near_duplicate_score",
    "normalize_fact_text",
]


_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)


@lru_cache(maxsize=16384)
def normalize_fact_text(text: str) -> str:
    """The comparison key of a fact: NFKC, casefolded, single-spaced, no edge punctuation.

    Format characters (zero-width spaces and joiners, direction marks) are dropped too: a model
    echoing a known fact with one of them inside must reinforce it, not add an invisible twin.
    """
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _SPACE.sub(" ", folded).strip()
    stripped = _EDGE_PUNCT.sub("", folded)
    return stripped or folded


# -- near-duplicates ----------------------------------------------------------------------------

NEAR_DUPLICATE_THRESHOLD: Final = 0.85
"""Character 3-gram Jaccard similarity (of the texts without articles, pronouns, the word "user"
and plural/third-person ``s``) from which two facts are the same fact.

Chosen from pairs an extraction model actually produces: rewordings of one fact sit above it
("User prefers dark mode" / "The user prefers dark mode." = 1.0; "every single morning" or "with
old friends" for "every morning", "with friends" in a ten-word sentence ≈ 0.86–0.90); different
facts sharing most of their words sit below ("User uses MySQL" / "User uses PostgreSQL" ≈ 0.28,
"daughter"/"son" in a ten-word sentence ≈ 0.71, "User is a senior engineer" / "… now" ≈ 0.82,
"a cup of" inserted ≈ 0.84). Character n-grams alone cannot see that "since 2021" and "since 2022"
(0.92) or "Python over Java" and "Java over Python" (0.92) differ, so :func:`is_near_duplicate`
also requires the same numbers, the same negations, no word *replaced* by another, and the same
word order. A missed merge costs a near-twin line that decay and trimming clean up; a wrong merge
silently loses a new fact — hence the precision-first choice."""

_STOP_WORDS: Final = frozenset(
    {"a", "an", "the", "user", "s", "their", "his", "her", "its", "they", "he", "she", "them"}
)
"""Words that do not change which fact is meant ("The user's …" / "User's …")."""
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(
    r"\b(?:not|no|never|nor|neither|none|nothing|nobody|without|cannot)\b|n['’]t\b"
    r"|[不没沒无無别別]"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _stem(word: str) -> str:
    """Plural / third-person ``s`` only ("prefers" = "prefer"); tense and aspect ("learned",
    "learning") are kept apart on purpose: they can be different facts."""
    if len(word) > 3 and not word.endswith(("ss", "us", "is")):
        if word.endswith("ies") and len(word) > 4:
            return word[:-3] + "y"
        if word.endswith("s"):
            return word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class FactShape:
    """What near-duplicate detection compares of one text."""

    words: tuple[str, ...]
    grams: frozenset[str]
    numbers: tuple[str, ...]
    negations: int


@lru_cache(maxsize=8192)
def fact_shape(text: str) -> FactShape:
    normalized = normalize_fact_text(text)
    words = tuple(_stem(w) for w in _WORD.findall(normalized) if w not in _STOP_WORDS)
    key = " ".join(words) or normalized
    padded = f" {key} "
    grams = frozenset(padded[i : i + 3] for i in range(max(1, len(padded) - 2)))
    return FactShape(
        words=words,
        grams=grams,
        numbers=tuple(sorted(_NUMBER.findall(normalized))),
        negations=len(_NEGATION.findall(normalized)),
    )


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def fact_similarity(a: str, b: str) -> float:
    """Character 3-gram Jaccard similarity of two fact texts in [0, 1] (see
    :data:`NEAR_DUPLICATE_THRESHOLD` for what is compared)."""
    return _jaccard(fact_shape(a).grams, fact_shape(b).grams)


def near_duplicate_score(x: FactShape, y: FactShape, threshold: float) -> float | None:
    """The similarity when ``x`` and ``y`` are the same fact, else None."""
    small, large = sorted((len(x.grams), len(y.grams)))
    if large and small / large < threshold:  # Jaccard ≤ |small| / |large|: skip the set work
        return None
    score = _jaccard(x.grams, y.grams)
    if score < threshold:
        return None
    if score < 1.0:
        if x.numbers != y.numbers or x.negations != y.negations:
            return None  # "since 2021" / "since 2022", "likes" / "does not like"
        only_x = {w for w in set(x.words) - set(y.words) if not _CJK.search(w)}
        only_y = {w for w in set(y.words) - set(x.words) if not _CJK.search(w)}
        if only_x and only_y:
            return None  # a word replaced by another: "daughter" / "son"
        if Counter(x.words) == Counter(y.words) and x.words != y.words:
            return None  # same words, another order: "Python over Java" / "Java over Python"
    return score


def is_near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE_THRESHOLD) -> bool:
    """Do ``a`` and ``b`` state the same fact (exactly, after normalisation, or near enough)?"""
    if normalize_fact_text(a) == normalize_fact_text(b):
        return True
    return near_duplicate_score(fact_shape(a), fact_shape(b), threshold) is not None


# -- conflicts ----------------------------------------------------------------------------------

CONFLICT_FRAME_SHARE: Final = 0.6
"""The share of the longer text's words two facts must share, around one replaced value, to be
two values of the same slot (see :func:`facts_conflict`)."""
MAX_VALUE_WORDS: Final = 3
"""The longest replaced value (in words) that still reads as one slot's value."""

_NEGATIONS: Final = frozenset(
    {"not", "no", "never", "nor", "neither", "none", "nothing", "nobody", "cannot"}
)
_AUXILIARIES: Final = frozenset(
    {"do", "doe", "did", "is", "am", "are", "was", "were", "be", "been", "longer", "anymore",
     "any", "ever", "really", "to", "can", "will", "would", "should"}
)  # fmt: skip
"""Words between a negation and what it denies ("does *not* like", "*no longer* drinks")."""
_MULTI_VALUED: Final = frozenset(
    {"like", "love", "enjoy", "learn", "learning", "has", "have", "had", "play", "playing",
     "speak", "know", "visit", "visited", "own", "read", "reading", "watch", "watching", "use",
     "using", "eat", "drink", "listen", "collect", "study", "studying", "follow"}
)  # fmt: skip
"""Predicates that take many values at once: "is learning Spanish" and "is learning piano" are
two facts, not two values of one slot."""
_CONTRACTED_NOT = re.compile(r"n['’]t\b")


@lru_cache(maxsize=8192)
def _conflict_words(text: str) -> tuple[str, ...]:
    """The words :func:`facts_conflict` compares: :func:`normalize_fact_text`, "n't" spelt
    "not", without articles, pronouns and "user", plural/third-person ``s`` dropped."""
    normalized = _CONTRACTED_NOT.sub(" not", normalize_fact_text(text))
    return tuple(_stem(w) for w in _WORD.findall(normalized) if w not in _STOP_WORDS)


def _denied(words: tuple[str, ...]) -> set[str]:
    """What a text denies: the first word after each negation that is no auxiliary."""
    denied: set[str] = set()
    for i, word in enumerate(words):
        if word in _NEGATIONS:
            rest = [w for w in words[i + 1 :] if w not in _AUXILIARIES and w not in _NEGATIONS]
            if rest:
                denied.add(rest[0])
            else:  # only auxiliaries follow ("… is not anymore"): the first of them
                after = [w for w in words[i + 1 :] if w not in _NEGATIONS]
                denied.update(after[:1])
    return denied


def _denies(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    """Does ``y`` deny what ``x`` asserts, the rest of the sentence shared?"""
    if not any(w in _NEGATIONS for w in y):
        return False
    denied_x = _denied(x)
    asserted = {w for w in x if w not in _NEGATIONS and w not in denied_x}
    hit = _denied(y) & asserted
    shared = (set(x) & set(y)) - _NEGATIONS
    return bool(hit) and len(shared) >= 2


def _replaces(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    """Is ``y`` ``x`` with one short value replaced, in a shared frame (no negation in either)?"""
    if any(w in _NEGATIONS for w in (*x, *y)):
        return False  # "does not eat meat" / "does not eat fish": two denials can both hold
    prefix = 0
    while prefix < min(len(x), len(y)) and x[prefix] == y[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(x), len(y)) - prefix and x[len(x) - 1 - suffix] == y[len(y) - 1 - suffix]
    ):
        suffix += 1
    value_x, value_y = x[prefix : len(x) - suffix], y[prefix : len(y) - suffix]
    if not value_x or not value_y:
        return False  # a detail added ("Uses Go" / "Uses Go 1.22 at work"): a refinement
    if len(value_x) > MAX_VALUE_WORDS or len(value_y) > MAX_VALUE_WORDS:
        return False
    frame = prefix + suffix
    if frame < 2 or frame < CONFLICT_FRAME_SHARE * max(len(x), len(y)):
        return False  # "Uses MySQL" / "Uses PostgreSQL": one shared word is no slot
    predicate = x[prefix - 1] if prefix else x[len(x) - suffix]
    return predicate not in _MULTI_VALUED


@lru_cache(maxsize=16384)
def facts_conflict(a: str, b: str) -> bool:
    """Do ``a`` and ``b`` give the same slot different values (pure, symmetric)?

    Two shapes count, both within one sentence frame: a *replaced value* — the same words
    around one short span that differs ("wants to be called Sam" / "… Samuel", "prefers dark
    mode" / "… light mode", "is 34" / "is 35"), at least two shared words making up
    :data:`CONFLICT_FRAME_SHARE` of the longer text, and not after a predicate that takes many
    values ("is learning Spanish" / "… piano", :data:`_MULTI_VALUED`); and a *denial* — one text
    negates a word the other asserts, sharing two words or more ("likes coffee" / "does not like
    coffee", "… Samuel, not Sam").

    Never a conflict: a restatement (:func:`is_near_duplicate`: reinforcement), an added
    detail ("Uses Go" / "Uses Go 1.22 at work": a refinement), a negated word the other text
    does not assert ("Uses Go, not Rust"), two denials, texts in scripts without spaces (no
    word frame to compare: only an extraction's explicit ``supersedes`` links them).

    Precision first, like near-duplicates: what this decides is that the user's own fact is
    shown *instead of* an extracted one (:mod:`deermem_middleware.retrieval.precedence`). A
    missed conflict leaves both lines in the block, the manual one not necessarily first; a
    false one hides an extracted fact from the block while the user's own is shown — it stays
    stored and active, and comes back once the manual fact is edited or removed.
    """
    x, y = _conflict_words(a), _conflict_words(b)
    if len(set(x) & set(y)) < 2:
        return False  # both shapes share two words or more: most pairs end here, cheaply
    if not (_denies(x, y) or _denies(y, x) or _replaces(x, y) or _replaces(y, x)):
        return False
    # the near-duplicate test last: it is the costly one (character 3-grams), and most pairs
    # sharing two words have neither shape (every selected fact meets every manual one)
    return not is_near_duplicate(a, b)
