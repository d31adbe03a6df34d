"""One memory update: load -> new turns only -> extract -> apply -> compare-and-set save.

Runs on a scheduler worker thread. The LLM is called once per update; if another writer saved the
same memory in the meantime the save raises ``RevisionConflict`` and the *same* extracted update is
re-applied to the freshly loaded document (the other writer's sections and facts stay). The thread's
watermark advances in the same atomic save, so a restart or a later capture never resends turns
that are already in memory.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from .apply import ApplyReport, advance_watermark, apply_update
from .config import DEFAULT_MAX_FACTS, MemoryConfig
from .dates import parse_timestamp
from .extraction import ExtractionResult, MemoryExtractor
from .filtering import Turn, has_enough_for_update, turns_after
from .schema import Memory, new_fact_id
from .storage.base import MemoryScope, MemoryStorage, RevisionConflict

__all__ = ["CaptureJob", "MemoryUpdater", "UpdateOutcome"]

logger = logging.getLogger(__name__)


def _position(turns: tuple[Turn, ...], fingerprint: str) -> int:
    """1-based position of the last turn fingerprinted ``fingerprint``."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].fingerprint == fingerprint:
            return index + 1
    return len(turns)


class _WatermarkMoved(Exception):
    """The thread's watermark changed between extraction and save (another worker)."""


@dataclass(frozen=True, slots=True)
class CaptureJob:
    """What capture hands to the scheduler: ids resolved at enqueue time, turns filtered."""

    scope: MemoryScope
    thread_id: str
    turns: tuple[Turn, ...]


@dataclass
class UpdateOutcome:
    status: Literal["applied", "unchanged", "nothing_new", "already_applied", "no_model"]
    revision: int = 0
    new_turns: int = 0
    report: ApplyReport = field(default_factory=ApplyReport)
    extraction: ExtractionResult | None = None
    conflicts: int = 0


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _said_at(turns: list[Turn]) -> datetime | None:
    """When the newest of these turns that knows its time was said (relative dates in the new
    facts resolve against it)."""
    for turn in reversed(turns):
        moment = parse_timestamp(turn.at)
        if moment is not None:
            return moment
    return None


class MemoryUpdater:
    """Runs :class:`CaptureJob` s against a storage with an extractor (see module docstring)."""

    def __init__(
        self,
        storage: MemoryStorage,
        extractor: Callable[[], MemoryExtractor | None],
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime] = _utc_now,
        id_factory: Callable[[], str] = new_fact_id,
        max_conflict_retries: int = 200,
        annotate: Callable[[MemoryScope, Memory], Memory] | None = None,
    ) -> None:
        self.storage = storage
        self._extractor = extractor
        self.config = config
        self._clock = clock
        self._id_factory = id_factory
        self._max_conflict_retries = max_conflict_retries
        self._annotate = annotate
        """Folds bookkeeping (e.g. injection counts) into a document that is being saved."""
        self._scope_locks = [threading.Lock() for _ in range(64)]  # striped: bounded memory
        self._trim_reported: set[MemoryScope] = set()
        self._trim_lock = threading.Lock()

    def run(self, job: CaptureJob) -> UpdateOutcome:
        """Extract the turns of ``job`` not yet in memory and store the result.

        If another worker stored part of these turns while we were extracting (the thread's
        watermark moved), the update is not applied: it would repeat what they applied. Instead
        the turns after the new watermark are extracted again (bounded number of rounds).
        """
        for _ in range(8):
            try:
                return self._run_once(job)
            except _WatermarkMoved:
                logger.info(
                    "memory thread %r: another worker stored some of these turns meanwhile; "
                    "extracting only the rest",
                    job.thread_id,
                )
        return self._run_once(job)

    def _run_once(self, job: CaptureJob) -> UpdateOutcome:
        scope = job.scope
        stored = self.storage.load(scope)
        mark = stored.memory.watermarks.get(job.thread_id)
        seen_mark = mark.turn if mark else None
        new = turns_after(job.turns, seen_mark, mark.position if mark else None)
        if not has_enough_for_update(new):
            logger.debug(
                "memory %s/%s thread %s: nothing new to extract",
                scope.user_id,
                scope.agent_name,
                job.thread_id,
            )
            return UpdateOutcome("nothing_new", stored.revision)
        extractor = self._extractor()
        if extractor is None:
            logger.error(
                "memory update for user %r skipped: no extraction model configured "
                "(set memory.model in the config or pass model= to MemoryMiddleware)",
                scope.user_id,
            )
            return UpdateOutcome("no_model", stored.revision, len(new))
        extraction = extractor.extract(
            stored.memory,
            new,
            now=self._clock(),
            metadata={
                "deermem_user_id": scope.user_id,
                "deermem_agent_name": scope.agent_name,
                "deermem_thread_id": job.thread_id,
            },
        )
        logger.info(
            "memory extraction for user %r thread %r: %d turn(s), method=%s, %d call(s), "
            "%d input + %d output tokens, %.2fs, %d item(s) rejected",
            scope.user_id,
            job.thread_id,
            len(new),
            extraction.method,
            extraction.calls,
            extraction.input_tokens,
            extraction.output_tokens,
            extraction.seconds,
            len(extraction.rejected),
        )
        last_turn = new[-1].fingerprint
        # One writer per scope inside this process (extraction above ran unlocked, in parallel):
        # in-process writers then never conflict, and CAS retries are left for other processes.
        with self._scope_locks[hash(scope) % len(self._scope_locks)]:
            return self._apply_and_save(job, new, extraction, last_turn, seen_mark)

    def _report_trim(self, scope: MemoryScope, count: int) -> None:
        """Say once per scope (per process) what ``max_facts`` costs: trimmed facts are deleted."""
        with self._trim_lock:
            first = scope not in self._trim_reported
            self._trim_reported.add(scope)
        if first:
            logger.warning(
                "memory of user %r agent %r is over max_facts=%d: %d fact(s) of least value "
                "deleted in this update (superseded and archived first, then the least "
                "confident, never injected or confirmed, least recently used). The default "
                "capacity is %d; raise max_facts to keep them. Later trims are logged at INFO.",
                scope.user_id,
                scope.agent_name,
                self.config.max_facts,
                count,
                DEFAULT_MAX_FACTS,
            )

    def _apply_and_save(
        self,
        job: CaptureJob,
        new: list[Turn],
        extraction: ExtractionResult,
        last_turn: str,
        seen_mark: str | None,
    ) -> UpdateOutcome:
        scope = job.scope
        state: dict[str, Any] = {"report": ApplyReport(), "already": False}
        said_at = _said_at(new)

        def mutate(current: Memory) -> Memory | None:
            """The update applied to ``current`` (None: these turns are stored already)."""
            mark = current.watermarks.get(job.thread_id)
            if mark is not None and mark.turn == last_turn:
                state["already"] = True
                return None
            if (mark.turn if mark else None) != seen_mark:
                raise _WatermarkMoved  # someone stored some of our turns: do not repeat them
            now = self._clock()
            memory, report = apply_update(
                current,
                extraction.update,
                now=now,
                threshold=self.config.fact_confidence_threshold,
                max_facts=self.config.max_facts,
                source=job.thread_id,
                id_factory=self._id_factory,
                half_lives=self.config.fact_half_life_days or None,
                archive_floor=self.config.archive_floor,
                said_at=said_at,
            )
            state["report"] = report
            if self._annotate is not None:
                memory = self._annotate(scope, memory)
            return advance_watermark(
                memory,
                job.thread_id,
                last_turn,
                count=len(new),
                now=now,
                position=_position(job.turns, last_turn),
            )

        conflicts = 0
        atomic_update = getattr(self.storage, "update", None)
        if callable(atomic_update):
            # the backend runs read -> apply -> write under its own lock: no conflicts possible
            revision = atomic_update(scope, mutate)
        else:
            stored = self.storage.load(scope)
            while True:
                memory = mutate(stored.memory)
                if memory is None:
                    revision = stored.revision
                    break
                try:
                    revision = self.storage.save(scope, memory, stored.revision)
                    break
                except RevisionConflict:
                    conflicts += 1
                    if conflicts > self._max_conflict_retries:
                        raise
                    # another process saved first: back off (full jitter, growing, so competing
                    # writers stop colliding), reload, and re-apply the same update on theirs
                    time.sleep(random.uniform(0, min(0.25, 0.002 * 2 ** min(conflicts, 10))))
                    stored = self.storage.load(scope)
        if state["already"]:
            logger.info(
                "memory thread %r: another writer already applied these turns", job.thread_id
            )
            return UpdateOutcome("already_applied", revision, len(new), conflicts=conflicts)
        report = state["report"]
        if report.facts.trimmed:
            self._report_trim(scope, len(report.facts.trimmed))
        counts = report.summary()
        logger.info(
            "memory applied for user %r agent %r: revision %d, sections=%d added=%d reinforced=%d "
            "superseded=%d removed=%d archived=%d trimmed=%d below_threshold=%d kept_manual=%d "
            "conflicts=%d",
            scope.user_id,
            scope.agent_name,
            revision,
            counts["sections"],
            counts["added"],
            counts["reinforced"],
            counts.get("superseded", 0),
            counts["removed"],
            counts.get("archived", 0),
            counts["trimmed"],
            counts["below_threshold"],
            counts.get("kept_manual", 0),
            conflicts,
        )
        return UpdateOutcome(
            "applied" if report.changed else "unchanged",
            revision,
            len(new),
            report,
            extraction,
            conflicts,
        )
