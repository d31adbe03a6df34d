"""DeerFlow's memory formats, both ways (pure: no I/O, clock passed in).

- v1.0 ``memory.json`` (DeerFlow v2.0.0 and every older release, and what HEAD's gateway API
  still returns): one document, ``facts`` a list of ``{id, content, category, confidence,
  createdAt, source}``. :func:`to_deerflow` writes it, :func:`from_deerflow` reads it.
- v2.0 (DeerFlow HEAD's storage): a summary-only ``memory.json`` per user (``"version": "2.0"``,
  a ``revision``, no ``facts``) plus one Markdown file per fact under
  ``agents/<agent>/facts/<xx>/<id>.md`` (YAML front matter, ``# title``, body), ``<xx>`` the first
  two hex digits of the id's SHA-256. :func:`v2_manifest`, :func:`fact_to_markdown` and
  :func:`fact_from_markdown` write and read those shapes;
  :mod:`deermem_middleware.formats.deerflow_layout` puts them on disk.

Reading is lenient, one fact at a time, the way DeerFlow's own loaders are lenient: a fact
without an id gets one, a ``null`` confidence the default, a structured ``source`` its v1 string,
``category: other`` with a ``categoryExtension`` its original category back, ``source: manual``
(added by a person) our ``manual`` flag; a fact that cannot be
read is dropped on its own, never the whole document. The :class:`RepairReport` says what was
changed or dropped, field by field.

Writing never puts ``null`` where DeerFlow expects a string: DeerFlow v2.0.0's API types
``source`` as ``str`` (``null`` is rejected), HEAD's loader requires ``createdAt``/``updatedAt``
to be strings when present and ``status`` to be ``active``.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import yaml

from deermem_middleware.formats.repair import (
    Repair,
    RepairReport,
    derived_fact_id,
    legacy_source,
    repair_document,
    structured_source,
)
from deermem_middleware.memory.document import (
    HISTORY_FIELDS,
    USER_FIELDS,
    DocumentFormatError,
    Fact,
    Memory,
    utc_now_iso,
)

__all__ = [
    "DEERFLOW_CORE_CATEGORIES",
    "DEERFLOW_FACT_KEYS",
    "V2_VERSION",
    "Repair",
    "RepairReport",
    "deerflow_fact",
    "deerflow_source",
    "fact_from_markdown",
    "fact_shard",
    "fact_to_markdown",
    "from_deerflow",
    "is_v2_manifest",
    "last_updated",
    "safe_fact_id",
    "to_deerflow",
    "v2_fact_record",
    "v2_manifest",
]

V2_VERSION: Final = "2.0"
"""The ``version`` of DeerFlow HEAD's summary-only ``memory.json``."""

DEERFLOW_FACT_KEYS: Final = ("id", "content", "category", "confidence", "createdAt", "source")
"""The keys of a v1.0 fact, in DeerFlow's order."""

DEERFLOW_CORE_CATEGORIES: Final = frozenset(
    {
        "preference",
        "correction",
        "context",
        "goal",
        "behavior",
        "identity",
        "constraint",
        "decision",
        "other",
    }
)
"""Categories HEAD's storage keeps as they are; any other becomes ``other`` plus a
``categoryExtension`` naming it."""

OUR_FACT_KEYS: Final = frozenset(Fact.model_fields)
"""Keys our :class:`Fact` models by name (everything else on a fact is an unknown key, kept)."""

V2_DERIVED_KEYS: Final = frozenset({"schemaVersion", "scope", "title", "revision", "status"})
"""Front-matter keys HEAD's storage derives on every write (dropped on read, written again; a
``title`` other than the content's first line is kept)."""

_V2_LIST_KEYS: Final = ("topics", "consolidatedFrom")
MANUAL_SOURCE: Final = "manual"
"""DeerFlow's ``source`` of a fact a person added (its settings page, its API)."""
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]+")


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def is_v2_manifest(data: Mapping[str, Any]) -> bool:
    """HEAD's summary-only ``memory.json``: version 2.0 and no ``facts`` (facts live in
    Markdown files beside it)."""
    return data.get("version") == V2_VERSION and "facts" not in data


def _fact_from_deerflow(raw: Any) -> Any:
    """One DeerFlow fact (v1 dict, v2 record from Markdown or from the API) in our shape."""
    if not isinstance(raw, Mapping):
        return raw
    fact = dict(raw)
    extension = fact.get("categoryExtension")
    if fact.get("category") == "other" and isinstance(extension, str) and extension.strip():
        fact["category"] = extension  # HEAD moved a non-core category there
        del fact["categoryExtension"]
    title, content = fact.get("title"), fact.get("content")
    derived = isinstance(content, str) and title in ("", _title(content))
    if isinstance(title, str) and (derived or not title.strip()):
        del fact["title"]  # derived from the content: written again from it
    for key in V2_DERIVED_KEYS - {"status", "title"}:
        fact.pop(key, None)
    if fact.get("status") == "active":
        fact.pop("status")
    for key in _V2_LIST_KEYS:
        if fact.get(key) == []:
            del fact[key]
    source = fact.get("source")
    if isinstance(source, Mapping) and source == structured_source(legacy_source(source)):
        source = fact["source"] = legacy_source(source)
    if source == MANUAL_SOURCE:  # added by a person in DeerFlow's UI: ours is the manual flag
        del fact["source"]
        fact.setdefault("manual", True)
    return fact


def from_deerflow(
    data: Mapping[str, Any], *, where: str = "memory.json", now: str | None = None
) -> tuple[Memory, RepairReport]:
    """A DeerFlow memory document (v1.0 ``memory.json``, HEAD's v2.0 summary manifest, or the
    gateway's ``MemoryResponse``) as our :class:`Memory`, repaired one fact at a time.

    ``facts`` may be a list, a map of id to fact record, or (older HEAD manifests) a map of id to
    ``{"path": ...}`` Markdown references — those are dropped here with a reason, as this function
    reads no files:
    :func:`deermem_middleware.formats.deerflow_layout.resolve_fact_references` reads them first.
    Unknown keys, on facts and at the top level, are kept. DeerFlow's own ``revision``
    (its write counter) is not ours and is left out. ``now`` fills a missing ``createdAt``.

    Raises :class:`~deermem_middleware.memory.document.DocumentFormatError` only when ``data`` is
    not an object.
    """
    if not isinstance(data, Mapping):
        raise DocumentFormatError(
            f"the top level is a JSON {type(data).__name__}, expected an object"
        )
    document = dict(data)
    if document.get("version") == V2_VERSION:
        document["version"] = "1.0"  # ours is the v1 superset; the facts come in below
    facts = document.get("facts")
    if isinstance(facts, list | tuple):
        document["facts"] = [_fact_from_deerflow(f) for f in facts]
    elif isinstance(facts, Mapping):
        document["facts"] = {k: _fact_from_deerflow(f) for k, f in facts.items()}
    return repair_document(document, where=where, now=now)


def fact_from_markdown(text: str, *, where: str = "fact.md") -> dict[str, Any]:
    """A fact Markdown file as HEAD's ``_parse_fact_markdown`` reads it: front matter (YAML
    mapping) between ``---`` lines, an optional ``# title`` line, the body as ``content``; the
    front matter's ``user_id``/``agent_name`` become ``scope``.

    Raises :class:`DocumentFormatError` (naming ``where``) when the file is not in that shape.
    """
    if not text.startswith("---\n"):
        raise DocumentFormatError(f"{where}: missing YAML front matter")
    try:
        front, body = text[4:].split("\n---\n", 1)
    except ValueError:
        raise DocumentFormatError(f"{where}: the front matter is not closed by '---'") from None
    try:
        metadata = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0]
        raise DocumentFormatError(f"{where}: invalid YAML front matter: {reason}") from None
    if not isinstance(metadata, dict):
        raise DocumentFormatError(f"{where}: the front matter is not a mapping")
    lines = body.lstrip("\n").splitlines()
    title = ""
    if lines and lines[0].startswith("# "):
        title = lines.pop(0)[2:].strip()
        if lines and not lines[0].strip():
            lines.pop(0)
    metadata = {str(k): _plain(v) for k, v in metadata.items()}
    metadata["title"] = title
    metadata["content"] = "\n".join(lines).rstrip("\n")
    metadata["scope"] = {
        "userId": metadata.pop("user_id", None),
        "agentName": metadata.pop("agent_name", None),
    }
    return metadata


def _plain(value: Any) -> Any:
    """YAML values as JSON would hold them (YAML reads unquoted timestamps as datetimes)."""
    import datetime as dt

    if isinstance(value, dt.datetime):
        return utc_now_iso(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Writing v1.0
# --------------------------------------------------------------------------------------------


def last_updated(memory: Memory) -> str:
    """``memory.lastUpdated``, or when empty the newest time the document knows of (a summary's
    or a fact's), or now: DeerFlow writes a time there, never ``""``."""
    if memory.lastUpdated:
        return memory.lastUpdated
    times = [memory.section(n).updatedAt for n in (*USER_FIELDS, *HISTORY_FIELDS)]
    times += [t for f in memory.facts for t in (f.createdAt, f.updatedAt or "")]
    known = [t for t in times if t]
    return max(known) if known else utc_now_iso()


def deerflow_source(fact: Fact) -> str:
    """A fact's ``source`` as DeerFlow writes it: the thread, ``manual`` or ``unknown``."""
    if fact.source:
        return fact.source
    return MANUAL_SOURCE if fact.manual else "unknown"


def deerflow_fact(fact: Fact, *, include_status: bool = False) -> dict[str, Any]:
    """One fact as a v1.0 fact: DeerFlow's keys (never ``null``: ``source`` is the thread id,
    ``manual`` or ``unknown``), ``updatedAt`` when known, and every unknown key we kept.
    ``include_status`` adds ``status`` for a fact that is not active."""
    out: dict[str, Any] = {
        "id": fact.id,
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "createdAt": fact.createdAt,
        "source": deerflow_source(fact),
    }
    if fact.updatedAt:
        out["updatedAt"] = fact.updatedAt
    if include_status and fact.status != "active":
        out["status"] = fact.status
    for key, value in (fact.model_extra or {}).items():
        if key not in out and key != "sourceDetail":
            out[key] = copy.deepcopy(value)
    return out


def _sections(memory: Memory, group: Literal["user", "history"]) -> dict[str, Any]:
    """One group's sections as DeerFlow writes them: ours (``summary``, ``updatedAt``), then
    every section we do not model, as it was read (a newer DeerFlow's ``user.cognitiveStyle``
    goes back to it unchanged)."""
    names = USER_FIELDS if group == "user" else HISTORY_FIELDS
    out: dict[str, Any] = {
        n: {"summary": memory.section(n).summary, "updatedAt": memory.section(n).updatedAt}
        for n in names
    }
    for name, value in memory.unknown_sections(group).items():
        out.setdefault(name, copy.deepcopy(value))
    return out


def to_deerflow(memory: Memory, *, include_inactive: bool = False) -> dict[str, Any]:
    """``memory`` as DeerFlow's v1.0 ``memory.json`` (what HEAD's gateway ``MemoryResponse`` and
    DeerFlow v2.0.0 accept): its keys only, no ``null`` where it expects a string, active facts
    only unless ``include_inactive`` (then non-active facts carry their ``status``; HEAD's
    loader refuses those, so keep it for display)."""
    return {
        "version": "1.0",
        "lastUpdated": last_updated(memory),
        "user": _sections(memory, "user"),
        "history": _sections(memory, "history"),
        "facts": [
            deerflow_fact(f, include_status=include_inactive)
            for f in memory.facts
            if include_inactive or f.status == "active"
        ],
    }


# --------------------------------------------------------------------------------------------
# Writing v2.0 (HEAD's storage)
# --------------------------------------------------------------------------------------------


def v2_manifest(memory: Memory, *, revision: int = 1) -> dict[str, Any]:
    """The summary-only ``memory.json`` of one DeerFlow user (HEAD): ``version`` 2.0, the
    ``revision`` DeerFlow's writers compare against, ``lastUpdated``, the six summaries."""
    return {
        "version": V2_VERSION,
        "revision": revision,
        "lastUpdated": last_updated(memory),
        "user": _sections(memory, "user"),
        "history": _sections(memory, "history"),
    }


def safe_fact_id(fact_id: str) -> str:
    """``fact_id`` when HEAD's storage accepts it (letters, digits, ``_``, ``-``: it is a file
    name), else a stable id derived from it."""
    return fact_id if _SAFE_ID.fullmatch(fact_id) else derived_fact_id(fact_id)


def fact_shard(fact_id: str) -> str:
    """The two-hex-digit folder HEAD files a fact under: its id's SHA-256, first byte."""
    return hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:2]


def _title(content: str) -> str:
    first = content.splitlines()[0].strip() if content.strip() else ""
    return (first or "Memory fact")[:160]


def v2_fact_record(fact: Fact, *, user_id: str, agent_name: str) -> dict[str, Any]:
    """One fact as HEAD's storage holds it after ``_normalize_fact`` (front-matter keys, plus
    ``content``): structured ``source``, ``other`` + ``categoryExtension`` for a category
    outside its core set, ``status`` active, ``schemaVersion`` 2, ``revision`` 1,
    ``updatedAt`` and ``createdAt`` strings, unknown keys kept."""
    record: dict[str, Any] = {
        "id": safe_fact_id(fact.id),
        "category": fact.category,
        "confidence": float(fact.confidence),
        "createdAt": fact.createdAt or fact.updatedAt or "",
    }
    detail = (fact.model_extra or {}).get("sourceDetail")
    source = deerflow_source(fact)
    if isinstance(detail, Mapping) and legacy_source(detail) == source:
        record["source"] = dict(detail)
    else:
        record["source"] = structured_source(source)
    extras = {
        k: copy.deepcopy(v)
        for k, v in (fact.model_extra or {}).items()
        if k not in record and k not in V2_DERIVED_KEYS and k != "sourceDetail"
    }
    record.update(extras)
    record["schemaVersion"] = 2
    if fact.category not in DEERFLOW_CORE_CATEGORIES:
        record.setdefault("categoryExtension", fact.category)
        record["category"] = "other"
    record["status"] = "active"
    for key in _V2_LIST_KEYS:
        value = record.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            record[key] = []
    record["updatedAt"] = fact.updatedAt or record["createdAt"]
    if record["consolidatedFrom"]:
        record.setdefault("consolidatedAt", record["updatedAt"])
    record["revision"] = 1
    record["user_id"] = user_id
    record["agent_name"] = agent_name
    record["content"] = fact.content.strip()
    return record


def fact_to_markdown(fact: Fact, *, user_id: str, agent_name: str) -> str:
    """One fact as the Markdown file HEAD's storage writes and reads: YAML front matter (every
    key but ``content``), ``# title`` (the first line), the content."""
    record = v2_fact_record(fact, user_id=user_id, agent_name=agent_name)
    content = record.pop("content")
    title = (fact.model_extra or {}).get("title")
    heading = title.replace("\n", " ")[:160] if isinstance(title, str) and title.strip() else ""
    front = yaml.safe_dump(record, allow_unicode=True, sort_keys=False).strip()
    return f"---\n{front}\n---\n\n# {heading or _title(content)}\n\n{content.rstrip()}\n"
