"""What a fact asserts that someone must have said: names, counts, occupations, negations and
the user's own name (pure).

The share-of-terms check in :mod:`~deermem_middleware.memory.gates.grounding` weighs every
content word alike, so a small model's invention passes when enough ordinary words overlap.
From the one user turn "I'm Alice. I write Go at a payments company." the bundled SmolLM2-135M
stored "Alice is a freelance writer and uses PayPal to manage her business operations. She's
also a member of the GoFox team, …" with confidence 1.00: "write", "pay" and "Go" overlap. The
parts of a fact that make it *specific* — whom and what it names, how many, what the person
does for a living — are exactly what such a model invents, and what no paraphrase changes. This
module finds them; the grounding gate then requires each to have been said in the
conversation (a name only the assistant said makes the fact inferred, a name nobody said drops
it):

- **names**: a capitalised word that does not start a sentence ("PayPal", "Lyon", "St. Mary's"),
  an all-capitals word ("AWS", "NYC"), a word with a capital inside ("GoFox", "BigQuery"), and a
  word with a digit ("N4", "i18n"). Weekday and month names are not: they are *when*, and the
  extraction writes them from relative dates ("last Friday") that the user said another way.
- **counts**: a number that is not a date (not a year, not a day next to a month name): "3 dogs",
  "12 chapters", "67".
- **occupations**: what follows "is a", "works as a", "became a" … when it ends in an agent
  noun ("freelance writer", "backend engineer", "nurse"), all of it: "senior" in "a senior
  engineer" is a claim too.
- **negations** (:func:`negated`): "User is not vegan anymore" from "I've been vegan for six
  years" needs a negation somewhere in the conversation.
- **the user's own name** (:func:`claimed_name`): "User is Lina" needs the user to have given
  that name as theirs (:func:`introduces`), not "my daughter Lina".

Measured on the LoCoMo dev split (``benchmarks/locomo_grounding.py``, 1,487 gold observations):
requiring the specifics to have been said by someone in the session drops 5 gold observations
(0.4 points; they name a book or game from the annotators' own knowledge) and rejects 0.6
points more of the observations from another conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["claimed_name", "introduces", "negated", "specific_phrases"]

_MONTHS: Final = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DATE_WORDS: Final = frozenset(
    ("monday tuesday wednesday thursday friday saturday sunday " + _MONTHS).split()
)

_NAME: Final = re.compile(
    r"(?<![\w'’-])("
    r"[A-Z][\w'’.-]*[a-z0-9][\w'’-]*"  # Capitalised (also "St.", "McDonald's")
    r"|[A-Z]{2,}[\w'’-]*"  # AWS, NYC
    r"|[a-z]+[A-Z][\w'’-]*"  # iPhone, eBay
    r"|[A-Za-z]+\d[\w-]*|\d+[A-Za-z][\w-]*"  # N4, i18n, 3D (not "3rd", see _ORDINAL)
    r")"
)
_ORDINAL: Final = re.compile(r"^\d+(?:st|nd|rd|th)$", re.IGNORECASE)
_SENTENCE_START: Final = re.compile(r"(?:^|[.!?:;]\s+|[\"“(]\s*)$")
_NUMBER: Final = re.compile(r"(?<![\w.,-])(\d+(?:[.,]\d+)?)(?![\w-]|[.,]\d)")
_YEAR: Final = re.compile(r"^(?:1[89]|20)\d\d$")

_ROLE: Final = re.compile(
    r"\b(?:is|was|am|are|were|works? as|worked as|working as|became|becomes|as)\s+(?:an?)\s+"
    r"((?:[\w-]+\s+){0,2}?[\w-]+?)"
    r"(?=\s+(?:at|in|for|with|and|who|that|from|on|of|to|by|since|but|or|\w+ing)\b"
    r"|[,.;:!?)]|\s*$)",
    re.IGNORECASE,
)
_AGENT: Final = re.compile(r"(?:[^e]er|[^o]or|ist|ian|eer|man|woman)$|^(?:nurse|chef|coach)$")
_NOT_AN_OCCUPATION: Final = frozenset(
    [
        "member",
        "members",
        "owner",
        "lover",
        "beginner",
        "believer",
        "supporter",
        "follower",
        "partner",
        "number",
        "user",
        "customer",
        "fan",
        "player",
        "fighter",
        "survivor",
        "reader",
        "viewer",
        "listener",
        "speaker",
        "other",
        "sister",
        "brother",
        "mother",
        "father",
        "daughter",
        "grandmother",
        "grandfather",
        "neighbor",
        "neighbour",
        "color",
        "colour",
        "flavor",
        "flavour",
        "favor",
        "favour",
        "behavior",
        "behaviour",
        "humor",
        "humour",
        "error",
        "minor",
        "major",
        "anchor",
        "mirror",
        "horror",
        "door",
        "floor",
    ]
)


def _starts_sentence(text: str, start: int) -> bool:
    return bool(_SENTENCE_START.search(text[max(0, start - 3) : start])) or start == 0


def _names(text: str) -> list[str]:
    found = []
    for match in _NAME.finditer(text):
        word = match.group(1).rstrip(".'’")
        lower = word.lower().rstrip("s").rstrip("'’")
        if lower in _DATE_WORDS or word.lower() in _DATE_WORDS or _ORDINAL.match(word):
            continue
        plain = (word[:1].isupper() and word[1:].islower()) or "'" in word or "’" in word
        if plain and _starts_sentence(text, match.start()):
            continue  # "Writes Go", "Pepper is …": the first word of a sentence proves nothing
        found.append(word)
    return found


def _counts(text: str) -> list[str]:
    found = []
    for match in _NUMBER.finditer(text):
        number = match.group(1)
        if _YEAR.match(number):
            continue
        around = text[max(0, match.start() - 12) : match.end() + 12].lower()
        if any(re.search(rf"\b{month}\b", around) for month in _MONTHS.split()):
            continue  # "May 3", "3 March": a date
        found.append(number)
    return found


def _occupations(text: str) -> list[str]:
    found = []
    for match in _ROLE.finditer(text):
        phrase = match.group(1)
        head = phrase.split()[-1].lower()
        if head in _NOT_AN_OCCUPATION or not _AGENT.search(head):
            continue
        found.append(phrase)
    return found


def _as_user(fact: str, subjects: Sequence[str]) -> str:
    """``fact`` with each subject word (the user's names, "the user") written "User"."""
    text = fact
    for subject in subjects:
        if subject and not re.search(r"[^\x00-\x7f]", subject):
            text = re.sub(
                rf"(?<![\w]){re.escape(subject)}(?:'s|’s)?(?![\w])", "User", text, flags=re.I
            )
    return text


def specific_phrases(fact: str, subjects: Sequence[str] = ()) -> list[str]:
    """The names, counts and occupations ``fact`` asserts (as written, in order, each once),
    without the user's own subject words (``subjects``: "user", the user's names)."""
    text = _as_user(fact, subjects)
    phrases = [*_names(text), *_counts(text), *_occupations(text)]
    return [p for p in dict.fromkeys(phrases) if p.lower() not in ("user", "user's")]


_NEGATION: Final = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|no longer|anymore|any more)\b|n[’']t\b"
    r"|不|没",
    re.IGNORECASE,
)


def negated(text: str) -> bool:
    """Whether ``text`` says no to something ("not", "never", "no longer", "n't", 不, 没).


    A fact that negates what the user only affirmed contradicts them: "User is not vegan
    anymore" from "I've been vegan for six years" (the bundled model wrote it); a negated fact
    needs a negation somewhere in the conversation."""
    return bool(_NEGATION.search(text))


_NAME_CLAIM: Final = re.compile(
    r"^\s*User(?:['’]s name)?\s+(?:is|=)\s+(?:called\s+|named\s+)?"
    r"(?P<name>[A-Z][\w'’]*[a-z][\w'’]*)\s*(?:[,.;!]|$)"
)


def claimed_name(fact: str, subjects: Sequence[str] = ()) -> str | None:
    """The name ``fact`` gives the user ("User is Lina", "User's name is Maya, …"), if any."""
    match = _NAME_CLAIM.match(_as_user(fact, [s for s in subjects if s != "user"]))
    return match.group("name") if match else None


def introduces(texts: Sequence[str], name: str) -> bool:
    """Whether one of ``texts`` gives ``name`` as the speaker's own ("I'm Lina", "my name is
    Lina", "call me Lina", "Lina here"): a name said about someone else ("my daughter Lina") is
    not the user's — the bundled model stored "User is Lina" from it."""
    word = re.escape(name)
    pattern = re.compile(
        rf"\b(?:i['’]?m|i am|my name['’]?s|my name is|call me|this is|it['’]?s)\s+{word}\b"
        rf"|(?:^|[.!?]\s*){word}\s+here\b|我(?:是|叫){word}",
        re.IGNORECASE,
    )
    return any(pattern.search(text) for text in texts)
