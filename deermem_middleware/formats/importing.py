"""Importing a memory document that comes from outside — an export, DeerFlow's ``memory.json``, an
upload — into a stored one: reading it, telling whose format it is, and merging or replacing.

``deermem import`` (files, whole DeerFlow folders) and the web console (a document posted as JSON)
import the same way, so a fact imported by either is treated the same: read leniently, one fact at
a time (:mod:`~deermem_middleware.formats.repair`), with the values no loader accepts rejected and
named by their JSON path (:class:`ImportFormatError`); merged without duplicates
(:func:`merge_memory`); and capped as extracted memory is
(:func:`~deermem_middleware.formats.interchange.cap_document`), all inside the storage's
compare-and-set loop (:class:`ImportChange` for ``MemoryService.change``).

An import over ``max_facts`` is trimmed when it is imported, not by the next conversation: the
least valuable facts are left out (:attr:`ImportChange.left_out`), counted in the document's
``trimmed`` (:mod:`~deermem_middleware.memory.capacity`), named in the receipt with the limit and
how to keep them, and logged by :func:`log_import_cuts` — the one log every importer (the CLI,
the console, DeerFlow's gateway) calls once the import is saved. Trimming later would have
reported "250 fact(s) added" and then deleted 150 of them in the next conversation's update.

Pure: no files, the clock passed in. What only a file has (Markdown facts beside a v2 manifest,
references relative to its folder) stays with the command, which hands its part in through
``prepare``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal

from deermem_middleware.formats.interchange import CapReport, cap_document, invalid_text
from deermem_middleware.memory.document import SECTION_FIELDS, USER_FIELDS, Fact, Memory
from deermem_middleware.memory.facts import normalize_fact_text

if TYPE_CHECKING:
    from deermem_middleware.formats.deerflow_layout import Piece
    from deermem_middleware.formats.repair import Repair, RepairReport

__all__ = [
    "LIFECYCLE_KEYS",
    "DocumentRead",
    "ImportChange",
    "ImportFormatError",
    "MergeReport",
    "detect_format",
    "log_import_cuts",
    "merge_memory",
    "merge_pieces",
    "read_document_data",
]

LIFECYCLE_KEYS: Final = frozenset(
    {
        "sourceKind",
        "lastConfirmedAt",
        "confirmations",
        "lastInjectedAt",
        "injections",
        "used",
        "supersededBy",
        "manual",
    }
)
"""Fact keys only we write: a file with any of them is one of ours (DeerFlow HEAD writes
``status`` and ``updatedAt`` too)."""

logger = logging.getLogger(__name__)

Prepare = Callable[[dict[str, Any]], tuple[dict[str, Any], Sequence["Repair"]]]
"""A caller's step between the shape checks and the reading (see :func:`read_document_data`)."""


class ImportFormatError(ValueError):
    """A document that cannot be imported: ``field`` is the JSON path of what is wrong
    (``facts[3].confidence``, ``revision``; ``""`` for the document as a whole), the message says
    what is wrong, and ``more`` counts the further problems of the same kind (the message ends in
    ``(and N more)`` then). A command prefixes its file, a web API its request field."""

    def __init__(self, field: str, message: str, *, more: int = 0) -> None:
        super().__init__(message + (f" (and {more} more)" if more else ""))
        self.field = field
        self.more = more


@dataclass(frozen=True)
class DocumentRead:
    """A document as read: the memory, its format (``deermem``, ``deerflow``; the command says
    ``deerflow v2`` for a manifest with Markdown facts beside it) and what the lenient read
    repaired or dropped."""

    memory: Memory
    detected: str
    report: RepairReport


def detect_format(data: dict[str, Any]) -> str:
    """``deermem`` or ``deerflow``: whose document ``data`` is. Ours carry keys DeerFlow never
    writes (``revision``, ``scope``, ``watermarks`` at the top; :data:`LIFECYCLE_KEYS` on a fact);
    anything else is read as DeerFlow's, the more lenient reading."""
    if {"revision", "scope", "watermarks"} & data.keys() and data.get("version") != "2.0":
        return "deermem"
    facts = data.get("facts")
    if isinstance(facts, list) and any(
        isinstance(f, dict) and LIFECYCLE_KEYS & f.keys() for f in facts
    ):
        return "deermem"
    return "deerflow"


def read_document_data(
    data: Any,
    *,
    fmt: str = "auto",
    where: str,
    now: str,
    prepare: Prepare | None = None,
) -> DocumentRead:
    """Read an already parsed document leniently: what DeerFlow's loaders accept (no id, a
    ``null`` confidence, facts as an id map) is repaired; a value neither accepts (a confidence
    of ``"lots"``, a lone surrogate in a date) raises :class:`ImportFormatError` naming the
    first such field, before anything is written. Fact ids follow their own rule
    (:mod:`~deermem_middleware.formats.fact_ids`): a bad one is replaced and reported, never
    refused.

    ``fmt``: ``auto`` (:func:`detect_format`), ``deermem`` or ``deerflow``. ``where`` names the
    document in the repair report's lines; ``now`` stamps what has no date. ``prepare`` runs after
    the shape checks and before the reading, for what only the caller can do (resolve references
    to files): it returns the data to read and the references it could not resolve, reported
    first among the problems.
    """
    from deermem_middleware.formats.deerflow import from_deerflow
    from deermem_middleware.formats.repair import repair_document

    if not isinstance(data, dict):
        raise ImportFormatError(
            "",
            f"the top level is a JSON {type(data).__name__}, expected an object "
            "(a memory document)",
        )
    detected = detect_format(data) if fmt == "auto" else fmt
    revision = data.get("revision", 0)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise ImportFormatError("revision", f"must be a non-negative integer, got {revision!r}")
    facts = data.get("facts")
    if facts is not None and not isinstance(facts, list | dict):
        raise ImportFormatError("facts", f"must be a list, got {type(facts).__name__}")
    unresolved: Sequence[Repair] = ()
    if prepare is not None:
        data, unresolved = prepare(data)
    if detected == "deerflow":
        memory, report = from_deerflow(data, where=where, now=now)
    else:
        memory, report = repair_document(data, where=where, now=now)
    problems = [*unresolved, *report.invalid]
    if problems:
        first = problems[0]
        reason = first.reason.split("; ")[0]  # what is wrong, not what a lenient read would do
        raise ImportFormatError(first.field, reason, more=len(problems) - 1)
    for index, fact in enumerate(memory.facts):
        for name, value in fact.model_dump(exclude={"content", "category"}).items():
            if isinstance(value, str) and invalid_text(value):
                # content and category are repaired by the caps; an id or a date cannot be
                raise ImportFormatError(
                    f"facts[{index}].{name}", "not valid Unicode (a lone surrogate)"
                )
    return DocumentRead(memory, detected, report)


# -- merging ---------------------------------------------------------------------------------


@dataclass
class MergeReport:
    """What a merge took: the ids of the facts added, the facts skipped as already known (by id,
    by text) and the summaries taken. An importer's receipt is made of it."""

    added: list[str] = field(default_factory=list)
    same_id: int = 0
    same_text: int = 0
    sections: list[str] = field(default_factory=list)

    def absorb(self, other: MergeReport) -> None:
        """Add ``other``'s counts (merging several documents into one, in order)."""
        self.added += other.added
        self.same_id += other.same_id
        self.same_text += other.same_text
        self.sections += [s for s in other.sections if s not in self.sections]


def _section_time(value: Any) -> str:
    stamp = value.get("updatedAt") if isinstance(value, Mapping) else None
    return stamp if isinstance(stamp, str) else ""


def _newer_unknown_sections(
    current: Memory, incoming: Memory, group: Literal["user", "history"]
) -> dict[str, Any]:
    """The sections of ``group`` we do not model (``user.cognitiveStyle``) that ``incoming``
    adds: ones ``current`` lacks, or has with an older ``updatedAt`` — the rule of the known
    summaries, applied to sections kept as they were read."""
    mine = current.unknown_sections(group)
    return {
        name: value
        for name, value in incoming.unknown_sections(group).items()
        if name not in mine or _section_time(value) > _section_time(mine[name])
    }


def merge_memory(current: Memory, incoming: Memory, now: str) -> tuple[Memory, MergeReport]:
    """``current`` plus what ``incoming`` adds: new facts (not the same id, not the same text
    after :func:`~deermem_middleware.memory.facts.normalize_fact_text`), summaries that are newer
    or fill an empty one (the sections we do not model too), and watermarks and unknown
    top-level keys ``current`` does not have.

    Nothing of ``current`` is overwritten but older summaries: an import must not undo what the
    memory learnt since the export. Returns ``current`` itself when nothing is new, so the
    compare-and-set loop writes nothing."""
    report = MergeReport()
    facts = list(current.facts)
    ids = {f.id for f in facts}
    keys = {normalize_fact_text(f.content) for f in facts}
    for fact in incoming.facts:
        key = normalize_fact_text(fact.content)
        if fact.id in ids:
            report.same_id += 1
        elif key in keys:
            report.same_text += 1
        else:
            facts.append(fact)
            ids.add(fact.id)
            keys.add(key)
            report.added.append(fact.id)
    user, history = current.user, current.history
    for name in SECTION_FIELDS:
        mine, theirs = current.section(name), incoming.section(name)
        if mine.replaced_by(theirs):
            report.sections.append(name)
            if name in USER_FIELDS:
                user = user.model_copy(update={name: theirs})
            else:
                history = history.model_copy(update={name: theirs})
    newer_user = _newer_unknown_sections(current, incoming, "user")
    newer_history = _newer_unknown_sections(current, incoming, "history")
    report.sections += [*newer_user, *newer_history]
    user = user.model_copy(update=newer_user) if newer_user else user
    history = history.model_copy(update=newer_history) if newer_history else history
    watermarks = {**incoming.watermarks, **current.watermarks}
    extras = {
        k: v
        for k, v in (incoming.model_extra or {}).items()
        if k not in (current.model_extra or {})
    }
    if not (report.added or report.sections or extras or watermarks.keys() - current.watermarks):
        return current, report  # nothing new: the caller writes nothing
    merged = current.model_copy(
        update={
            "facts": tuple(facts),
            "user": user,
            "history": history,
            "watermarks": watermarks,
            "lastUpdated": now,
        }
    )
    if extras:
        merged = Memory.from_json_dict({**extras, **merged.to_json_dict()})
    return merged, report


class ImportChange:
    """An import as a change for ``MemoryService.change`` (``Memory -> Memory``): the storage's
    compare-and-set loop may call it more than once (a running agent saved in between), so it
    recomputes from the document it is given each time, and :attr:`report` and :attr:`capped`
    describe the last call — the one that was saved.

    ``incoming`` is one document (a file, an upload) or several (the pieces a DeerFlow folder
    holds for one scope: global, per-agent and per-user files, Markdown facts). One document is
    merged into the stored one (:func:`merge_memory`) or, with ``replace``, replaces it as is — an
    export imported back comes back exactly — and the result is always capped as extracted memory
    is (``max_facts``, lengths, valid text, watermarks). Several are fragments of one memory, so
    they are merged in order (into an empty document with ``replace``), and nothing new writes
    nothing. ``clock`` gives the ``lastUpdated`` stamp of each attempt.
    """

    def __init__(
        self,
        incoming: Memory | Sequence[Memory],
        *,
        replace: bool,
        max_facts: int,
        clock: Callable[[], str],
    ) -> None:
        self.incoming = incoming
        self.replace = replace
        self.max_facts = max_facts
        self.clock = clock
        self.report = MergeReport()
        """What the last call merged (facts added after the caps, skipped, summaries taken)."""
        self.capped = CapReport()
        """What the caps cut in the last call."""
        self.left_out: tuple[Fact, ...] = ()
        """The facts the last call left out over ``max_facts`` (the least valuable), for the
        receipt: imported or already stored."""

    def __call__(self, memory: Memory) -> Memory:
        now = self.clock()
        self.capped = CapReport()
        self.left_out = ()
        if isinstance(self.incoming, Memory):
            if self.replace:
                self.report = MergeReport(added=[f.id for f in self.incoming.facts])
                merged = self.incoming.model_copy(update={"lastUpdated": now})
            else:
                merged, self.report = merge_memory(memory, self.incoming, now)
        else:
            self.report = MergeReport()
            merged = Memory() if self.replace else memory
            for piece in self.incoming:
                merged, step = merge_memory(merged, piece, now)
                self.report.absorb(step)
            if merged is memory:
                return memory  # nothing new: nothing written
        result, self.capped = cap_document(merged, max_facts=self.max_facts, now=now)
        dropped = set(self.capped.facts_over_capacity)
        self.report.added = [i for i in self.report.added if i not in dropped]
        self.left_out = tuple(f for f in merged.facts if f.id in dropped)
        return result


def log_import_cuts(capped: CapReport, *, user: str, agent: str) -> None:
    """Log what the caps cut from an import into the memory of ``user`` and ``agent``, once it
    is saved (the receipt says it too, to whoever imported): the facts left out over
    ``max_facts`` in one WARNING with their count — never their text, memory may be private —
    and their ids at DEBUG; each other cut (lengths, text repaired) in a WARNING of its own."""
    who = f"user {user!r} agent {agent!r}"
    over = capped.facts_over_capacity
    if over:
        logger.warning(
            "memory import into %s: %d fact(s) over max_facts=%s not kept (the least valuable; "
            "deleted, counted as trimmed in `deermem stats`); raise max_facts and import again "
            "to keep them",
            who,
            len(over),
            capped.max_facts,
        )
        logger.debug("memory import into %s: left out over max_facts: %s", who, ", ".join(over))
    for note in replace(capped, facts_over_capacity=[]).notes():
        logger.warning("memory import into %s: %s", who, note)


def merge_pieces(pieces: Sequence[Piece], now: str) -> Memory:
    """The pieces of one scope (a DeerFlow folder's files for one user and agent) as one
    document, merged in order (what ``deermem show`` prints beside ours)."""
    memory = Memory()
    for piece in pieces:
        memory, _ = merge_memory(memory, piece.memory, now)
    return memory
