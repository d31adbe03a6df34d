"""``deermem export`` and ``import``: our document, DeerFlow's ``memory.json`` (v1.0), DeerFlow
HEAD's v2 layout (summary JSON plus one Markdown file per fact), or a whole DeerFlow data folder;
read leniently one fact at a time, and capped as extracted memory is: more facts than
``max_facts`` are trimmed when imported, and the receipt says how many, at what ``max_facts``,
and lists the facts left out (the first :data:`MAX_REPAIR_LINES`; ``-v`` all of them).

Reading, merging and capping are :mod:`~deermem_middleware.formats.importing` (the web console
imports the same way); this module adds the files and the receipts. A whole folder (``import
--deerflow DIR``) is :mod:`~deermem_middleware.cli.deerflow_import`, dispatched from
:func:`_import`; it merges and reports with the same helpers, so both imports treat a fact the
same.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.formats.repair import RepairReport
    from deermem_middleware.memory.document import Fact, Memory

from deermem_middleware.cli.common import UsageError, _dump, _now, _opened, _storage_guard, _who
from deermem_middleware.cli.deerflow_import import _import_folder
from deermem_middleware.cli.receipts import _capped_note, _print_lines

__all__: list[str] = []  # private: the command is the interface


"""Repairs listed one per line in a receipt; -v lists them all."""


def _deerflow_document(memory: Memory) -> dict[str, Any]:
    """``memory`` in DeerFlow's v1.0 ``memory.json`` shape (see
    :func:`~deermem_middleware.formats.deerflow.to_deerflow`)."""
    from deermem_middleware.formats.deerflow import to_deerflow

    return to_deerflow(memory)


# -- export ----------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    if args.layout == "v2":
        if args.format != "deerflow":
            raise UsageError("--layout v2 is DeerFlow's layout: give --format deerflow too")
        return _export_v2(args)
    with _opened(args) as middleware, _storage_guard(middleware):
        scope = middleware.scope(args.user)
        stored = middleware.load(scope)
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
    from deermem_middleware.formats.deerflow_v2_writer import write_v2

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
            agents = sorted(s.agent_name for s in middleware.list_scopes() if s.user_id == user)
        documents = {}
        for agent in agents:
            stored = middleware.load(middleware.scope(user, agent))
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


@dataclass(frozen=True)
class _FileRead:
    """A file as read (:class:`~deermem_middleware.formats.importing.DocumentRead`), with the
    notes about what lies beside it (a v2 manifest's Markdown facts)."""

    memory: Memory
    detected: str
    report: RepairReport
    notes: list[str] = field(default_factory=list)


def _markdown_beside(path: Path, agent: str, now: str) -> tuple[list[Memory], list[str], int]:
    """For a v2 summary manifest: the Markdown facts of ``agent`` beside it, the lines of their
    repairs (plus a note naming the other agents with facts there), and how many were dropped."""
    from deermem_middleware.formats.deerflow_layout import markdown_beside

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
    """Load a memory document file, leniently (see
    :func:`~deermem_middleware.formats.importing.read_document_data`), with what only a file has:
    an older HEAD manifest's references to Markdown files beside it, and a v2 summary manifest's
    Markdown facts in the folder around it.

    Raises :class:`UsageError` naming the file and the field.
    """
    from deermem_middleware.formats.deerflow import is_v2_manifest
    from deermem_middleware.formats.deerflow_layout import resolve_fact_references
    from deermem_middleware.formats.importing import ImportFormatError, read_document_data
    from deermem_middleware.formats.repair import Repair, RepairReport
    from deermem_middleware.memory.document import DocumentFormatError, parse_document_json

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read import file {path}: {exc.strerror or exc}") from None
    try:
        data = parse_document_json(raw)
    except DocumentFormatError as exc:
        raise UsageError(f"{path}: {exc}") from None
    now = _now()
    notes: list[str] = []
    beside: list[Memory] = []
    dropped = 0
    v2 = False

    def prepare(data: dict[str, Any]) -> tuple[dict[str, Any], Sequence[Repair]]:
        nonlocal beside, notes, dropped, v2
        v2 = is_v2_manifest(data)
        if v2:
            beside, notes, dropped = _markdown_beside(path, agent, now)
        resolved, unread = resolve_fact_references(data, path.parent, root=path.parent)
        return resolved, unread.repairs

    try:
        read = read_document_data(data, fmt=fmt, where=str(path), now=now, prepare=prepare)
    except ImportFormatError as exc:
        raise UsageError(f"{path}: {exc.field}: {exc}" if exc.field else f"{path}: {exc}") from None
    memory, detected, report = read.memory, read.detected, read.report
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


def _import(args: argparse.Namespace) -> int:
    if args.deerflow is not None:
        if args.file is not None:
            raise UsageError("give either FILE or --deerflow DIR, not both")
        return _import_folder(args)
    if args.file is None:
        raise UsageError("give the FILE to import, or --deerflow DIR for a DeerFlow data folder")
    return _import_file(args)


def _import_file(args: argparse.Namespace) -> int:
    from deermem_middleware.formats.importing import ImportChange, log_import_cuts

    path = Path(args.file)
    if path.is_dir():
        hint = " (a DeerFlow data folder: use --deerflow)" if _looks_deerflow(path) else ""
        raise UsageError(f"{path} is a folder, not a memory document{hint}")
    with _opened(args) as middleware, _storage_guard(middleware):
        scope = middleware.scope(args.user)
        read = _read_memory_file(path, args.format, scope.agent_name)
        detected = read.detected
        change = ImportChange(
            read.memory, replace=args.replace, max_facts=middleware.config.max_facts, clock=_now
        )
        before, _, revision = middleware.change(scope, change)
    log_import_cuts(change.capped, user=scope.user_id, agent=scope.agent_name)
    report, capped = change.report, change.capped
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
    _print_lines(_left_out_lines(change.left_out), args.verbose)
    return 0


def _looks_deerflow(path: Path) -> bool:
    from deermem_middleware.formats.deerflow_layout import is_deerflow_folder

    return is_deerflow_folder(path)


def _repaired_note(report: RepairReport) -> str:
    parts = []
    if report.facts_repaired:
        ids = f" ({report.ids_repaired} given a new id)" if report.ids_repaired else ""
        parts.append(f"{report.facts_repaired} fact(s) repaired{ids}")
    if report.facts_dropped:
        parts.append(f"{report.facts_dropped} dropped")
    return f"; {', '.join(parts)} on the way in (listed below)" if parts else ""


def _left_out_lines(facts: Sequence[Fact]) -> list[str]:
    """One line per fact an import did not keep over ``max_facts`` (imported, or stored before
    a merge): its id and text."""
    return [f"not kept over max_facts: {f.id}: {f.content}" for f in facts]
