"""Writing one user's memory in DeerFlow HEAD's v2 layout: ``deermem export --layout v2``.

HEAD keeps a user's memory as a summary manifest (``users/<uid>/memory.json``) and one Markdown
file per fact (``users/<uid>/agents/<agent>/facts/<xx>/<id>.md``); :func:`write_v2` writes exactly
what its storage reads, so an export can be dropped into a DeerFlow data folder. It is apart
from :mod:`~deermem_middleware.formats.deerflow_layout`, which reads those folders, because it is
the only code that writes into one, and it is careful about it: it refuses a user id or agent name
DeerFlow would refuse, never overwrites memory that is there, renames a fact id DeerFlow could
not use as a file name (and says so), and writes each file whole (a temporary file, then a
rename). DeerFlow keeps one set of summaries per user, so the newest of each is written once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from deermem_middleware.formats.deerflow import (
    fact_shard,
    fact_to_markdown,
    last_updated,
    safe_fact_id,
    v2_manifest,
)
from deermem_middleware.formats.deerflow_layout import DEFAULT_AGENT, MEMORY_FILE
from deermem_middleware.formats.repair import derived_fact_id
from deermem_middleware.memory.document import SECTION_FIELDS, USER_FIELDS, Memory, Section

__all__ = ["V2Written", "valid_v2_name", "write_v2"]

_USER_ID: Final = re.compile(r"[A-Za-z0-9_-]+")
_AGENT_NAME: Final = re.compile(r"[A-Za-z0-9-]+")


def valid_v2_name(name: str, *, agent: bool) -> bool:
    """Whether DeerFlow HEAD takes ``name`` as a user id (letters, digits, ``_``, ``-``) or an
    agent name (letters, digits, ``-``; or the default bucket)."""
    if agent:
        return name == DEFAULT_AGENT or bool(_AGENT_NAME.fullmatch(name))
    return bool(_USER_ID.fullmatch(name))


@dataclass
class V2Written:
    """What :func:`write_v2` wrote."""

    manifest: Path
    facts: dict[str, int] = field(default_factory=dict)
    """Fact files written per agent."""
    skipped: list[str] = field(default_factory=list)
    """Why facts were not written (inactive, blank), one phrase each."""
    renamed: dict[str, str] = field(default_factory=dict)
    """Fact ids DeerFlow would refuse as file names, and the ids written instead."""


def _newest_summaries(documents: Mapping[str, Memory]) -> Memory:
    """Per summary field, the newest non-empty one among the documents (the default agent's
    first on a tie): DeerFlow keeps one set of summaries per user."""
    order = sorted(documents, key=lambda a: (a != DEFAULT_AGENT, a))
    result = Memory()
    for name in SECTION_FIELDS:
        best = Section()
        for agent in order:
            section = documents[agent].section(name)
            if best.replaced_by(section):
                best = section
        if best.summary:
            group = "user" if name in USER_FIELDS else "history"
            holder = getattr(result, group).model_copy(update={name: best})
            result = result.model_copy(update={group: holder})
    groups: tuple[Literal["user", "history"], ...] = ("user", "history")
    for group in groups:
        unknown: dict[str, tuple[str, Any]] = {}
        for agent in order:  # the sections we do not model: the newest of each, as read
            for name, value in documents[agent].unknown_sections(group).items():
                stamp = value.get("updatedAt") if isinstance(value, dict) else None
                stamp = stamp if isinstance(stamp, str) else ""
                if name not in unknown or stamp > unknown[name][0]:
                    unknown[name] = (stamp, value)
        if unknown:
            holder = getattr(result, group).model_copy(
                update={name: value for name, (_, value) in unknown.items()}
            )
            result = result.model_copy(update={group: holder})
    stamps = [last_updated(m) for m in documents.values()]
    return result.model_copy(update={"lastUpdated": max(stamps) if stamps else ""})


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def write_v2(root: Path, user_id: str, documents: Mapping[str, Memory]) -> V2Written:
    """Write one user's documents (agent name -> memory) under ``root`` in HEAD's v2 layout,
    exactly as its storage reads it: ``users/<uid>/memory.json`` (summary manifest) and
    ``users/<uid>/agents/<agent>/facts/<xx>/<id>.md`` per active fact.

    Raises :class:`ValueError` for a user id or agent name DeerFlow would refuse and
    :class:`FileExistsError` when ``root`` already holds that user's DeerFlow memory (it is never
    overwritten).
    """
    if not valid_v2_name(user_id, agent=False):
        raise ValueError(
            f"user id {user_id!r}: DeerFlow's storage takes only letters, digits, '_' and '-'"
        )
    for agent in documents:
        if not valid_v2_name(agent, agent=True):
            raise ValueError(
                f"agent name {agent!r}: DeerFlow takes only letters, digits and '-' "
                f"(or {DEFAULT_AGENT})"
            )
    user_dir = root / "users" / user_id
    manifest = user_dir / MEMORY_FILE
    taken = [manifest, *(user_dir / "agents" / a.lower() / "facts" for a in documents)]
    for path in taken:
        if path.exists():
            raise FileExistsError(f"{path} already exists: DeerFlow memory is never overwritten")
    written = V2Written(manifest)
    for agent, memory in sorted(documents.items()):
        ids: set[str] = set()
        count = 0
        for fact in memory.facts:
            if fact.status != "active":
                written.skipped.append(f"{fact.id} ({fact.status})")
                continue
            if not fact.content.strip():
                written.skipped.append(f"{fact.id} (blank)")
                continue
            safe = safe_fact_id(fact.id)
            if safe in ids:
                safe = derived_fact_id(agent, fact.id, fact.content)
            if safe != fact.id:
                written.renamed[fact.id] = safe
                fact = fact.model_copy(update={"id": safe})
            ids.add(safe)
            folder = user_dir / "agents" / agent.lower() / "facts" / fact_shard(safe)
            _write(folder / f"{safe}.md", fact_to_markdown(fact, user_id=user_id, agent_name=agent))
            count += 1
        written.facts[agent] = count
    summary = _newest_summaries(documents)
    _write(manifest, json.dumps(v2_manifest(summary), ensure_ascii=False, indent=2) + "\n")
    return written
