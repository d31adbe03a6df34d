"""How an extracted fact is worded before it is judged and stored: about the user, in the third
person, without what a small model echoes (pure).

A fact is read later, out of its conversation, inside another model's system prompt; "I'm a
nurse" there reads as the *assistant* speaking. Large models follow the prompt's "User is …";
small ones copy the user's sentence. On 40 varied conversations the bundled SmolLM2-135M wrote
most of its facts in the first person ("I am a PhD student in astrophysics at ETH Zurich."),
some behind a transcript label it echoed ("User [2026-12-07 08:21 UTC]: Hi! I'm Maya, …"), a
list marker or a greeting, and, where the schema capped the string, cut mid-word. Each is fixed
here by a rule, so that the gates judge and the memory stores the same words:

- an echoed label (``User:``, ``User [date]:``, ``Assistant:``), a list marker (``-``, ``1.``)
  and a leading greeting or thanks ("Hi!", "Thanks,") are removed;
- a string cut at its cap (the grammar closed it mid-sentence) is cut back to its last full
  sentence, or else to its last full word (:func:`uncut`);
- English first person becomes the third person ("I'm" -> "User is", "I write" ->
  "User writes", "my" -> "the user's", "we" -> "User and their team"), Chinese 我 -> 用户.

What the rules do not touch is what the model wrote; they never add a word the model did not.
"""

from __future__ import annotations

import re
from typing import Final

from deermem_middleware.memory.sections import HISTORY_FIELDS, USER_FIELDS
from deermem_middleware.memory.update import MemoryUpdate

__all__ = ["reword_fact", "reword_update", "third_person", "uncut"]

_F = re.IGNORECASE

_NO_S_TEXT: Final = """is was has had will would can could should must might may did does shall
isn't wasn't hasn't won't wouldn't can't couldn't shouldn't didn't doesn't"""
_NO_S: Final = frozenset(_NO_S_TEXT.split())
_IRREGULAR: Final = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "go": "goes"}
_FIRST_PERSON: Final = (
    (re.compile(r"\bI'm\b|\bI am\b", _F), "User is"),
    (re.compile(r"\bI've\b", _F), "User has"),
    (re.compile(r"\bI'd\b", _F), "User would"),
    (re.compile(r"\bI'll\b", _F), "User will"),
    (re.compile(r"\bI was\b", _F), "User was"),
    (re.compile(r"\bmyself\b", _F), "themselves"),
    (re.compile(r"\bmine\b", _F), "the user's"),
    (re.compile(r"\bmy\b", _F), "the user's"),
    (re.compile(r"\bme\b", _F), "the user"),
    # "we" is the user with their team or family: "We use Kubernetes" keeps its plural verb
    (re.compile(r"\bwe're\b|\bwe are\b", _F), "User and their team are"),
    (re.compile(r"\bwe've\b", _F), "User and their team have"),
    (re.compile(r"\bwe\b", _F), "User and their team"),
    (re.compile(r"\bour\b", _F), "the user's"),
    (re.compile(r"\bours\b", _F), "the user's"),
)


def third_person(text: str) -> str:
    """English first person as the third person about "User" ("I always code at night" ->
    "User always codes at night"); text without a first person comes back unchanged."""
    text = re.sub(r"\b([IiWw]e?)’(m|ve|d|ll|re)\b", r"\1'\2", text)  # I’m, we’re
    for pattern, replacement in _FIRST_PERSON:
        text = pattern.sub(replacement, text)

    def verb(match: re.Match[str]) -> str:
        adverb, word = match.group(1) or "", match.group(2)
        lower = word.lower()
        if lower in _IRREGULAR:
            return f"User {adverb}{_IRREGULAR[lower]}"
        if lower in _NO_S or lower.endswith(("s", "ed")) or not lower.isalpha():
            return f"User {adverb}{word}"
        if re.search(r"(sh|ch|x|z|o)$", lower):
            return f"User {adverb}{word}es"
        if re.search(r"[^aeiou]y$", lower):
            return f"User {adverb}{word[:-1]}ies"
        return f"User {adverb}{word}s"

    text = re.sub(
        r"\bI\s+((?:always|never|usually|often|also|just|really|still|only|sometimes|rarely|"
        r"mostly)\s+)?([\w']+)",
        verb,
        text,
    )
    text = re.sub(r"\bI\b", "User", text)
    return re.sub(r"(^|[.!?]\s+)the user's", r"\1User's", text)


_LABEL: Final = re.compile(
    r"^\s*(?:(?:user|assistant|human|ai)\s*(?:\[[^\]\n]{0,40}\])?\s*[:：]\s*"
    r"|[-*•]\s+|\d{1,2}[.)]\s+)+",
    _F,
)
"""A transcript label the model echoed (``User [2026-12-07 08:21 UTC]:``) or a list marker."""
_GREETING: Final = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|thanks|thank you|ok(?:ay)?)"
    r"(?: there)?\s*[!,.]+\s*)+",
    _F,
)
"""A greeting or thanks before the fact ("Hi! I'm Maya" -> "I'm Maya"), with its punctuation."""
_SENTENCE_END: Final = re.compile(r"[.!?。！？](?=\s|$)")
_CJK: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def uncut(text: str, cap: int | None) -> str:
    """``text`` cut back to its last full sentence (or else its last full word) when it is
    exactly ``cap`` characters long: a grammar that enforces ``maxLength`` closes the string
    wherever the cap falls, mid-word. Shorter text is complete and comes back unchanged, and so
    does text that already ends with the "…" our own validation puts where it cut."""
    if cap is None or len(text) < cap or text.endswith("…"):
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if ends and ends[-1] >= min(20, len(text) // 3):
        return text[: ends[-1]].strip()
    if _CJK.search(text):
        return text.strip()
    head, _, _ = text.rpartition(" ")
    return (head or text).rstrip(" ,;:-–—").strip()


def reword_fact(content: str, *, cap: int | None = None) -> str:
    """``content`` as a fact about the user (see the module docstring); "" only if nothing but
    a label or a greeting was there."""
    text = uncut(content.strip(), cap)
    text = _LABEL.sub("", text)
    rest = _GREETING.sub("", text)
    text = rest if rest.strip() else text
    text = text.strip()
    text = re.sub(r"我(?!们)", "用户", text) if _CJK.search(text) else third_person(text)
    return text[:1].upper() + text[1:]


def reword_update(
    update: MemoryUpdate, *, fact_cap: int | None = None, summary_cap: int | None = None
) -> MemoryUpdate:
    """``update`` with each new fact and each summary reworded (:func:`reword_fact`: a summary
    is read in the same system prompt, "I'm migrating our service" as the assistant's words);
    the caps are the schema's ``maxLength`` where the model's decoder enforced it, None where
    nothing cut."""
    facts = []
    for fact in update.newFacts:
        content = reword_fact(fact.content, cap=fact_cap)
        if content and content != fact.content:
            fact = fact.model_copy(update={"content": content})
        if content:
            facts.append(fact)
    changes: dict[str, object] = {}
    if facts != list(update.newFacts):
        changes["newFacts"] = facts
    for group_name, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS)):
        group = getattr(update, group_name)
        fixed = {}
        for name in names:
            section = update.section(name)
            summary = reword_fact(section.summary, cap=summary_cap) if section.summary else ""
            if summary != section.summary:
                fixed[name] = section.model_copy(update={"summary": summary})
        if fixed:
            changes[group_name] = group.model_copy(update=fixed)
    return update.model_copy(update=changes) if changes else update
