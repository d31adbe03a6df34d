"""What a capture hands the updater: the job (a thread's filtered turns, resolved ids), how a
newer capture merges into a pending one, and the extraction a failed save keeps for its retry.

The scheduler, the replicas and the journal writes pass jobs around; only the updater
(:mod:`deermem_middleware.runtime.updater`) runs them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from deermem_middleware.extraction.extractor import ExtractionResult
from deermem_middleware.memory.conversation import Turn, merge_captures
from deermem_middleware.memory.gates import GateReport
from deermem_middleware.memory.update import MemoryUpdate
from deermem_middleware.storage.base import MemoryScope, StorageError

__all__ = ["MAX_MERGED_TURNS", "CaptureJob", "Extracted", "SaveFailed", "merge_jobs"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Extracted:
    """An extraction that could not be saved yet: retried as a save alone, without calling the
    model again (an unsavable update once called the model on every retry)."""

    result: ExtractionResult
    new: tuple[Turn, ...]
    """The turns it was extracted from (if the thread's watermark moved since so that others
    would be new now, it is extracted anew)."""
    attempts: int = 0
    """Saves that failed so far (the back-off grows with them)."""
    update: MemoryUpdate | None = None
    """The extraction's update after the write gates (None: not gated yet). Gated once, kept
    for every re-apply after a conflict and every retried save."""
    gates: GateReport | None = None
    """What the write gates did (with ``update``)."""


@dataclass(frozen=True, slots=True)
class CaptureJob:
    """What capture hands to the scheduler: ids resolved at enqueue time, turns filtered."""

    scope: MemoryScope
    thread_id: str
    turns: tuple[Turn, ...]
    extracted: Extracted | None = None
    """Set on a retry after a failed save (:class:`SaveFailed`)."""
    conversation: str | None = None
    """For a capture without a thread id (no checkpointer, ``capture()`` without
    ``thread_id``): the key its progress is kept under, shared by every conversation that opens
    with the same message. Progress is then *content-addressed* — the turns already extracted
    under the key are skipped — so a second conversation with the same opening is extracted
    (it was once taken for an older capture of the first and never stored)."""

    @property
    def progress_key(self) -> str:
        """The watermark this job reads and advances."""
        return self.conversation or self.thread_id


MAX_MERGED_TURNS = 200
"""The most turns one pending capture accumulates by merging (:func:`merge_jobs`)."""


def merge_jobs(older: CaptureJob, newer: CaptureJob) -> CaptureJob:
    """The job that replaces a thread's pending ``older`` one when ``newer`` is captured (or
    when ``older`` failed and is backed off while ``newer`` waits): ``newer``, with the turns of
    ``older`` it lacks in front (:func:`~deermem_middleware.memory.conversation.merge_captures`).
    Whole-history captures contain the older turns, so they come out unchanged; a windowed or
    checkpointer-less thread keeps every exchange of a burst. A merged job is extracted afresh
    (an extraction kept for a retried save covered fewer turns)."""
    if older.conversation is not None or newer.conversation is not None:
        return newer  # keyed by content: another key's turns are never mixed in
    if older.scope != newer.scope or older.thread_id != newer.thread_id:
        return newer
    turns, cut = merge_captures(older.turns, newer.turns, limit=MAX_MERGED_TURNS)
    if turns == newer.turns:
        return newer
    if cut:
        logger.warning(
            "memory capture of thread %r: %d turn(s) of earlier captures not extracted yet "
            "were dropped (more than %d pending turns)",
            newer.thread_id,
            cut,
            MAX_MERGED_TURNS,
        )
    return replace(newer, turns=turns, extracted=None)


class SaveFailed(StorageError):
    """The update was extracted but could not be stored (a read-only disk, an id the storage
    cannot encode...). ``job`` carries the extraction, so the retry only saves."""

    def __init__(self, job: CaptureJob, cause: BaseException) -> None:
        super().__init__(f"saving the memory update failed: {type(cause).__name__}: {cause}")
        self.job = job
        self.cause = cause
