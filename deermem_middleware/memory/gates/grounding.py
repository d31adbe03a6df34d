"""Grounding: does what the *user* said support a fact the extraction proposes? (pure)

A fact is only as good as its evidence. Small models (and large ones, now and then) turn the
assistant's own answer into a user "preference", or invent a detail nobody said. Before a newly
extracted fact is stored it is checked against the user's turns of the conversation it came
from:

- **lexical support**: the share of the fact's content terms that the user's turns contain
  (the best run of :data:`DEFAULT_WINDOW` consecutive user turns: evidence is local).
  Terms are words, lowercased, with a light suffix stripping ("painting", "painted", "paints"
  all match "paint"; one stem a prefix of the other also matches: "counseling" / "counselor"),
  numbers kept; in Chinese, Japanese and Korean text, which has no spaces, each character is a
  term ("用户养了一只猫" is supported by "我养的猫": 养 and 猫). Subject words — "User",
  "The user", "用户", the user's own name — and stopwords are not content: a fact must never be
  "supported" by the word *user*. Each term weighs by its length (capped; very common words
  weigh 1), a cheap stand-in for rarity: "LGBTQ" and "adoption" are stronger evidence than
  "help" or "new".
- **semantic support** (optional, when an embedding function is passed in): the highest cosine
  between the fact and one user turn, rescaled and mixed into the score (:func:`support_for`).
  The core takes a plain callable, so it stays independent of any model.

Measured on the LoCoMo dev split (``benchmarks/locomo_grounding.py``; 1,487 observations; each
speaker's observations of a session checked against that speaker's turns of the session, the
other speaker's turns playing the assistant's): at the default :data:`DEFAULT_MIN_SUPPORT`,
with the check of :mod:`~deermem_middleware.memory.gates.specifics` (names, counts,
occupations, negations and the user's own name must have been said), the lexical gate keeps
96.8 % of the gold observations and rejects 94.2 % of observations taken from another
conversation (97.6 % and 95.9 % with multilingual-e5-small; the share rule alone: 97.2 % and
93.6 %). Observations about the *other* speaker share the conversation's topic, so only 36.0 % of
them (27.6 %) are rejected: the gate catches what nobody said and what only the assistant said
in its own words, not every misattribution of a shared topic. On the bundled 135M model's
recorded proposals (``benchmarks/small_model_facts.py``) it stores 90 % of what users said and
30 % of what the model invented. The Performance page has the tables.

What fails the check is, by :data:`GroundingMode`, dropped (``drop``, the default), stored as
``sourceKind: "inferred"`` with its confidence capped (``infer``), or not checked (``off``).
``drop`` is the default because what fails is, in the measurements above, mostly text the user
never said, while 3.2 % of real facts are lost; an ``inferred`` fact would still be injected
into later conversations as if it were known.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from deermem_middleware.memory.gates.specifics import (
    claimed_name,
    introduces,
    negated,
    specific_phrases,
)

__all__ = [
    "DEFAULT_INFERRED_CONFIDENCE_CAP",
    "DEFAULT_MIN_SUPPORT",
    "DEFAULT_WINDOW",
    "SEMANTIC_RANGE",
    "SEMANTIC_WEIGHT",
    "Embedder",
    "GroundingMode",
    "Support",
    "content_terms",
    "lexical_support",
    "semantic_support",
    "specific_phrases",
    "subject_words",
    "support_for",
    "unsaid_phrases",
]

GroundingMode = Literal["drop", "infer", "off"]

DEFAULT_MIN_SUPPORT: Final = 0.3
"""Share of a fact's (length-weighted) content terms that the user's turns must contain. Chosen
on the LoCoMo dev split, where it is the highest threshold at which the share rule alone keeps
≥ 97 % of the gold observations: 97.2 % kept / 93.6 % of foreign observations rejected (0.25
keeps 98.1 % but rejects 88.2 %, 0.35 rejects 95.7 % but keeps 95.8 %); with the specifics
check, 96.8 % / 94.2 %."""

DEFAULT_WINDOW: Final = 3
"""Evidence is local: the support of a fact is the best run of this many consecutive user
turns, not all of them together — with every turn of a long conversation pooled, chance
support grows with its vocabulary (on LoCoMo sessions of ~20 turns per speaker, pooling rejects
3 points fewer foreign observations at the same share kept)."""

SEMANTIC_WEIGHT: Final = 0.3
"""With an embedding function, the support score is ``(1 − w) × lexical + w × semantic``."""

SEMANTIC_RANGE: Final = (0.78, 0.92)
"""Cosines mapped linearly onto semantic support 0..1 (multilingual-e5-small: its cosines are
all high — on LoCoMo the median best cosine of a foreign observation to a session's turns is
0.80, of a gold one 0.86 — so they are rescaled before they are mixed; another model needs its
own range)."""

DEFAULT_INFERRED_CONFIDENCE_CAP: Final = 0.7
"""Confidence of an unsupported fact kept by ``grounding: infer``: the default
``fact_confidence_threshold``, so such facts are stored at the lowest confidence that is."""

Embedder = Callable[[Sequence[str]], "np.ndarray"]
"""Texts in, one unit-length (or any: they are normalised) vector per text out."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")

# Function words and the words every fact about a user is made of; they never count as support.
_STOPWORD_TEXT: Final = """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn doing
    don down during each even ever every few for from further get gets getting got had hadn has
    hasn have haven having he her here hers herself him himself his how however i if in into is
    isn it its itself just let lets like ll may me might mine more most much must mustn my
    myself no nor not now of off often on once one only or other others our ours ourselves out
    over own quite rather re really s same shall she should shouldn so some such t than that
    the their theirs them themselves then there these they this those though through thus to
    too under until up upon us ve very via was wasn way we well were weren what when where
    whether which while who whom whose why will with within without won would wouldn yet you
    your yours yourself yourselves d m o y likes liked liking
    user users user's assistant assistants
    currently recently also still already lately previously now
    mention mentions mentioned express expresses expressed expressing share shares shared
    sharing tell tells told say says said talk talks talked discuss discusses discussed
    conversation ask asks asked seem seems seemed appear appears appeared indicate indicates
    indicated describe describes described note notes noted state states stated reveal
    reveals revealed
"""
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
"""English function words, plus "user"/"assistant", time adverbs that a model adds to a fact
("currently", "recently") and reporting verbs ("mentioned", "expressed", "shared that"): they
describe the telling, not what was told, and a user rarely says them."""

_SUBJECTS: Final = ("the user", "this user", "user", "用户", "该用户", "这位用户", "使用者")

_CJK_STOP_CHARS: Final = frozenset(
    "的了着过是在有和与及或也都就还很又再才把被让给对向从到于之其这那个些么吗呢吧啊呀哦嗯"
    "我你您他她它们自己一只位种件样"
)
"""Chinese function characters, pronouns and classifiers (一只, 一位) that carry no content."""

_SUFFIXES: Final = (
    "ations",
    "ation",
    "ings",
    "ing",
    "ness",
    "ments",
    "ment",
    "ies",
    "ied",
    "ers",
    "er",
    "est",
    "ed",
    "es",
    "ly",
    "s",
)


_LIGHT_TEXT: Final = """
    feel feels felt help helps helped helping time times work works worked working life lot lots
    day days find finds found keep keeps kept going go goes went gone make makes made making take
    takes took taking use used new great good nice fun love loves loved enjoy enjoys enjoyed want
    wants wanted think thinks thought know knows knew see saw seen look looks looked come came
    give gave thing things people someone something way ways year years month week today
    yesterday tomorrow last next first back big little long much many able try tries tried start
    started plan plans planned planning happy excited excitement glad proud amazing
    awesome super important special hard best better always never sure place part
"""


def _stem(word: str) -> str:
    """A light suffix stripper ("painting"/"painted"/"paints" -> "paint"); never below 3
    characters. Not Porter: it only has to make a fact's and a turn's forms meet."""
    if word.isdigit() or len(word) <= 3:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                stem += "y"
            elif len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiousl":
                stem = stem[:-1]  # "running" -> "run", "planned" -> "plan"
            return stem
    return word


_LIGHT: Final = frozenset(_stem(w) for w in _LIGHT_TEXT.split())
"""Common content words ("help", "time", "work", "new", "fun"): they count, with the weight of a
one-letter word — a stand-in for low rarity (two same-topic chats share them by chance)."""


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("’", "'")


def subject_words(names: Iterable[str] = ()) -> tuple[str, ...]:
    """The words that name the user in a fact: "user", "the user", "用户", … plus ``names``
    (the user's own name(s), e.g. from a profile or a user id), longest first."""
    words = {_normalise(w).strip() for w in (*_SUBJECTS, *names) if w and w.strip()}
    return tuple(sorted(words, key=len, reverse=True))


def _strip_subjects(text: str, subjects: Sequence[str]) -> str:
    for subject in subjects:
        if _CJK_CHAR.search(subject):
            text = text.replace(subject, " ")
        else:
            text = re.sub(
                rf"(?<![^\W_]){re.escape(subject)}(?:'s|s')?(?![^\W_])", " ", text, flags=re.I
            )
    return text


def content_terms(text: str, subjects: Sequence[str] = ()) -> dict[str, float]:
    """Stemmed content terms of ``text`` with their weights (word length, capped at 8; CJK
    characters 2), without subject words, stopwords and possessive endings."""
    text = _strip_subjects(_normalise(text), subjects)
    terms: dict[str, float] = {}
    for match in _WORD.finditer(text):
        token = match.group(0)
        if _CJK_CHAR.search(token):
            for char in token:
                if _CJK_CHAR.match(char) and char not in _CJK_STOP_CHARS:
                    terms["\x01" + char] = 2.0
            continue
        token = re.sub(r"'(s|re|ve|ll|d|m|t)$", "", token).replace("'", "")
        if token in _STOPWORDS or (len(token) < 2 and not token.isdigit()):
            continue
        stem = _stem(token)
        terms[stem] = 1.0 if stem in _LIGHT else float(min(len(token), 8))
    return terms


def _matches(term: str, vocabulary: set[str], prefixes: Sequence[str]) -> bool:
    if term in vocabulary:
        return True
    if term.startswith("\x01") or term.isdigit() or len(term) < 4:
        return False
    # one stem a prefix of the other ("counsel" / "counselor"), both at least 4 characters
    return any(len(p) >= 4 and (p.startswith(term) or term.startswith(p)) for p in prefixes)


def lexical_support(
    fact: str,
    texts: Sequence[str],
    subjects: Sequence[str] = (),
    *,
    window: int = DEFAULT_WINDOW,
) -> float:
    """Weighted share of ``fact``'s content terms found in ``window`` consecutive ``texts``
    (the best such run; 0 when the fact has no content terms: nothing to be supported by)."""
    wanted = content_terms(fact, subjects)
    total = sum(wanted.values())
    if not wanted or not texts:
        return 0.0
    vocabularies = [set(content_terms(text, subjects)) for text in texts]
    span = max(1, min(window, len(vocabularies)))
    best = 0.0
    for start in range(len(vocabularies) - span + 1):
        vocabulary = set().union(*vocabularies[start : start + span])
        prefixes = [t for t in vocabulary if not t.startswith("\x01") and not t.isdigit()]
        found = sum(w for t, w in wanted.items() if _matches(t, vocabulary, prefixes))
        best = max(best, found / total)
        if best >= 1.0:
            break
    return best


def semantic_support(fact: str, texts: Sequence[str], embed: Embedder) -> float:
    """Highest cosine between ``fact`` and one of ``texts`` (0 without texts)."""
    texts = [t for t in texts if t.strip()]
    if not texts:
        return 0.0
    matrix = np.asarray(embed([fact, *texts]), dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix = matrix / norms
    return float(np.max(matrix[1:] @ matrix[0]))


def _vocabulary(texts: Sequence[str], subjects: Sequence[str]) -> tuple[set[str], list[str]]:
    vocabulary: set[str] = set()
    for text in texts:
        vocabulary.update(content_terms(text, subjects))
    return vocabulary, [t for t in vocabulary if not t.startswith("\x01") and not t.isdigit()]


def unsaid_phrases(
    phrases: Sequence[str], texts: Sequence[str], subjects: Sequence[str] = ()
) -> tuple[str, ...]:
    """The ``phrases`` (see :func:`specific_phrases`) some content term of which no text of
    ``texts`` contains (a phrase without content terms is never unsaid)."""
    if not phrases:
        return ()
    vocabulary, prefixes = _vocabulary(texts, subjects)
    return tuple(
        phrase
        for phrase in phrases
        if not all(_matches(t, vocabulary, prefixes) for t in content_terms(phrase, subjects))
    )


@dataclass(frozen=True, slots=True)
class Support:
    """How well a fact is supported: by the user's turns, and by the assistant's."""

    user: float
    """Lexical support by the user's turns."""
    assistant: float
    """Lexical support by the assistant's turns."""
    semantic: float | None = None
    """Best cosine to one user turn (None: no embedding function)."""
    score: float = 0.0
    """What is compared with ``min_support``: ``user``, mixed with the semantic support."""
    supported: bool = False
    """``score`` reaches ``min_support`` and :attr:`unsaid` is empty."""
    unsaid: tuple[str, ...] = ()
    """What the fact asserts that nobody said (neither the user nor the assistant): names,
    counts and occupations, a negation, a name the user did not give as their own. Invented,
    whatever the score."""
    assistant_said: tuple[str, ...] = ()
    """Names, counts, occupations or a negation only the assistant said: the fact is at best
    the user's agreement (inferred)."""

    @property
    def assistant_only(self) -> bool:
        """Not supported by the user, but by the assistant's answers: an echo of the assistant."""
        return not self.supported and self.assistant > self.user


def support_for(
    fact: str,
    user_texts: Sequence[str],
    assistant_texts: Sequence[str] = (),
    *,
    subjects: Sequence[str] = (),
    min_support: float = DEFAULT_MIN_SUPPORT,
    embed: Embedder | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
    semantic_range: tuple[float, float] = SEMANTIC_RANGE,
) -> Support:
    """Whether the user's turns support ``fact`` (see the module docstring): its score — the
    lexical support, or with ``embed`` ``(1 − semantic_weight) × lexical + semantic_weight ×``
    the best cosine to one user turn rescaled over ``semantic_range`` — reaches
    ``min_support``, and every name, count, occupation and negation it asserts was said by
    someone in the conversation, a name it gives the user by the user as their own (see
    :mod:`~deermem_middleware.memory.gates.specifics`)."""
    user = lexical_support(fact, user_texts, subjects)
    assistant = lexical_support(fact, assistant_texts, subjects) if assistant_texts else 0.0
    not_by_user = unsaid_phrases(specific_phrases(fact, subjects), user_texts, subjects)
    unsaid = unsaid_phrases(not_by_user, assistant_texts, subjects)
    assistant_said = tuple(p for p in not_by_user if p not in unsaid)
    name = claimed_name(fact, subjects)
    if name is not None and not introduces(user_texts, name):
        unsaid += (f"{name} as the user's own name",)
    if negated(fact) and not any(negated(t) for t in user_texts):
        if any(negated(t) for t in assistant_texts):
            assistant_said += ("a negation",)
        else:
            unsaid += ("a negation",)
    score = user
    semantic: float | None = None
    if embed is not None and user_texts:
        semantic = semantic_support(fact, user_texts, embed)
        low, high = semantic_range
        scaled = min(1.0, max(0.0, (semantic - low) / (high - low))) if high > low else 0.0
        score = (1 - semantic_weight) * user + semantic_weight * scaled
    supported = score >= min_support and not unsaid
    return Support(user, assistant, semantic, score, supported, unsaid, assistant_said)
