"""One memory update: load -> new turns only -> extract -> gate -> apply -> compare-and-set save.

Runs on a scheduler worker thread. The LLM is called once per update; if another writer saved the
same memory in the meantime the save raises ``RevisionConflict`` and the *same* extracted update is
re-applied to the freshly loaded document (the other writer's sections and facts stay). The thread's
watermark advances in the same atomic save, so a restart or a later capture never resends turns
that are already in memory. The write gates (:mod:`deermem_middleware.memory.gates`) run once,
right after extraction; the gated update travels with the extraction to every re-apply and
retried save.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from deermem_middleware.config import DEFAULT_MAX_FACTS, MemoryConfig
from deermem_middleware.extraction.extractor import ExtractionResult, MemoryExtractor
from deermem_middleware.memory.apply import ApplyReport, apply_update
from deermem_middleware.memory.capacity import trimmed_count
from deermem_middleware.memory.conversation import (
    Turn,
    has_enough_for_update,
    turns_after,
)
from deermem_middleware.memory.document import MAX_SEEN_TURNS, Memory, Watermark, new_fact_id
from deermem_middleware.memory.gates import GateReport, gate_update
from deermem_middleware.memory.gates.grounding import Embedder
from deermem_middleware.memory.time import parse_timestamp
from deermem_middleware.memory.watermark import (
    MAX_OPENING_TURNS,
    MAX_THREAD_SEEN_TURNS,
    advance_watermark,
)
from deermem_middleware.runtime.jobs import (
    MAX_MERGED_TURNS,
    CaptureJob,
    Extracted,
    SaveFailed,
    merge_jobs,
)
from deermem_middleware.storage.base import (
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StorageError,
)

__all__ = [
    "MAX_MERGED_TURNS",
    "CaptureJob",
    "Extracted",
    "MemoryUpdater",
    "SaveFailed",
    "UpdateOutcome",
    "merge_jobs",
]

logger = logging.getLogger(__name__)


def _new_turns(job: CaptureJob, mark: Watermark | None) -> list[Turn]:
    """The turns of ``job`` its progress marker has not seen: for a thread, those after its
    newest extracted turn (:func:`turns_after`: by fingerprint, so a trimmed window or a capture
    of only the newest message is read too); for a capture without a thread id, those not
    extracted under its key yet."""
    if mark is None:
        return list(job.turns)
    if job.conversation is not None:
        seen = set(mark.seen)
        return [t for t in job.turns if t.fingerprint not in seen]
    return turns_after(job.turns, mark.turn, mark.position, mark.seen, mark.opening)


def _position(turns: tuple[Turn, ...], fingerprint: str) -> int:
    """1-based position of the last turn fingerprinted ``fingerprint``."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].fingerprint == fingerprint:
            return index + 1
    return len(turns)


class _WatermarkMoved(Exception):
    """The thread's watermark changed between extraction and save (another worker)."""


@dataclass
class UpdateOutcome:
    status: Literal["applied", "unchanged", "nothing_new", "already_applied", "no_model"]
    revision: int = 0
    new_turns: int = 0
    report: ApplyReport = field(default_factory=ApplyReport)
    extraction: ExtractionResult | None = None
    """What the model proposed (before the write gates)."""
    conflicts: int = 0
    gates: GateReport | None = None
    """What the write gates did to the proposed facts (see
    :mod:`deermem_middleware.memory.gates`)."""

    def summary(self) -> dict[str, int]:
        """The apply counts (:meth:`ApplyReport.summary`) followed by the gates' counts."""
        counts = self.report.summary()
        if self.gates is not None:
            counts.update(self.gates.summary())
        return counts


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
        annotate: Callable[[MemoryScope], Callable[[Memory], Memory]] | None = None,
        embed: Embedder | None = None,
    ) -> None:
        self.storage = storage
        self._extractor = extractor
        self.config = config
        self._clock = clock
        self._id_factory = id_factory
        self._max_conflict_retries = max_conflict_retries
        self._annotate = annotate
        """Folds bookkeeping (e.g. injection counts) into a document that is being saved."""
        self._embed = embed
        """Optional semantic support for the grounding gate (texts in, vectors out)."""
        self._scope_locks = [threading.Lock() for _ in range(64)]  # striped: bounded memory
        self._trim_reported: set[MemoryScope] = set()
        self._trim_lock = threading.Lock()

    def run(self, job: CaptureJob) -> UpdateOutcome:
        """Extract the turns of ``job`` not yet in memory and store the result.

        If another worker stored part of these turns while we were extracting (the thread's
        watermark moved), the update is not applied: it would repeat what they applied. Instead
        the turns after the new watermark are extracted again (bounded number of rounds).

        Failures are told apart for the caller: the extraction model's own errors propagate as
        they are; anything that goes wrong loading or saving the document is a
        :class:`~deermem_middleware.storage.base.StorageError` — :class:`SaveFailed` once the update
        is extracted, carrying it, so a retry saves without calling the model again.
        """
        if job.extracted is not None:
            try:
                return self._save_extracted(job, job.extracted)
            except _WatermarkMoved:
                logger.info(
                    "memory thread %r: its watermark moved since the update was extracted; "
                    "extracting anew",
                    job.thread_id,
                )
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

    def _load(self, scope: MemoryScope) -> Any:
        try:
            return self.storage.load(scope)
        except StorageError:
            raise
        except Exception as exc:  # not the model's fault: never counted against the endpoint
            raise StorageError(f"loading the memory failed: {type(exc).__name__}: {exc}") from exc

    def _save_extracted(self, job: CaptureJob, extracted: Extracted) -> UpdateOutcome:
        """Apply and save an extraction (under the scope's lock); a failure is a
        :class:`SaveFailed` that carries it for the retry."""
        new = list(extracted.new)
        if extracted.update is None:
            extracted = self._gated(job, extracted)
        with self._scope_locks[hash(job.scope) % len(self._scope_locks)]:
            try:
                return self._apply_and_save(job, new, extracted)
            except (_WatermarkMoved, RevisionConflict):
                raise
            except Exception as exc:
                failed = replace(extracted, attempts=extracted.attempts + 1)
                retry = replace(job, extracted=failed)
                raise SaveFailed(retry, exc) from exc

    def _run_once(self, job: CaptureJob) -> UpdateOutcome:
        scope = job.scope
        stored = self._load(scope)
        new = _new_turns(job, stored.memory.watermarks.get(job.progress_key))
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
        # One writer per scope inside this process (extraction above ran unlocked, in parallel):
        # in-process writers then never conflict, and CAS retries are left for other processes.
        return self._save_extracted(job, self._gated(job, Extracted(extraction, tuple(new))))

    def _gated(self, job: CaptureJob, extracted: Extracted) -> Extracted:
        """``extracted`` with its update through the write gates (once: the result travels
        with it to every re-apply and retry)."""
        config = self.config
        scope = job.scope
        user = scope.user_id
        names = (
            [user] if user != "default" and re.fullmatch(r"[^\W\d_][\w .'-]{0,63}", user) else []
        )
        update, gates = gate_update(
            extracted.result.update,
            extracted.new,
            grounding=config.grounding,
            min_support=config.grounding_min_support,
            inferred_confidence_cap=config.inferred_confidence_cap,
            value_gate=config.value_gate,
            names=names,
            embed=self._embed,
            where=f"user {user!r} thread {job.thread_id!r}",
        )
        return replace(extracted, update=update, gates=gates)

    def _report_removals(self, scope: MemoryScope, report: ApplyReport, total: int) -> None:
        """Log what left the memory of ``scope`` in a saved update without anyone asking (see
        :mod:`deermem_middleware.memory.capacity`): facts ``max_facts`` deleted — at WARNING the
        first time per scope in this process, saying what it costs, then at INFO — with
        ``total``, the document's count of them; facts archived, at INFO. Counts only: the ids
        at DEBUG, never the text (memory may be private)."""
        trimmed, archived = report.facts.trimmed, report.facts.archived
        who = (scope.user_id, scope.agent_name)
        if trimmed:
            with self._trim_lock:
                first = scope not in self._trim_reported
                self._trim_reported.add(scope)
            if first:
                logger.warning(
                    "memory of user %r agent %r is over max_facts=%d: %d fact(s) of least value "
                    "deleted in this update, %d in all (superseded and archived first, then the "
                    "least confident, never injected or confirmed, least recently used; "
                    "`deermem stats` counts them). The default capacity is %d; raise max_facts "
                    "to keep them. Later trims are logged at INFO.",
                    *who,
                    self.config.max_facts,
                    len(trimmed),
                    total,
                    DEFAULT_MAX_FACTS,
                )
            else:
                logger.info(
                    "memory of user %r agent %r over max_facts=%d: %d fact(s) of least value "
                    "deleted in this update, %d in all",
                    *who,
                    self.config.max_facts,
                    len(trimmed),
                    total,
                )
            logger.debug("memory of user %r agent %r: trimmed fact(s) %s", *who, ", ".join(trimmed))
        if archived:
            logger.info(
                "memory of user %r agent %r: %d fact(s) archived in this update (expired, or "
                "decayed below archive_floor): kept, no longer injected",
                *who,
                len(archived),
            )
            logger.debug(
                "memory of user %r agent %r: archived fact(s) %s", *who, ", ".join(archived)
            )

    def _apply_and_save(
        self,
        job: CaptureJob,
        new: list[Turn],
        extracted: Extracted,
    ) -> UpdateOutcome:
        scope = job.scope
        extraction = extracted.result
        update = extracted.update if extracted.update is not None else extraction.update
        state: dict[str, Any] = {"report": ApplyReport(), "already": False}
        said_at = _said_at(new)
        last_turn = new[-1].fingerprint
        # the injection counts, taken once: each retry after a lost race folds the same in
        fold = self._annotate(scope) if self._annotate is not None else None

        def mutate(current: Memory) -> Memory | None:
            """The update applied to ``current`` (None: these turns are stored already)."""
            now_new = _new_turns(job, current.watermarks.get(job.progress_key))
            if not now_new:
                state["already"] = True
                return None
            if [t.fingerprint for t in now_new] != [t.fingerprint for t in new]:
                raise _WatermarkMoved  # someone stored some of our turns: do not repeat them
            now = self._clock()
            memory, report = apply_update(
                current,
                update,
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
            state["trimmed_total"] = trimmed_count(memory)
            if fold is not None:
                memory = fold(memory)
            return advance_watermark(
                memory,
                job.progress_key,
                last_turn,
                count=len(new),
                now=now,
                position=_position(job.turns, last_turn),
                seen=[t.fingerprint for t in new],
                max_seen=MAX_SEEN_TURNS if job.conversation else MAX_THREAD_SEEN_TURNS,
                opening=[]
                if job.conversation
                else [t.fingerprint for t in job.turns[:MAX_OPENING_TURNS]],
            )

        calls = 0

        def counted(current: Memory) -> Memory | None:
            nonlocal calls
            calls += 1  # every call after the first re-applies after a lost race
            return mutate(current)

        # one compare-and-set loop for every writer (the file backend runs it under its lock)
        revision = self.storage.update(scope, counted, max_conflicts=self._max_conflict_retries)
        conflicts = max(0, calls - 1)
        if state["already"]:
            logger.info(
                "memory thread %r: another writer already applied these turns", job.thread_id
            )
            return UpdateOutcome("already_applied", revision, len(new), conflicts=conflicts)
        report = state["report"]
        self._report_removals(scope, report, state.get("trimmed_total", 0))
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
        gates = extracted.gates or GateReport(proposed=len(update.newFacts))
        gated = gates.summary()
        logger.info(
            "memory facts for user %r thread %r: proposed=%d stored=%d reinforced=%d "
            "below_threshold=%d grounding_dropped=%d grounding_demoted=%d value_rejected=%d "
            "remembered_added=%d remembered_boosted=%d",
            scope.user_id,
            job.thread_id,
            gated["proposed"],
            counts["added"],
            counts["reinforced"],
            counts["below_threshold"],
            gated["grounding_dropped"],
            gated["grounding_demoted"],
            gated["value_rejected"],
            gated["remembered_added"],
            gated["remembered_boosted"],
        )
        return UpdateOutcome(
            "applied" if report.changed else "unchanged",
            revision,
            len(new),
            report,
            extraction,
            conflicts,
            gates,
        )
