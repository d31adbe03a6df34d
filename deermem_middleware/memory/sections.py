"""Applying the six summary fields of an update (pure).

A section is rewritten only when the LLM set ``shouldUpdate`` *and* gave a non-blank summary: an
empty summary with ``shouldUpdate: true`` is far more often a small model's slip than a request to
erase what we know, and erasing is what a person does through the CLI, not a side effect.
"""

from __future__ import annotations

import logging
from datetime import datetime

from deermem_middleware.memory.document import (
    SECTION_FIELDS,
    USER_FIELDS,
    Memory,
    Section,
    utc_now_iso,
)
from deermem_middleware.memory.update import MemoryUpdate

__all__ = ["apply_sections"]

logger = logging.getLogger(__name__)


def apply_sections(
    memory: Memory, update: MemoryUpdate, *, now: datetime
) -> tuple[Memory, list[str]]:
    """Return the memory with the sections the update rewrites, and the names of those sections."""
    stamp = utc_now_iso(now)
    user_changes: dict[str, Section] = {}
    history_changes: dict[str, Section] = {}
    changed: list[str] = []
    for name in SECTION_FIELDS:
        proposal = update.section(name)
        if not proposal.shouldUpdate:
            continue
        summary = proposal.summary.strip()
        if not summary:
            logger.info("memory section %s: shouldUpdate with an empty summary, kept as is", name)
            continue
        current = memory.section(name)
        if summary == current.summary:
            continue
        section = current.model_copy(update={"summary": summary, "updatedAt": stamp})
        (user_changes if name in USER_FIELDS else history_changes)[name] = section
        changed.append(name)
    if not changed:
        return memory, []
    return (
        memory.model_copy(
            update={
                "user": memory.user.model_copy(update=user_changes),
                "history": memory.history.model_copy(update=history_changes),
            }
        ),
        changed,
    )
