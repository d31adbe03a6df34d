"""``deermem export`` and ``import``: our document, DeerFlow's ``memory.json`` (v1.0), DeerFlow
HEAD's v2 layout (summary JSON plus one Markdown file per fact), or a whole DeerFlow data folder;
read leniently one fact at a time, and capped as extracted memory is.

A whole folder (``import --deerflow DIR``) is :mod:`~deermem_middleware.cli.deerflow_import`,
dispatched from :func:`_import`; it merges and reports with the helpers here, so both imports treat
a fact the same.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from deermem_middleware.deerflow.layout import Piece
    from deermem_middleware.memory.document import Memory
    from deermem_middleware.memory.interchange import CapReport
    from deermem_middleware.memory.repair import RepairReport

from deermem_middleware.cli.common import UsageError, _dump, _now, _opened, _who
from deermem_middleware.cli.inspect import _storage_guard

__all__: list[str] = []  # private: the command is the interface


LIFECYCLE_KEYS: Final = frozenset(
    {
        "sourceKind",
        "lastConfirmedAt",
        "confirmations",
        "lastInjectedAt",
        "injections",
        "supersededBy",
        "manual",
    }
)
"""Fact keys only we write: a file with any of them is one of ours (DeerFlow HEAD writes
``status`` and ``updatedAt`` too)."""

MAX_REPAIR_LINES: Final = 20
"""Repairs listed one per line in a receipt; -v lists them all."""


def _deerflow_document(memory: Memory) -> dict[str, Any]:
    """``memory`` in DeerFlow's v1.0 ``memory.json`` shape (see
    :func:`~deermem_middleware.deerflow.formats.to_deerflow`)."""
    from deermem_middleware.deerflow.formats import to_deerflow

    return to_deerflow(memory)


# -- export ----------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    if args.layout == "v2":
        if args.format != "deerflow":
            raise UsageError("--layout v2 is DeerFlow's layout: give --format deerflow too")
        return _export_v2(args)
    with _opened(args) as middleware, _storage_guard(middleware):
        scope = middleware.scope(args.user)
        stored = middleware.storage.load(scope)
    if args.format == "deerflow":
        document = _deerflow_document(stored.memory)
    else:
        document = {
            "revision": stored.revision,
            "scope": {"user_id": scope.user_id, "agent_name": scope.agent_name},
            **stored.memory.to_json_dict(),
        }
    if stored.revision == 0:
        print(f"deermem: note: nothing is stored for {_who(scope)}", file=sys.stderr)
    text = _dump(document) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(
        f"exported the memory of {_who(scope)} (revision {stored.revision}, "
        f"{len(document['facts'])} fact(s), {args.format} format) to {args.output}"
    )
    return 0


def _export_v2(args: argparse.Namespace) -> int:
    from deermem_middleware.deerflow.v2_writer import write_v2

    if args.output is None:
        raise UsageError("--layout v2 writes a folder: give it with --output DIR")
    root = Path(args.output).expanduser()
    if root.exists() and not root.is_dir():
        raise UsageError(f"--output {root} is a file; --layout v2 writes a folder")
    with _opened(args) as middleware, _storage_guard(middleware):
        user = middleware.scope(args.user).user_id
        if args.agent is not None:
            agents = [middleware.scope(args.user).agent_name]
        else:
            agents = sorted(
                s.agent_name for s in middleware.storage.list_scopes() if s.user_id == user
            )
        documents = {}
        for agent in agents:
            stored = middleware.storage.load(middleware.scope(user, agent))
            if stored.revision:
                documents[agent] = stored.memory
    if not documents:
        raise UsageError(f"nothing is stored for user {user!r}: no document to export")
    try:
        written = write_v2(root, user, documents)
    except (ValueError, FileExistsError) as exc:
        raise UsageError(f"cannot export to {root}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or root}: {exc.strerror or exc}") from None
    per_agent = ", ".join(f"{a}: {n}" for a, n in written.facts.items())
    print(
        f"exported the memory of user {user!r} to {root} in DeerFlow's v2 layout: "
        f"{written.manifest.relative_to(root)} (summaries) and "
        f"{sum(written.facts.values())} fact file(s) ({per_agent})"
    )
    if written.skipped:
        print(f"  not exported (DeerFlow keeps active facts only): {', '.join(written.skipped)}")
    for old, new in written.renamed.items():
        print(f"  fact {old!r} written as {new} (DeerFlow ids are file names)")
    return 0


# -- reading one file ------------------------------------------------------------------------


def _detect_format(data: dict[str, Any]) -> str:
    if {"revision", "scope", "watermarks"} & data.keys() and data.get("version") != "2.0":
        return "deermem"
    facts = data.get("facts")
    if isinstance(facts, list) and any(
        isinstance(f, dict) and LIFECYCLE_KEYS & f.keys() for f in facts
    ):
        return "deermem"
    return "deerflow"


@dataclass
class _FileRead:
    memory: Memory
    detected: str
    report: RepairReport
    notes: list[str] = field(default_factory=list)


def _markdown_beside(path: Path, agent: str, now: str) -> tuple[list[Memory], list[str], int]:
    """For a v2 summary manifest: the Markdown facts of ``agent`` beside it, the lines of their
    repairs (plus a note naming the other agents with facts there), and how many were dropped."""
    from deermem_middleware.deerflow.layout import markdown_beside

    memories, reports, others = markdown_beside(path, agent, now=now)
    notes = [line for report in reports for line in report.lines()]
    if others:
        names = ", ".join(f"{name} ({count})" for name, count in others.items())
        notes.append(
            f"the folder also holds Markdown facts of agent(s) {names}: import them with "
            "--agent NAME, or the whole data folder with --deerflow"
        )
    return memories, notes, sum(r.facts_dropped for r in reports)


def _read_memory_file(path: Path, fmt: str = "auto", agent: str = "__default__") -> _FileRead:
    """Load a memory document file, leniently: what DeerFlow's loaders accept (no id, a ``null``
    confidence, facts as an id map, a v2 summary manifest with Markdown facts beside it) is
    repaired; a value neither accepts (a confidence of ``"lots"``, a duplicate id) is an error.

    Raises :class:`UsageError` naming the file and the field.
    """
    from deermem_middleware.deerflow.formats import from_deerflow, is_v2_manifest
    from deermem_middleware.deerflow.layout import resolve_fact_references
    from deermem_middleware.memory.document import DocumentFormatError, parse_document_json
    from deermem_middleware.memory.interchange import invalid_text
    from deermem_middleware.memory.repair import RepairReport, repair_document

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read import file {path}: {exc.strerror or exc}") from None
    try:
        data = parse_document_json(raw)
    except DocumentFormatError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: the top level is a JSON {type(data).__name__}, expected an object "
            "(a memory document)"
        )
    detected = _detect_format(data) if fmt == "auto" else fmt
    revision = data.get("revision", 0)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise UsageError(f"{path}: revision: must be a non-negative integer, got {revision!r}")
    facts = data.get("facts")
    if facts is not None and not isinstance(facts, list | dict):
        raise UsageError(f"{path}: facts: must be a list, got {type(facts).__name__}")
    now = _now()
    notes: list[str] = []
    beside: list[Memory] = []
    dropped = 0
    v2 = is_v2_manifest(data)
    if v2:
        beside, notes, dropped = _markdown_beside(path, agent, now)
    data, unread = resolve_fact_references(data, path.parent, root=path.parent)
    if detected == "deerflow":
        memory, report = from_deerflow(data, where=str(path), now=now)
    else:
        memory, report = repair_document(data, where=str(path), now=now)
    problems = [*unread.repairs, *report.invalid]
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        reason = first.reason.split("; ")[0]  # what is wrong, not what a lenient read would do
        raise UsageError(f"{path}: {first.field}: {reason}{more}")
    for index, fact in enumerate(memory.facts):
        for name, value in fact.model_dump(exclude={"content", "category"}).items():
            if isinstance(value, str) and invalid_text(value):
                raise UsageError(
                    f"{path}: facts[{index}].{name}: not valid Unicode (a lone surrogate)"
                )
    if beside:
        facts_beside = tuple(f for m in beside for f in m.facts)
        memory = memory.model_copy(update={"facts": (*memory.facts, *facts_beside)})
        report = RepairReport(
            report.where,
            report.repairs,
            report.facts_read + len(facts_beside) + dropped,
            report.facts_kept + len(facts_beside),
            report.dropped_items,
        )
        detected = "deerflow v2"
    elif v2:
        notes.append(f"a DeerFlow v2 summary file: no Markdown facts of agent {agent!r} beside it")
    return _FileRead(memory, detected, report, notes)


# -- merging ---------------------------------------------------------------------------------


@dataclass
class _MergeReport:
    added: list[str] = field(default_factory=list)
    same_id: int = 0
    same_text: int = 0
    sections: list[str] = field(default_factory=list)

    def absorb(self, other: _MergeReport) -> None:
        self.added += other.added
        self.same_id += other.same_id
        self.same_text += other.same_text
        self.sections += [s for s in other.sections if s not in self.sections]


def _merge_memory(current: Memory, incoming: Memory, now: str) -> tuple[Memory, _MergeReport]:
    """``current`` plus what ``incoming`` adds: new facts (not the same id, not the same text
    after :func:`normalize_fact_text`), summaries that are newer or fill an empty one, and
    watermarks and unknown top-level keys ``current`` does not have."""
    from deermem_middleware.memory.document import SECTION_FIELDS, USER_FIELDS
    from deermem_middleware.memory.facts import normalize_fact_text

    report = _MergeReport()
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
        if theirs.summary and (not mine.summary or theirs.updatedAt > mine.updatedAt):
            report.sections.append(name)
            if name in USER_FIELDS:
                user = user.model_copy(update={name: theirs})
            else:
                history = history.model_copy(update={name: theirs})
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
        from deermem_middleware.memory.document import Memory

        merged = Memory.from_json_dict({**extras, **merged.to_json_dict()})
    return merged, report


def _combined(pieces: Sequence[Piece], now: str) -> Memory:
    """The pieces of one scope as one document, merged in order (for ``show``)."""
    from deermem_middleware.memory.document import Memory

    memory = Memory()
    for piece in pieces:
        memory, _ = _merge_memory(memory, piece.memory, now)
    return memory


# -- import ----------------------------------------------------------------------------------


def _import(args: argparse.Namespace) -> int:
    if args.deerflow is not None:
        if args.file is not None:
            raise UsageError("give either FILE or --deerflow DIR, not both")
        from deermem_middleware.cli.deerflow_import import _import_folder  # it imports this module

        return _import_folder(args)
    if args.file is None:
        raise UsageError("give the FILE to import, or --deerflow DIR for a DeerFlow data folder")
    return _import_file(args)


def _import_file(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.interchange import CapReport, cap_document

    path = Path(args.file)
    if path.is_dir():
        hint = " (a DeerFlow data folder: use --deerflow)" if _looks_deerflow(path) else ""
        raise UsageError(f"{path} is a folder, not a memory document{hint}")
    with _opened(args) as middleware, _storage_guard(middleware):
        scope = middleware.scope(args.user)
        read = _read_memory_file(path, args.format, scope.agent_name)
        incoming, detected = read.memory, read.detected
        report = _MergeReport()
        capped = CapReport()

        def change(memory: Memory) -> Memory:
            nonlocal report, capped
            now = _now()
            if args.replace:
                report = _MergeReport(added=[f.id for f in incoming.facts])
                merged = incoming.model_copy(update={"lastUpdated": now})
            else:
                merged, report = _merge_memory(memory, incoming, now)
            # the caps extracted data has: lengths, valid text, max_facts, watermarks
            result, capped = cap_document(merged, max_facts=middleware.config.max_facts)
            dropped = set(capped.facts_over_capacity)
            report.added = [i for i in report.added if i not in dropped]
            return result

        before, _, revision = middleware.change(scope, change)
    repaired = _repaired_note(read.report)
    if args.replace:
        print(
            f"replaced the memory of {_who(scope)} with {path} ({detected} format): "
            f"{len(report.added)} fact(s), was {len(before.facts)}; revision {revision}"
            + repaired
            + _capped_note(capped)
        )
    else:
        print(
            f"merged {path} ({detected} format) into the memory of {_who(scope)} "
            f"(revision {revision}): {len(report.added)} fact(s) added, {report.same_id} with a "
            f"known id and {report.same_text} with known text skipped; "
            f"{len(report.sections)} summary(ies) taken"
            + (f" ({', '.join(report.sections)})" if report.sections else "")
            + repaired
            + _capped_note(capped)
        )
    _print_lines([*read.report.lines(), *read.notes], args.verbose)
    return 0


def _looks_deerflow(path: Path) -> bool:
    from deermem_middleware.deerflow.layout import is_deerflow_folder

    return is_deerflow_folder(path)


def _repaired_note(report: RepairReport) -> str:
    parts = []
    if report.facts_repaired:
        parts.append(f"{report.facts_repaired} fact(s) repaired")
    if report.facts_dropped:
        parts.append(f"{report.facts_dropped} dropped")
    return f"; {', '.join(parts)} on the way in (listed below)" if parts else ""


def _print_lines(lines: Sequence[str], verbose: int, indent: str = "  ") -> None:
    shown = lines if verbose else lines[:MAX_REPAIR_LINES]
    for line in shown:
        print(f"{indent}{line}")
    if len(lines) > len(shown):
        print(f"{indent}... and {len(lines) - len(shown)} more (-v lists them all)")


def _capped_note(capped: CapReport) -> str:
    notes = capped.notes()
    return f"; capped as extracted memory is: {'; '.join(notes)}" if notes else ""
