"""What capacity (``max_facts``) deletes, counted in the document (pure).

Over ``max_facts`` the facts of least value go
(:func:`~deermem_middleware.memory.facts.trim_facts`), in a conversation's update
(:func:`~deermem_middleware.memory.apply.apply_update`) and in an import, which is trimmed when
it is imported (:func:`~deermem_middleware.formats.interchange.cap_document`) so the next
conversation never silently deletes what the import had just added. Either way:

- the facts are **deleted, not archived**. An archived fact stays in the document and counts
  towards ``max_facts`` (archived facts are what trimming takes second, after superseded ones),
  so archiving the facts trimmed for room would not make room; a separate archive would be a
  second, unbounded document to cap, migrate and forget with the user. What an import leaves out
  is still in the file it came from: raise ``max_facts`` and import it again.
- they are **counted**: :class:`~deermem_middleware.memory.document.TrimCount` (``trimmed`` in
  the document: how many in all, when last, how many then), which ``deermem stats`` and the
  console's stats show, so a deletion never goes unnoticed however long ago the log rotated.
- they are **logged** by whoever saved the change (the updater, the import), naming the user,
  the agent and the count: at WARNING the first time per scope and process for an update, at
  WARNING for every import; never the facts' text at WARNING (memory may be private), their ids
  at DEBUG. Archiving (expiry, the opt-in ``archive_floor``) keeps the facts and is logged at
  INFO the same way.
"""

from __future__ import annotations

from deermem_middleware.memory.document import Memory, TrimCount

__all__ = ["record_trim", "trimmed_count"]


def record_trim(memory: Memory, removed: int, at: str) -> Memory:
    """``memory`` with ``removed`` more facts counted as deleted by capacity at ``at``;
    ``memory`` itself when ``removed`` is 0."""
    if removed <= 0:
        return memory
    before = memory.trimmed or TrimCount()
    counted = TrimCount(count=before.count + removed, lastAt=at, lastCount=removed)
    return memory.model_copy(update={"trimmed": counted})


def trimmed_count(memory: Memory) -> int:
    """How many facts capacity deleted from ``memory`` in all (0 when none)."""
    return memory.trimmed.count if memory.trimmed is not None else 0
