"""The value gate: what is not worth remembering, and what the user asked us to remember (pure).

Long-term memory is for what stays true about a person. Extraction models — small ones above
all — also propose what only mattered for one turn: the task of the moment ("User asked to
translate this paragraph", "wants a summary of the article", 用户让助手翻译这段话), small talk
("User said hello", "thanked the assistant", 用户打招呼/说谢谢) and one-off instructions ("asked
to make the answer shorter this time", 这次回答短一点). Stored, they crowd out real facts and
are injected into later, unrelated conversations. Rules, English and Chinese, reject them;
a durable marker ("prefers", "always", "from now on", 喜欢, 以后, 每次) keeps a fact whatever
else it says, so "prefers short answers", "wants code in Go" and "喜欢简洁的回答" are never
touched. Rules first, on purpose: they are cheap, deterministic, testable and explainable in a
log line; a learnt classifier can come later behind the same function.

The other half: an explicit "remember that …" / "remember: …" / "please remember …" / "记住…" /
"请记住…" in a *user* turn is the strongest signal there is. :func:`remembered_clauses` finds
them (not look-alikes: "I remember that trip", "do you remember…?", "I can't remember",
"我记住了"; and without "please" / "can you" only about the speaker — "remember, practice makes
perfect" or "remember, I'm here for you" is encouragement: 5 of the 50 LoCoMo dev turns with
"remember" were, before this rule), and :func:`clause_fact` turns one into a fact in the third
person ("remember that I'm allergic to peanuts" -> "User is allergic to peanuts") with a
category from a simple rule. On the 1,487 LoCoMo dev observations (durable facts about people)
:func:`value_rejection` rejects none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from deermem_middleware.memory.document import FactCategory
from deermem_middleware.memory.gates.grounding import content_terms, subject_words
from deermem_middleware.memory.wording import third_person

__all__ = [
    "REMEMBER_CONFIDENCE",
    "Remembered",
    "clause_category",
    "clause_fact",
    "remembered_clauses",
    "value_rejection",
]

REMEMBER_CONFIDENCE: Final = 0.95
"""Confidence of a fact the user explicitly asked to remember (stored ``sourceKind: stated``)."""

_F = re.IGNORECASE

_DURABLE = re.compile(
    r"\b(always|usually|generally|in general|typically|from now on|going forward|every ?time|"
    r"whenever|by default|in (the )?future|prefer\w*|favou?rite|habit\w*|tends? to|likes?|"
    r"loves?|dislikes?|hates?|enjoys?|never|daily|weekly|monthly|regularly|each (?:day|week|month)|"
    r"every (?:day|week|month|year|morning|evening|night|weekend|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday))\b"
    r"|总是|一直|通常|平时|习惯|以后|今后|往后|每次|默认|喜欢|偏好|讨厌|爱",
    _F,
)
"""Words that make a fact about the person, not the moment: a fact with one is never rejected."""

_ASKED = r"(?:ask(?:s|ed|ing)?|request(?:s|ed|ing)?|told)"
_WANTS = r"(?:want(?:s|ed)?|need(?:s|ed)?|would like)"
_REQUEST = rf"(?:{_ASKED}|{_WANTS})"
_AGENT = r"(?:(?:the )?(?:assistant|ai|bot|model|chatbot)|you|me)"
_TASK = (
    r"(?:translat\w*|summar\w*|rewrit\w*|rephras\w*|paraphras\w*|proofread\w*|correct\w*|"
    r"fix\w*|debug\w*|explain\w*|explanation|review\w*|check\w*|edit\w*|format\w*|convert\w*|"
    r"draft\w*|writ\w*|generat\w*|creat\w*|list\w*|calculat\w*|solv\w*|answer\w*|look\w* up|"
    r"search\w*|compar\w*|outlin\w*|overview|shorten\w*|expand\w*|simplif\w*|analy[sz]\w*)"
)
_DEICTIC = r"(?:this|that|these|those|the following|the above|below|attached|it)"
_ARTEFACT = (
    r"(?:paragraph|text|article|sentence|e-?mail|message|document|doc|file|code|snippet|"
    r"function|script|essay|letter|report|passage|page|paper|question|problem|equation|bug|"
    r"error|table|poem|story|post|tweet|paragraphs|sentences|articles|"
    rf"{_DEICTIC})"
)
_FILLER = r"(?:\s+(?:to|for|with|help|some|a|an|the|quick|short|brief))*"
_TRANSIENT_TASK = re.compile(
    # asked (the assistant) to do something to an artefact: the task of the moment
    rf"\b{_ASKED}\b(?:\s+{_AGENT})?{_FILLER}\s+{_TASK}\b.*?\b{_ARTEFACT}\b"
    # wants the assistant to ..., or wants (to) ... *this* one: "wants to review the code" alone
    # may be the user's own aim, "wants to translate this paragraph" is not
    rf"|\b{_WANTS}\b\s+{_AGENT}{_FILLER}\s+{_TASK}\b.*?\b{_ARTEFACT}\b"
    rf"|\b{_WANTS}\b{_FILLER}\s+{_TASK}\b.*?\b{_DEICTIC}\b"
    rf"|\b{_WANTS}\b{_FILLER}\s+(?:summary|translation|rewrite|review|overview|outline)\s+of\b",
    _F,
)
_ONE_OFF = re.compile(
    rf"\b{_REQUEST}\b.*\b(?:this time|for now|just now|right now|this once|for this "
    r"(?:answer|reply|response|question|message|one|conversation|chat|task))\b"
    rf"|\b{_REQUEST}\b.*\b(?:the|this|that|your|the last|the previous) "
    r"(?:answer|reply|response|explanation|output)\b"
    rf"|\b{_REQUEST}\b.*\b(?:a|an|the) (?:shorter|longer|simpler|briefer|more \w+|different|"
    r"new) (?:answer|reply|response|version|explanation)\b",
    _F,
)
_SMALL_TALK = re.compile(
    r"\b(?:said|says|saying|say)\s+(?:hello|hi|hey|goodbye|bye|good (?:morning|night|evening|"
    r"afternoon)|thanks|thank you)\b"
    r"|\bgreet(?:ed|s|ing)?\b(?:\s+(?:the\s+)?(?:assistant|ai|bot|you))?"
    r"|\bthank(?:ed|s|ing)?\s+(?:the\s+)?(?:assistant|ai|bot|model|you)\b"
    r"(?:\s+for\s+(?:the|its|their|your)\s+\w+)?"
    r"|\bexpress\w*\s+(?:gratitude|thanks|appreciation)\b(?:\s+(?:to|towards?)\s+"
    r"(?:the\s+)?(?:assistant|ai|bot))?(?:\s+for\s+(?:the|its|your)\s+\w+)?"
    r"|\basked\s+how\s+(?:the\s+assistant|you|it)\s+(?:is|are|was|were)(?:\s+doing)?\b"
    r"|\b(?:started|began|opened)\s+(?:the\s+)?(?:conversation|chat)\s+with\s+(?:a\s+)?"
    r"(?:greeting|hello|hi)\b"
    r"|\b(?:made|making|engaged in)\s+small talk\b"
    r"|^\s*(?:(?:hi|hello|hey|good (?:morning|afternoon|evening))(?: there)?|thanks|thank you|"
    r"(?:that|it) worked|ok(?:ay)?|great|perfect|cool)[\s!.,]*$",
    _F,
)
_ZH_TRANSIENT_TASK = re.compile(
    r"(?:让|请|要求|希望|想让|叫|需要)(?:助手|你|AI|机器人|模型)?(?:帮(?:忙|他|她|我|助)?)?"
    r"(?:翻译|总结|概括|归纳|改写|润色|校对|解释|检查|修改|写|生成|列出|计算|查找|搜索|比较|"
    r"分析|缩短|扩写|简化)"
    r".*?(?:这|那|该|以下|下面|上面|一下|段|篇|句|封|份|文章|段落|代码|邮件|文档|文件|问题|题)"
)
_ZH_ONE_OFF = re.compile(r"(?:让|请|要求|希望|想).*(?:这次|本次|这一次|这回|这条|刚才的)")
_ZH_SMALL_TALK = re.compile(
    r"打招呼|问好|问候|寒暄|闲聊|说了?(?:声)?(?:你好|谢谢|再见|早上好|晚安|早安)"
    r"|(?:表示|表达)了?(?:感谢|谢意|感激)|感谢了?(?:助手|你)|道谢|致谢|道别|说再见"
)

_ADVICE = re.compile(
    r"^\s*(?:(?:use|try|consider|choose|pick|install|run|switch to|ensure|make sure|avoid|"
    r"check out|read|start|stop|go with|opt for)\b.*\byour\b(?!\s+(?:answers?|repl(?:y|ies)|"
    r"responses?|explanations?|output|code|messages?|tone|style)\b)"
    r"|you\s+(?:should|could|might|may|can|need to|must)\b)",
    _F,
)
"""Advice addressed to the user ("Use PostgreSQL as your migration tool", "You should try
Go"): the assistant's recommendation copied into the memory — facts are written about the
user in the third person. Not a user's instruction to the assistant ("Keep your answers
short")."""

_ADDRESSED = re.compile(
    r"^\s*you\b(?!['’]re welcome)|\bhere(?: are|['’]s| is)\b|"
    r"\b(?:help|tell|show|give|assure|recommend|suggest|remind)(?:s|ed)?\s+you\b",
    _F,
)
"""The assistant speaking to the user ("You are a freelance photographer", "here are some tips
that can help you"): a small model copies an answer's voice instead of stating a fact."""

_SMALL_TALK_RESIDUE: Final = frozenset(
    {"assistant", "conversation", "chat", "help", "answer", "respons", "repl", "explanation"}
)
_ZH_SMALL_TALK_RESIDUE: Final = frozenset("\x01" + c for c in "助手并然后向对话帮回答")


def value_rejection(fact: str) -> str | None:
    """Why ``fact`` is not worth remembering (``transient task``, ``one-off instruction``,
    advice or other words addressed to the user, a question, ``small talk``), or None when it
    may be stored."""
    if fact.rstrip().endswith(("?", "？")):
        return "a question, not a fact"
    if _ADVICE.search(fact):
        return "advice to the user, not a fact about them"
    if _ADDRESSED.search(fact):
        return "addressed to the user, not a fact about them"
    if _DURABLE.search(fact):
        return None
    if _TRANSIENT_TASK.search(fact) or _ZH_TRANSIENT_TASK.search(fact):
        return "transient task"
    if _ONE_OFF.search(fact) or _ZH_ONE_OFF.search(fact):
        return "one-off instruction"
    for pattern, residue in (
        (_SMALL_TALK, _SMALL_TALK_RESIDUE),
        (_ZH_SMALL_TALK, _ZH_SMALL_TALK_RESIDUE),
    ):
        if pattern.search(fact):
            # "said hello and mentioned they live in Paris" is a fact with a greeting in it
            rest = set(content_terms(pattern.sub(" ", fact), subject_words())) - residue
            if not rest:
                return "small talk"
    return None


# ------------------------------------------------------------------------------------------------
# "Remember that ..."
# ------------------------------------------------------------------------------------------------

_EN_REMEMBER = re.compile(
    r"(?:^|(?<=[.!?;\n])\s*|(?<=[,:]\s))"
    r"(?:(?:ok(?:ay)?|so|and|also|oh|hey|btw|by the way|one more thing)[,\s]+)*"
    r"(?P<ask>(?:please\s+|pls\s+|kindly\s+)|(?:can|could|would|will) you(?: please)?\s+|"
    r"i (?:want|need) you to\s+|i'd like you to\s+)?"
    r"(?:always\s+)?remember(?P<that>\s+this|\s+that|\s*:|\s*[,-])?\s*"
    r"(?P<clause>[^\n]+?)\s*(?P<end>[.!?;]+(?=\s|$)|$)",
    re.IGNORECASE | re.MULTILINE,
)
_EN_NOT_A_CLAUSE = re.compile(
    r"^(?:to|when|how|what|why|where|who|whom|if|whether|me|us|him|her|them|it|the time|"
    r"the day|anything|nothing)\b",
    re.IGNORECASE,
)
_EN_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself|we|our|us)\b", re.IGNORECASE)
_EN_SECOND = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)
_ZH_REMEMBER = re.compile(
    r"(?:^|(?<=[。！？；\n，,]))\s*(?P<ask>请|麻烦你?|帮我|你要|你得|一定要|要|务必)?"
    r"(?:记住|记得)(?!了|吗|不住|没)[：:，,\s]*(?P<clause>[^。！？!?；\n]+)"
)


@dataclass(frozen=True, slots=True)
class Remembered:
    """One "remember …" in a user turn: the clause as said, and the fact made of it."""

    clause: str
    content: str
    category: FactCategory
    turn: int
    """Index of the user turn it was said in (among the turns given)."""


_CATEGORY_RULES: Final[tuple[tuple[FactCategory, re.Pattern[str]], ...]] = (
    ("correction", re.compile(r"\b(actually|not\b.*\bbut|correction)\b|其实|不是.*而是", _F)),
    (
        "preference",
        re.compile(
            r"\b(prefer\w*|like|likes|love|loves|enjoy\w*|hate\w*|dislike\w*|favou?rite|"
            r"rather|can't stand)\b|喜欢|偏好|讨厌|爱",
            _F,
        ),
    ),
    (
        "behavior",
        re.compile(
            r"\b(always|never|usually|every (day|morning|evening|week|night))\b"
            r"|总是|从不|每天|习惯",
            _F,
        ),
    ),
    (
        "goal",
        re.compile(
            r"\b(want to|plan\w*|going to|goal|hope to|intend\w*)\b|打算|计划|目标|想要", _F
        ),
    ),
)


def clause_category(clause: str) -> FactCategory:
    """A category by rule (correction, preference, behavior, goal; else ``context``)."""
    for category, pattern in _CATEGORY_RULES:
        if pattern.search(clause):
            return category
    return "context"


def clause_fact(clause: str) -> str:
    """The remembered clause as a fact about the user (first person -> "User …", 我 -> 用户)."""
    clause = clause.strip().strip("\"'“”‘’").strip()
    clause = re.sub(r"^that\s+", "", clause, flags=_F)
    if re.search(r"[\u4e00-\u9fff]", clause):
        return re.sub(r"我(?!们)", "用户", clause).strip("，,。 ")
    text = third_person(clause).strip(" ,;")
    return text[:1].upper() + text[1:]


def remembered_clauses(user_texts: Sequence[str]) -> list[Remembered]:
    """Every explicit request to remember in ``user_texts`` (the user's turns only: an
    assistant's "I'll remember that" is not the user's wish)."""
    found: list[Remembered] = []
    for index, text in enumerate(user_texts):
        for match in _EN_REMEMBER.finditer(text):
            clause = match.group("clause").strip()
            ask = match.group("ask")
            if match.group("end").startswith("?") and not (ask and "you" in ask.lower()):
                continue  # "remember the trip to Rome?" asks; "can you remember that …?" tells
            if not match.group("that") and not ask and _EN_NOT_A_CLAUSE.match(clause):
                continue  # "remember to buy milk", "remember when we …"
            if _EN_NOT_A_CLAUSE.match(re.sub(r"^that\s+", "", clause, flags=_F)) and (
                clause.lower().startswith(("to ", "when ", "how ", "what "))
            ):
                continue
            if len(content_terms(clause, subject_words())) == 0:
                continue  # "please remember this." with nothing after it
            if not ask and not (_EN_FIRST.search(clause) and not _EN_SECOND.search(clause)):
                continue  # "remember, practice makes perfect", "remember, I'm here for you"
            found.append(Remembered(clause, clause_fact(clause), clause_category(clause), index))
        for match in _ZH_REMEMBER.finditer(text):
            start = match.start()
            before = text[max(0, start - 2) : start]
            if not match.group("ask") and re.search(r"[我你他她没不能]$", before):
                continue  # "我记住了", "你还记得…" are not requests
            clause = match.group("clause").strip()
            if not content_terms(clause, subject_words()):
                continue
            if not match.group("ask") and ("我" not in clause or "你" in clause):
                continue  # "记住，失败是成功之母" is encouragement, not a request
            found.append(Remembered(clause, clause_fact(clause), clause_category(clause), index))
    return found
