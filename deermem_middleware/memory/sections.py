"""The six summary sections: the one table every module reads.

DeerFlow's memory has three sections about the user (``user.*``) and three about their history
(``history.*``). Their names, their group, the label the injected block shows and the description
the extraction model reads were once spelled out in five modules; adding or renaming a section
now means changing this table (and the two pydantic models that must name their fields: the
stored :class:`~deermem_middleware.memory.document.UserContext`/``History`` and the LLM-side
update).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "GROUP_HEADINGS",
    "HISTORY_FIELDS",
    "SECTIONS",
    "SECTION_FIELDS",
    "USER_FIELDS",
    "SectionSpec",
]

SectionGroup = Literal["user", "history"]


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """One summary section: its JSON name, its group, its label in the injected block and what
    the extraction model is told it holds."""

    name: str
    group: SectionGroup
    label: str
    description: str


SECTIONS: Final[tuple[SectionSpec, ...]] = (
    SectionSpec("workContext", "user", "Work", "Job, role, projects, tech stack."),
    SectionSpec("personalContext", "user", "Personal", "Who they are outside work."),
    SectionSpec("topOfMind", "user", "Current Focus", "What they are busy with right now."),
    SectionSpec("recentMonths", "history", "Recent", "What happened in the last few months."),
    SectionSpec("earlierContext", "history", "Earlier", "Older, still relevant history."),
    SectionSpec(
        "longTermBackground",
        "history",
        "Background",
        "Stable background: education, career, values.",
    ),
)
GROUP_HEADINGS: Final[dict[SectionGroup, str]] = {"user": "User Context", "history": "History"}
"""The heading of each group in the injected block."""

USER_FIELDS: Final = tuple(s.name for s in SECTIONS if s.group == "user")
HISTORY_FIELDS: Final = tuple(s.name for s in SECTIONS if s.group == "history")
SECTION_FIELDS: Final = USER_FIELDS + HISTORY_FIELDS
