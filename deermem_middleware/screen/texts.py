"""Which texts of a summary the screen reads: the summary, and its sentences when it holds a
directive (the block quotes those one by one). Shared by the derivation that stores their
verdicts and the renderer that reads them, so both split a summary the same way."""

from __future__ import annotations

import re
from typing import Final

from deermem_middleware.screen.assess import TextAssessment

__all__ = ["screened_texts", "summary_sentences"]


_SENTENCE_END: Final = re.compile(r"(?<=[.!?。！？;；])\s*")


def summary_sentences(summary: str) -> list[str]:
    """A summary's sentences, as the block quotes a summary's directive sentences one by one."""
    return [s for s in _SENTENCE_END.split(summary) if s.strip()]


def screened_texts(summary: str, verdict: TextAssessment) -> list[str]:
    """The texts whose verdicts rendering ``summary`` (whose own verdict is ``verdict``) reads
    besides its own: its sentences when it holds a directive, else none."""
    return summary_sentences(summary) if verdict.kind == "directive" else []
