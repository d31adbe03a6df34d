"""DeerFlow's memory folders on disk: where each user's and agent's memory lives, and reading a
whole data folder (every version DeerFlow has written).

Where DeerFlow keeps memory, under its data folder (``.deer-flow/``, or ``storage_path``), and
whose memory each place is in our terms (user, agent):

================================================  ==============================================
``memory.json``                                   ("default", "__default__"): the global file of
                                                  installs from before per-user memory
``agents/<name>/memory.json``                     ("default", <name>): legacy per-agent file
``users/<uid>/memory.json``                       (<uid>, "__default__"): v1.0 with facts, or
                                                  v2.0 summaries only (user-wide in DeerFlow)
``users/<uid>/agents/<name>/memory.json``         (<uid>, <name>): per-user per-agent v1.0 file
``users/<uid>/agents/<name>/facts/<xx>/<id>.md``  (<uid>, <name>): one v2.0 fact per file
``agents/<name>/facts/<xx>/<id>.md``              ("default", <name>)
``.../agents/lead-agent/facts/`` (no config.yaml) (<uid>, "__default__"): HEAD's earlier default
                                                  bucket, which it migrates the same way
``*.v1.bak``                                      never read: the backup HEAD's migration keeps
                                                  of a file whose facts it already moved
================================================  ==============================================

The files outside ``users/`` have no user: they were written before DeerFlow had users, by a
single-user install, and DeerFlow's no-auth user is ``"default"`` — so they are the default
user's. HEAD migrates a global file's facts into the ``__default__`` agent bucket, and a legacy
``agents/<name>/memory.json`` into agent ``<name>``; we map them the same way. HEAD's summaries
are per user (one ``memory.json`` for all agents): when they come from a v2.0 manifest they are
given to every agent document of that user we read, as DeerFlow shows them to every agent.

Reading is lenient (see :func:`~deermem_middleware.formats.deerflow.from_deerflow`): a bad fact is
dropped on its own, with a reason, and a file that cannot be read at all is reported, never the
end of the import. Nothing here writes to a DeerFlow folder: writing HEAD's v2 layout is
:mod:`~deermem_middleware.formats.deerflow_v2_writer` (:func:`write_v2`, still importable from
here), which only writes into a place that holds no DeerFlow memory yet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from deermem_middleware.formats.deerflow import V2_VERSION, fact_from_markdown, from_deerflow
from deermem_middleware.formats.repair import Repair, RepairReport
from deermem_middleware.memory.document import (
    SECTION_FIELDS,
    DocumentFormatError,
    Memory,
    parse_document_json,
)

__all__ = [
    "BACKUP_SUFFIX",
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "FolderRead",
    "Piece",
    "facts_agent",
    "is_deerflow_folder",
    "markdown_beside",
    "read_folder",
    "read_markdown_facts",
    "read_memory_file",
    "resolve_fact_references",
    "scope_locations",
]

logger = logging.getLogger(__name__)

DEFAULT_USER: Final = "default"
"""DeerFlow's user when auth is off; the owner of the files outside ``users/``."""
DEFAULT_AGENT: Final = "__default__"
"""DeerFlow HEAD's default agent bucket, and our default agent."""
PREVIOUS_DEFAULT_AGENT: Final = "lead-agent"
"""HEAD's earlier default bucket (a folder without ``config.yaml``), migrated to the default."""
BACKUP_SUFFIX: Final = ".v1.bak"
MEMORY_FILE: Final = "memory.json"

Kind = Literal["v1", "v2 summaries", "markdown"]


@dataclass(frozen=True)
class Piece:
    """What one DeerFlow file (or one agent's folder of Markdown facts) holds for one scope."""

    relative: str
    """The file or folder, relative to the data folder (``users/alice/memory.json``)."""
    user_id: str
    agent_name: str
    kind: Kind
    memory: Memory
    report: RepairReport
    summaries: int = 0
    """Non-empty summaries it holds."""
    user_wide: bool = False
    """Summaries of a v2.0 manifest, copied to this agent (DeerFlow's are per user)."""


@dataclass(frozen=True)
class FolderRead:
    """A DeerFlow data folder as read: the pieces per scope, and what was not read, and why."""

    root: Path
    pieces: tuple[Piece, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    """(relative path, why) for files deliberately not read (backups)."""
    errors: tuple[tuple[str, str], ...] = ()
    """(relative path, why) for files that could not be read at all."""

    def scopes(self) -> list[tuple[str, str]]:
        """The (user, agent) scopes read, in a stable order."""
        return sorted({(p.user_id, p.agent_name) for p in self.pieces})

    def for_scope(self, user_id: str, agent_name: str) -> list[Piece]:
        return [p for p in self.pieces if (p.user_id, p.agent_name) == (user_id, agent_name)]


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def facts_agent(agent_dir: Path) -> str:
    """Whose facts an ``agents/<name>/`` folder holds: ``<name>``, or the default agent for
    HEAD's earlier default bucket (``lead-agent`` without a ``config.yaml``)."""
    if agent_dir.name == PREVIOUS_DEFAULT_AGENT and not (agent_dir / "config.yaml").is_file():
        return DEFAULT_AGENT
    return agent_dir.name


def _owners(root: Path) -> list[tuple[Path, str]]:
    """(folder whose ``memory.json`` and ``agents/`` belong to a user, that user)."""
    return [(root, DEFAULT_USER)] + [(d, d.name) for d in _dirs(root / "users")]


def scope_locations(root: Path, user_id: str, agent_name: str) -> list[Path]:
    """The files and fact folders under ``root`` that hold the memory of (user, agent), in the
    order DeerFlow's versions wrote them (existing or not), the global ones first. (A user's
    v2.0 summaries, ``users/<uid>/memory.json``, are every agent's too.)"""
    bases = [root / "users" / user_id] + ([root] if user_id == DEFAULT_USER else [])
    out: list[Path] = []
    for base in reversed(bases):  # the global files first: the oldest
        if agent_name == DEFAULT_AGENT:
            out += [base / MEMORY_FILE, base / "agents" / DEFAULT_AGENT / "facts"]
            out.append(base / "agents" / PREVIOUS_DEFAULT_AGENT / "facts")
        else:
            folder = base / "agents" / agent_name.lower()
            out += [folder / MEMORY_FILE, folder / "facts"]
    return out


def is_deerflow_folder(root: Path) -> bool:
    """Whether ``root`` holds DeerFlow memory in any of its places (see the module)."""
    if not root.is_dir():
        return False
    for base, _ in _owners(root):
        if (base / MEMORY_FILE).is_file():
            return True
        for agent_dir in _dirs(base / "agents"):
            if (agent_dir / MEMORY_FILE).is_file() or any((agent_dir / "facts").glob("**/*.md")):
                return True
    return False


# -- reading ---------------------------------------------------------------------------------


def read_markdown_facts(
    folder: Path, *, root: Path, user_id: str | None, now: str | None = None
) -> tuple[list[Memory], list[RepairReport]]:
    """Every ``*.md`` fact under ``folder`` (one agent's ``facts/``), one document each, with a
    report naming the file. A file that cannot be parsed is a dropped fact; a front matter that
    names another user, agent or id than its place is filed under its place, with a note."""
    memories: list[Memory] = []
    reports: list[RepairReport] = []
    for path in sorted(folder.glob("**/*.md")):
        where = _rel(root, path)
        try:
            record = fact_from_markdown(path.read_text(encoding="utf-8"), where=where)
        except (OSError, UnicodeError, DocumentFormatError) as exc:
            reason = str(exc).removeprefix(f"{where}: ")
            if isinstance(exc, OSError):
                reason = f"cannot read it: {exc.strerror or exc}"
            repair = Repair("facts[0]", "dropped", f"{reason}; dropped", path.stem, True)
            dropped = {"index": 0, "reason": reason, "fact": {"path": where}}
            reports.append(RepairReport(where, (repair,), 1, 0, (dropped,)))
            continue
        notes = _place_notes(record, path, user_id=user_id, folder_agent=folder.parent.name)
        memory, report = from_deerflow({"facts": [record]}, where=where, now=now)
        repairs = (*notes, *report.repairs)
        reports.append(RepairReport(where, repairs, 1, report.facts_kept, report.dropped_items))
        memories.append(memory)
    return memories, reports


def markdown_beside(
    manifest: Path, agent_name: str, *, now: str | None = None
) -> tuple[list[Memory], list[RepairReport], dict[str, int]]:
    """For a v2.0 summary ``memory.json``: the Markdown facts of ``agent_name`` in the
    ``agents/`` folder beside it, their reports, and how many facts the other agents have
    there (agent folder name -> count)."""
    base = manifest.parent
    memories: list[Memory] = []
    reports: list[RepairReport] = []
    others: dict[str, int] = {}
    for agent_dir in _dirs(base / "agents"):
        folder = agent_dir / "facts"
        if not folder.is_dir():
            continue
        if facts_agent(agent_dir) != agent_name and agent_dir.name != agent_name.lower():
            others[agent_dir.name] = sum(1 for _ in folder.glob("**/*.md"))
            continue
        found, read = read_markdown_facts(folder, root=base, user_id=None, now=now)
        memories += found
        reports += read
    return memories, reports, {k: v for k, v in others.items() if v}


def _place_notes(
    record: dict[str, Any], path: Path, *, user_id: str | None, folder_agent: str
) -> list[Repair]:
    """HEAD refuses a fact whose front matter disagrees with its place; we keep it, filed by its
    place (where DeerFlow put it), and say so."""
    notes: list[Repair] = []
    scope = record.get("scope") or {}
    found_id, found_user, found_agent = (
        record.get("id"),
        scope.get("userId"),
        scope.get("agentName"),
    )
    if found_id is not None and str(found_id) != path.stem:
        reason = f"id {found_id!r} differs from the file name {path.stem!r}; id kept"
        notes.append(Repair("facts[0].id", "repaired", reason, None, True))
    if user_id is not None and found_user not in (None, user_id):
        reason = f"names user {found_user!r}; filed under the folder's user {user_id!r}"
        notes.append(Repair("facts[0].user_id", "repaired", reason, None, True))
    if isinstance(found_agent, str) and found_agent.lower() != folder_agent.lower():
        reason = f"names agent {found_agent!r}; filed under the folder's agent {folder_agent!r}"
        notes.append(Repair("facts[0].agent_name", "repaired", reason, None, True))
    return notes


def resolve_fact_references(
    data: Mapping[str, Any], base: Path, *, root: Path, read_elsewhere: Sequence[Path] = ()
) -> tuple[dict[str, Any], RepairReport]:
    """``data`` with an older HEAD manifest's ``facts`` map of id to ``{"path": ...}`` replaced by
    the Markdown files' records (paths relative to ``base``, never outside ``root``); references
    to files under ``read_elsewhere`` (fact folders read on their own) are left out. A reference
    that cannot be read is taken out too, and reported dropped (with the reason) in the
    returned report."""
    facts = data.get("facts")
    drops: list[Repair] = []
    items: list[dict[str, Any]] = []
    if not isinstance(facts, Mapping):
        return dict(data), RepairReport(str(base))
    resolved: dict[str, Any] = {}
    for index, (key, entry) in enumerate(facts.items()):
        is_reference = (
            isinstance(entry, Mapping)
            and "content" not in entry
            and isinstance(entry.get("path"), str)
        )
        if not is_reference:
            resolved[key] = entry
            continue
        relative = entry["path"]
        target = (base / relative).resolve()
        if target.is_file() and any(target.is_relative_to(d.resolve()) for d in read_elsewhere):
            continue
        try:
            if not target.is_relative_to(root.resolve()):
                raise DocumentFormatError("it points outside the folder")
            record = fact_from_markdown(target.read_text(encoding="utf-8"), where=relative)
        except (OSError, UnicodeError, DocumentFormatError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reason = f"its Markdown file {relative!r}: {reason.removeprefix(f'{relative}: ')}"
            drops.append(
                Repair(f"facts[{str(key)!r}]", "dropped", f"{reason}; dropped", str(key), True)
            )
            items.append({"index": index, "reason": reason, "fact": dict(entry)})
            continue
        record.setdefault("id", str(key))
        resolved[key] = record
    report = RepairReport(str(base), tuple(drops), len(drops), 0, tuple(items))
    return {**data, "facts": resolved}, report


def read_memory_file(
    path: Path, *, root: Path, now: str | None = None, read_elsewhere: Sequence[Path] = ()
) -> tuple[Memory, RepairReport, bool]:
    """One DeerFlow ``memory.json`` (any version), leniently: (memory, report, is a v2.0
    manifest). Raises :class:`DocumentFormatError` (naming the file) when it is not a JSON
    object at all, :class:`OSError` when it cannot be read."""
    where = _rel(root, path) if path.is_relative_to(root) else str(path)
    try:
        data = parse_document_json(path.read_bytes())
    except DocumentFormatError as exc:
        raise DocumentFormatError(f"{where}: {exc}") from None
    if not isinstance(data, dict):
        raise DocumentFormatError(
            f"{where}: the top level is a JSON {type(data).__name__}, expected an object"
        )
    v2 = data.get("version") == V2_VERSION
    data, unread = resolve_fact_references(
        data, path.parent, root=root, read_elsewhere=read_elsewhere
    )
    memory, report = from_deerflow(data, where=where, now=now)
    return memory, _joined(where, unread, report), v2


def _joined(where: str, first: RepairReport, second: RepairReport) -> RepairReport:
    return RepairReport(
        where,
        (*first.repairs, *second.repairs),
        first.facts_read + second.facts_read,
        first.facts_kept + second.facts_kept,
        (*first.dropped_items, *second.dropped_items),
    )


def _summaries(memory: Memory) -> int:
    return sum(1 for n in SECTION_FIELDS if memory.section(n).summary)


def _log(report: RepairReport) -> None:
    for repair in report.repairs:
        logger.warning("DeerFlow memory %s", repair.line(report.where))


def read_folder(
    root: Path,
    *,
    now: str | None = None,
    only: Iterable[tuple[str, str | None]] | None = None,
    log: bool = True,
) -> FolderRead:
    """Every piece of DeerFlow memory under ``root`` (see the module for the places), leniently;
    ``only``: just these (user, agent) scopes (agent None: every agent of that user). Logs a
    WARNING per repaired or dropped fact, naming the file and the fact (``log=False``: the
    caller reports them itself, as ``deermem import`` does in its receipt)."""
    wanted = None if only is None else list(only)

    def want(user: str, agent: str) -> bool:
        return wanted is None or any(u == user and a in (None, agent) for u, a in wanted)

    pieces: list[Piece] = []
    skipped: list[tuple[str, str]] = []
    errors: list[tuple[str, str]] = []
    for base, user in _owners(root):
        if wanted is not None and all(u != user for u, _ in wanted):
            continue
        backup = base / (MEMORY_FILE + BACKUP_SUFFIX)
        for found in [backup, *(d / (MEMORY_FILE + BACKUP_SUFFIX) for d in _dirs(base / "agents"))]:
            if found.is_file():
                skipped.append((_rel(root, found), "DeerFlow's backup of a file it migrated"))
        journal = base / ".memory.journal.json"
        if journal.is_file():
            errors.append(
                (
                    _rel(root, journal),
                    "DeerFlow left a write unfinished here; start "
                    "DeerFlow once to recover it, then import again",
                )
            )
        user_summaries: Memory | None = None
        files = [(base / MEMORY_FILE, DEFAULT_AGENT)]
        files += [(d / MEMORY_FILE, d.name) for d in _dirs(base / "agents")]
        for path, agent in files:
            if not path.is_file() or not want(user, agent):
                continue
            fact_dirs = [d / "facts" for d in _dirs(base / "agents")]
            try:
                memory, report, v2 = read_memory_file(
                    path, root=root, now=now, read_elsewhere=fact_dirs
                )
            except (OSError, DocumentFormatError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                errors.append((_rel(root, path), reason.removeprefix(f"{_rel(root, path)}: ")))
                continue
            if log:
                _log(report)
            if v2 and agent == DEFAULT_AGENT:
                user_summaries = memory
            kind: Kind = "v2 summaries" if v2 else "v1"
            pieces.append(
                Piece(_rel(root, path), user, agent, kind, memory, report, _summaries(memory))
            )
        for agent_dir in _dirs(base / "agents"):
            folder, agent = agent_dir / "facts", facts_agent(agent_dir)
            if not folder.is_dir() or not want(user, agent):
                continue
            memories, reports = read_markdown_facts(
                folder, root=root, user_id=None if base == root else user, now=now
            )
            for report in reports if log else ():
                _log(report)
            facts = tuple(f for m in memories for f in m.facts)
            merged = _join_reports(folder, root, reports)
            memory = Memory(facts=facts)
            wide = 0
            if user_summaries is not None and agent != DEFAULT_AGENT:
                memory = _with_summaries(memory, user_summaries)
                wide = _summaries(user_summaries)
            pieces.append(
                Piece(
                    _rel(root, folder),
                    user,
                    agent,
                    "markdown",
                    memory,
                    merged,
                    wide,
                    user_wide=bool(wide),
                )
            )
    return FolderRead(root, tuple(pieces), tuple(skipped), tuple(errors))


def _join_reports(folder: Path, root: Path, reports: list[RepairReport]) -> RepairReport:
    """One report for a folder of Markdown facts: each repair's field names its file (relative
    to the folder) and, after a dot, the key."""
    where = _rel(root, folder)
    prefix = where + "/"

    def field_of(report: RepairReport, repair: Repair) -> str:
        key = repair.field.removeprefix("facts[0]").lstrip(".")
        name = report.where.removeprefix(prefix)
        return f"{name}.{key}" if key else name

    repairs = tuple(
        Repair(field_of(r, x), x.action, x.reason, x.fact_id, x.invalid)
        for r in reports
        for x in r.repairs
    )
    return RepairReport(
        where,
        repairs,
        sum(r.facts_read for r in reports),
        sum(r.facts_kept for r in reports),
        tuple(d for r in reports for d in r.dropped_items),
    )


def _with_summaries(memory: Memory, source: Memory) -> Memory:
    return memory.model_copy(
        update={"user": source.user, "history": source.history, "lastUpdated": source.lastUpdated}
    )
