"""Taking over the pending captures a stopped process left in the journal.

A capture is journaled before its debounce starts and cleared once stored, so after a crash the
journal holds exactly the work that was lost. On start an engine takes over its agent's entries
whose owner is gone — a dead pid on this machine, or (for entries from other machines, whose
pids mean nothing here) no sign of life for ``orphan_after_seconds`` — and queues them again.
Nothing is applied twice: turns already stored are recognised by the thread's watermark.
"""

from __future__ import annotations

import logging

from deermem_middleware.runtime.updater import CaptureJob
from deermem_middleware.storage.journal import PendingJournal

__all__ = ["take_over_orphans"]

logger = logging.getLogger(__name__)


def take_over_orphans(
    journal: PendingJournal, agent_name: str, orphan_after_seconds: float
) -> list[CaptureJob]:
    """The jobs of ``agent_name``'s orphaned journal entries, each re-journaled as ours (an entry
    that cannot be taken over is logged and left). Other agents' entries are left to their own
    engines (their model, their config)."""
    try:
        entries = journal.entries()
    except Exception:
        logger.exception("reading the pending-update journal failed; nothing replayed")
        return []
    jobs: list[CaptureJob] = []
    for entry in entries:
        if entry.scope.agent_name != agent_name or not entry.owner_is_gone(orphan_after_seconds):
            continue
        job = CaptureJob(entry.scope, entry.thread_id, entry.turns, conversation=entry.conversation)
        try:
            journal.put(job.scope, job.thread_id, job.turns, job.conversation)  # ours now
        except Exception:
            logger.exception("taking over journal entry of thread %r failed", job.thread_id)
            continue
        jobs.append(job)
    if jobs:
        logger.warning(
            "memory: replaying %d pending update(s) left by a process that stopped", len(jobs)
        )
    return jobs
