"""``deermem export`` and ``import``: our document or DeerFlow's ``memory.json``, validated and
capped."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Memory
    from deermem_middleware.memory.interchange import CapReport

from deermem_middleware.cli.common import UsageError, _compare_and_set, _dump, _now, _opened, _who

__all__: list[str] = []  # private: the command is the interface


DEERFLOW_FACT_KEYS: Final = ("id", "content", "category", "confidence", "createdAt", "source")


LIFECYCLE_KEYS: Final = frozenset(
    {
        "sourceKind",
        "lastConfirmedAt",
        "confirmations",
        "lastInjectedAt",
        "injections",
        "status",
        "supersededBy",
        "manual",
        "updatedAt",
    }
)
"""Fact keys DeerFlow never writes: a file with any of them is one of ours."""


def _deerflow_document(memory: Memory) -> dict[str, Any]:
    """``memory`` in DeerFlow's ``memory.json`` shape: its keys only, active facts only."""
    from deermem_middleware.memory.document import HISTORY_FIELDS, USER_FIELDS

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {
            n: {"summary": memory.section(n).summary, "updatedAt": memory.section(n).updatedAt}
            for n in names
        }

    return {
        "version": memory.version,
        "lastUpdated": memory.lastUpdated,
        "user": group(USER_FIELDS),
        "history": group(HISTORY_FIELDS),
        "facts": [
            {key: getattr(f, key) for key in DEERFLOW_FACT_KEYS}
            for f in memory.facts
            if f.status == "active"
        ],
    }


def _export(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
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


def _detect_format(data: dict[str, Any]) -> str:
    if {"revision", "scope", "watermarks"} & data.keys():
        return "deermem"
    facts = data.get("facts")
    if isinstance(facts, list) and any(
        isinstance(f, dict) and LIFECYCLE_KEYS & f.keys() for f in facts
    ):
        return "deermem"
    return "deerflow"


def _field_path(location: Sequence[Any]) -> str:
    out = ""
    for part in location:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _read_memory_file(path: Path, fmt: str = "auto") -> tuple[Memory, str]:
    """Load and validate a memory document file; returns (memory, detected format).

    Raises :class:`UsageError` naming the file and the field for anything wrong with it.
    """
    from pydantic import ValidationError

    from deermem_middleware.memory.document import DocumentFormatError, Memory, parse_document_json

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
    revision = data.pop("revision", 0)
    data.pop("scope", None)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise UsageError(f"{path}: revision: must be a non-negative integer, got {revision!r}")
    facts = data.get("facts")
    if facts is not None and not isinstance(facts, list):
        raise UsageError(f"{path}: facts: must be a list, got {type(facts).__name__}")
    try:
        memory = Memory.from_json_dict(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more error(s))" if exc.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{path}: {_field_path(first['loc'])}: {message}{more}") from None
    from deermem_middleware.memory.interchange import invalid_text

    seen: dict[str, int] = {}
    for index, fact in enumerate(memory.facts):
        for name, value in fact.model_dump(exclude={"content", "category"}).items():
            if isinstance(value, str) and invalid_text(value):
                raise UsageError(
                    f"{path}: facts[{index}].{name}: not valid Unicode (a lone surrogate)"
                )
        if not fact.id.strip():
            raise UsageError(f"{path}: facts[{index}].id: must not be blank")
        if not fact.content.strip():
            raise UsageError(f"{path}: facts[{index}].content: must not be blank")
        if fact.id in seen:
            raise UsageError(
                f"{path}: facts[{index}].id: duplicate id {fact.id!r} (also facts[{seen[fact.id]}])"
            )
        seen[fact.id] = index
    return memory, detected


@dataclass
class _MergeReport:
    added: list[str] = field(default_factory=list)
    same_id: int = 0
    same_text: int = 0
    sections: list[str] = field(default_factory=list)


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


def _import(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.interchange import CapReport, cap_document

    path = Path(args.file)
    incoming, detected = _read_memory_file(path, args.format)
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
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

        before, _, revision = _compare_and_set(middleware.storage, scope, change)
        embeddings = middleware.selector.embeddings
        if args.replace and embeddings is not None:
            kept = {f.content for f in incoming.facts}
            embeddings.forget([f.content for f in before.facts if f.content not in kept])
        middleware.selector.forget(scope)
    if args.replace:
        print(
            f"replaced the memory of {_who(scope)} with {path} ({detected} format): "
            f"{len(report.added)} fact(s), was {len(before.facts)}; revision {revision}"
            + _capped_note(capped)
        )
        return 0
    print(
        f"merged {path} ({detected} format) into the memory of {_who(scope)} "
        f"(revision {revision}): {len(report.added)} fact(s) added, {report.same_id} with a "
        f"known id and {report.same_text} with known text skipped; "
        f"{len(report.sections)} summary(ies) taken"
        + (f" ({', '.join(report.sections)})" if report.sections else "")
        + _capped_note(capped)
    )
    return 0


def _capped_note(capped: CapReport) -> str:
    notes = capped.notes()
    return f"; capped as extracted memory is: {'; '.join(notes)}" if notes else ""
