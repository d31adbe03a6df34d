"""The instruction screen: is a piece of remembered text data about the user, a preference
addressed to the assistant (a *directive*), or an attempt to steer it (an *injection*)?

A concern of its own, used at both ends of memory: when a fact is written, its verdict is
derived once and stored with the document (:mod:`deermem_middleware.derived`), and when the
block is rendered, a stored verdict is read instead of running the screen again — the rules and
the learned model cost 2–7 ms per fact, which on a 1,000-fact memory was most of a user's first
model call in a process. :data:`SCREEN_VERSION` names the rules and the model that made a
verdict, so a verdict made by other rules is re-derived in the background.
"""

from __future__ import annotations

from deermem_middleware.screen.assess import (
    MemoryTextKind,
    TextAssessment,
    assess_by_rules,
    assess_memory_text,
)
from deermem_middleware.screen.texts import screened_texts, summary_sentences
from deermem_middleware.screen.version import SCREEN_VERSION

__all__ = [
    "SCREEN_VERSION",
    "MemoryTextKind",
    "TextAssessment",
    "assess_by_rules",
    "assess_memory_text",
    "screened_texts",
    "summary_sentences",
]
