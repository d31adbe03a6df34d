"""Reading a memory document leniently, one fact at a time: DeerFlow's files and our older ones
repaired, or dropped fact by fact, never refused whole (pure).

DeerFlow's loaders accept documents a strict model refuses — a fact without an id, a ``null``
confidence, facts as a map of id to record, HEAD's structured ``source`` — and files in the wild
hold worse (a confidence of ``"lots"``, a duplicate id, a fact that is not an object). Refusing a
document for one bad fact would lose the rest of someone's memory, so :func:`repair_document`
repairs what it can, drops what it cannot on its own, and names the fact, the field and the reason
in a :class:`RepairReport`. A stored document keeps what was dropped under
:data:`DROPPED_FACTS_KEY`, so saving the repaired one loses nothing; an id given to a fact that
had none, or none usable, is derived from its text (:func:`derived_fact_id`), so every read gives
the same one: the rule for ids is :mod:`~deermem_middleware.formats.fact_ids`.

The caps that come after (lengths, ``max_facts``) are
:mod:`~deermem_middleware.formats.interchange`'s, which re-exports these names from where they were
first defined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import ValidationError

from deermem_middleware.formats.fact_ids import check_fact_id, derived_fact_id, id_problem
from deermem_middleware.memory.document import (
    HISTORY_FIELDS,
    USER_FIELDS,
    DocumentFormatError,
    Fact,
    Memory,
    Watermark,
    coerce_confidence,
    is_invisible,
)
from deermem_middleware.memory.facts import normalize_fact_text

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DROPPED_FACTS_KEY",
    "RESERVED_TOP_LEVEL",
    "Repair",
    "RepairReport",
    "derived_fact_id",
    "legacy_source",
    "repair_document",
    "structured_source",
]

DROPPED_FACTS_KEY: Final = "droppedFacts"
"""Top-level key where a stored document keeps the facts a lenient load could not repair (the
raw item, its index and why), so saving the repaired document loses nothing that was stored."""

DEFAULT_CONFIDENCE: Final = 0.5
"""What a fact without a usable confidence gets (DeerFlow's own default)."""

RESERVED_TOP_LEVEL: Final = frozenset({"revision", "scope"})
"""Storage bookkeeping: the storage owns these keys; a document read from elsewhere never
brings them in (DeerFlow's ``revision`` counts its own writes, not ours)."""

_OPTIONAL_STRINGS: Final = (
    "updatedAt",
    "lastConfirmedAt",
    "lastInjectedAt",
    "supersededBy",
    "eventAt",
)

_STATUSES: Final = frozenset({"active", "superseded", "archived"})
_SOURCE_TYPES: Final = frozenset({"manual", "consolidation", "import", "unknown"})


@dataclass(frozen=True)
class Repair:
    """One thing a lenient read changed. ``field`` is the path in the document
    (``facts[3].confidence``); ``action`` is ``"repaired"`` (kept, changed) or ``"dropped"``;
    ``reason`` says what was wrong and what was done. ``invalid`` is False for what DeerFlow's
    own loaders accept and normalise the same way (no id, a ``null``, a structured source), True
    for a value neither accepts (a confidence of ``"lots"``, a duplicate id)."""

    field: str
    action: Literal["repaired", "dropped"]
    reason: str
    fact_id: str | None = None
    invalid: bool = False
    rule: str = ""
    """``"id"`` for what the fact id rule did
    (:func:`~deermem_middleware.formats.fact_ids.check_fact_id`), counted apart in receipts."""

    def line(self, where: str) -> str:
        return f"{where}: {self.field}: {self.reason}"


@dataclass(frozen=True)
class RepairReport:
    """What a lenient read (:func:`repair_document`,
    :func:`deermem_middleware.formats.deerflow.from_deerflow`) changed in one document, named by
    ``where`` (a file, a database key). Empty ``repairs``: read as it was."""

    where: str
    repairs: tuple[Repair, ...] = ()
    facts_read: int = 0
    """Items in the document's ``facts`` (list items or map entries)."""
    facts_kept: int = 0
    dropped_items: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    """The dropped facts as read: ``{"index", "reason", "fact"}`` each."""

    @property
    def repaired(self) -> tuple[Repair, ...]:
        return tuple(r for r in self.repairs if r.action == "repaired")

    @property
    def dropped(self) -> tuple[Repair, ...]:
        return tuple(r for r in self.repairs if r.action == "dropped")

    @property
    def invalid(self) -> tuple[Repair, ...]:
        return tuple(r for r in self.repairs if r.invalid)

    @property
    def facts_repaired(self) -> int:
        """Facts kept with at least one change."""
        fields = {r.field.split(".")[0] for r in self.repaired if r.field.startswith("facts[")}
        return len(fields)

    @property
    def ids_repaired(self) -> int:
        """Facts kept under a new id (:mod:`~deermem_middleware.formats.fact_ids`)."""
        return sum(1 for r in self.repaired if r.rule == "id")

    @property
    def facts_dropped(self) -> int:
        return len(self.dropped_items)

    @property
    def changed(self) -> bool:
        return bool(self.repairs)

    def lines(self) -> list[str]:
        """One line per repair, each naming the document and the field."""
        return [r.line(self.where) for r in self.repairs]


def legacy_source(value: Mapping[str, Any]) -> str:
    """DeerFlow HEAD's structured ``source`` (``{type, threadId}``) as the v1 string, by its
    gateway's rule: a conversation's thread id, else the type, else the thread id, else
    ``"unknown"``."""
    kind, thread = value.get("type"), value.get("threadId")
    if kind == "conversation" and isinstance(thread, str) and thread:
        return thread
    if isinstance(kind, str) and kind:
        return kind
    return thread if isinstance(thread, str) and thread else "unknown"


def structured_source(source: str) -> dict[str, Any]:
    """The v1 string as HEAD's structured ``source``, by its loader's rule."""
    if source in _SOURCE_TYPES:
        return {"type": source, "threadId": None}
    return {"type": "conversation", "threadId": source}


def _shown(value: Any) -> str:
    return "null" if value is None else repr(value)


class _FactReader:
    """Reads fact items one at a time (see :func:`repair_document`)."""

    def __init__(self, now: str | None) -> None:
        self.now = now
        self.repairs: list[Repair] = []
        self.dropped: list[dict[str, Any]] = []
        self.ids: dict[str, tuple[str, str]] = {}
        self.renamed: dict[str, tuple[str, str]] = {}
        """A string id repaired to a new one (spaces around it, too long, control characters):
        the id as written → (the new id, the fact's place), so a ``supersededBy`` naming the
        old one follows it."""

    def fix(self, path: str, reason: str, fact_id: str | None, *, invalid: bool = False) -> None:
        self.repairs.append(Repair(path, "repaired", reason, fact_id, invalid))

    def drop(
        self, index: int, label: str, reason: str, raw: Any, *, invalid: bool = True, rule: str = ""
    ) -> None:
        fact_id = raw.get("id") if isinstance(raw, Mapping) else None
        fact_id = fact_id if isinstance(fact_id, str) else None
        repair = Repair(label, "dropped", f"{reason}; dropped", fact_id, invalid, rule)
        self.repairs.append(repair)
        self.dropped.append({"index": index, "reason": reason, "fact": raw})

    def read(self, index: int, label: str, raw: Any) -> Fact | None:
        if not isinstance(raw, Mapping):
            self.drop(index, label, f"not an object ({type(raw).__name__})", raw)
            return None
        if "content" not in raw and isinstance(raw.get("path"), str):
            reason = (
                f"a reference to the Markdown file {raw['path']!r}, not read here (import the "
                "DeerFlow folder to read it)"
            )
            self.drop(index, label, reason, raw)
            return None
        record = dict(raw)
        content = record.get("content")
        if not isinstance(content, str):
            what = "no content" if content is None else f"content is a {type(content).__name__}"
            self.drop(index, label, what, raw)
            return None
        if is_invisible(content):
            self.drop(index, label, "blank content", raw)
            return None
        key = normalize_fact_text(content)
        verdict = check_fact_id(
            record.get("id"), content_key=key, content=content, earlier=self.ids
        )
        fact_id = record["id"] = verdict.fact_id
        if verdict.action == "dropped":
            self.drop(index, label, verdict.reason, raw, invalid=False, rule="id")
            return None
        if verdict.action == "repaired":
            self.repairs.append(
                Repair(f"{label}.id", "repaired", verdict.reason, fact_id, rule="id")
            )
            raw_id = raw.get("id")
            if isinstance(raw_id, str) and raw_id.strip() and id_problem(raw_id) is not None:
                self.renamed.setdefault(raw_id, (fact_id, label))
        self._fix_fields(label, record, fact_id)
        for _ in range(len(record) + 1):
            try:
                fact = Fact.model_validate(record)
            except ValidationError as exc:
                error = exc.errors()[0]
                name = error["loc"][0] if error["loc"] else None
                if not isinstance(name, str) or name in ("id", "content") or name not in record:
                    self.drop(index, label, str(error["msg"]), raw)
                    return None
                del record[name]  # back to its default
                reason = f"{error['msg']}; reset to the default"
                self.fix(f"{label}.{name}", reason, fact_id, invalid=True)
                continue
            self.ids[fact_id] = (label, key)
            return fact
        self.drop(index, label, "cannot be read", raw)  # pragma: no cover - defensive
        return None

    def _fix_fields(self, label: str, record: dict[str, Any], fact_id: str) -> None:
        def fix(name: str, reason: str, *, invalid: bool = True) -> None:
            self.fix(f"{label}.{name}", reason, fact_id, invalid=invalid)

        if "confidence" in record:
            value = record["confidence"]
            try:
                number = coerce_confidence(value)
            except ValueError as exc:
                record["confidence"] = DEFAULT_CONFIDENCE
                detail = "" if value is None else f" ({exc})"
                reason = f"{_shown(value)} is not a confidence{detail}; set to {DEFAULT_CONFIDENCE}"
                fix("confidence", reason, invalid=value is not None)
            else:
                record["confidence"] = number
        category = record.get("category", "context")
        if not isinstance(category, str) or not category.strip():
            record["category"] = "context"
            reason = f"{_shown(category)} is not a category; set to 'context'"
            fix("category", reason, invalid=not (category is None or category == ""))
        created = record.get("createdAt")
        if not isinstance(created, str):  # missing or null: learnt now, as DeerFlow's loader says
            record["createdAt"] = self.now or ""
            if created is not None:
                fix("createdAt", f"{created!r} is not a time; set to {record['createdAt']!r}")
        source = record.get("source")
        if isinstance(source, Mapping):  # DeerFlow HEAD's {type, threadId}
            record["source"] = legacy_source(source)
            if structured_source(record["source"]) != dict(source):
                record.setdefault("sourceDetail", dict(source))
        elif source is not None and not isinstance(source, str):
            record["source"] = None
            fix("source", f"{source!r} is not a source; removed")
        for name in (*_OPTIONAL_STRINGS, "validUntil"):
            value = record.get(name)
            if value is not None and not isinstance(value, str):
                record[name] = None
                fix(name, f"{value!r} is not a string; removed")
        for name in ("confirmations", "injections", "used"):
            value = record.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                record[name] = 0
                fix(name, f"{_shown(value)} is not a count; set to 0", invalid=value is not None)
        status = record.get("status", "active")
        if status not in _STATUSES:
            record["status"] = "active" if status is None else "archived"
            reason = f"unknown status {_shown(status)}; set to {record['status']!r}"
            fix("status", reason, invalid=status is not None)
        if not isinstance(record.get("manual", False), bool):
            fix("manual", f"{record['manual']!r} is not true/false; set to false")
            record["manual"] = False


def _section(value: Any, path: str, fix: Callable[..., None]) -> dict[str, Any] | None:
    if isinstance(value, str):
        fix(path, "a plain string; read as the summary", invalid=True)
        return {"summary": value, "updatedAt": ""}
    if not isinstance(value, Mapping):
        if value is not None:
            fix(path, f"not an object ({type(value).__name__}); reset to empty", invalid=True)
        return None
    section = dict(value)
    for name in ("summary", "updatedAt"):
        item = section.get(name, "")
        if not isinstance(item, str):
            section[name] = "" if item is None else str(item)
            fix(
                f"{path}.{name}",
                f"{_shown(item)}; set to {section[name]!r}",
                invalid=item is not None,
            )
    return section


def _fact_items(raw: Any, fix: Callable[..., None]) -> list[tuple[str, Any]]:
    """``facts`` as (label, item) pairs: a list, or a map of id to record (or to a Markdown
    reference ``{"path": ...}``, kept as is for the reader to drop)."""
    if isinstance(raw, list | tuple):
        return [(f"facts[{i}]", item) for i, item in enumerate(raw)]
    items: list[tuple[str, Any]] = []
    for key, entry in raw.items():
        label = f"facts[{str(key)!r}]"
        if isinstance(entry, Mapping) and "content" in entry:
            entry = dict(entry)
            if entry.get("id") in (None, ""):
                entry["id"] = str(key)
            elif entry["id"] != key:
                fix(label, f"the map key differs from the fact's id {entry['id']!r}; id kept")
        items.append((label, entry))
    return items


def _follow_renamed(label: str, fact: Fact, reader: _FactReader) -> Fact:
    """``fact`` with its ``supersededBy`` pointing at the new id of a fact whose id was
    repaired, and the change in the receipt (a duplicate id is not followed: the reference
    names the first fact, kept as written)."""
    target = fact.supersededBy
    if target is None or target not in reader.renamed or target in reader.ids:
        return fact
    new_id, place = reader.renamed[target]
    reason = f"pointed at the repaired id {target!r} ({place}); now {new_id}"
    reader.fix(f"{label}.supersededBy", reason, fact.id)
    return fact.model_copy(update={"supersededBy": new_id})


def repair_document(
    data: Mapping[str, Any],
    *,
    where: str = "document",
    now: str | None = None,
    keep_dropped: bool = False,
) -> tuple[Memory, RepairReport]:
    """Read a memory document (ours or DeerFlow's v1.0) leniently, one fact at a time: what can
    be repaired is (no id: a stable derived one; a ``null`` confidence: the default; a ``null``
    category: ``context``; no ``createdAt``: ``now``; a structured ``source``: its string), what
    cannot (no content, not an object, a Markdown reference) is dropped on its own, never the
    whole document. Summaries and watermarks are repaired the same way. Lone surrogates in a
    fact's text are left to :func:`cap_document`, as for extracted text.

    ``facts`` may be a list or a map of id to record (an older DeerFlow form). ``keep_dropped``
    (stored documents): the dropped items are kept under :data:`DROPPED_FACTS_KEY`, so saving the
    repaired document loses nothing. Raises
    :class:`~deermem_middleware.memory.document.DocumentFormatError` only when ``data`` is not an
    object.
    """
    if not isinstance(data, Mapping):
        raise DocumentFormatError(
            f"the top level is a JSON {type(data).__name__}, expected an object"
        )
    document = {k: v for k, v in data.items() if k not in RESERVED_TOP_LEVEL}
    reader = _FactReader(now)
    top: list[Repair] = []

    def fix(path: str, reason: str, *, invalid: bool = False) -> None:
        top.append(Repair(path, "repaired", reason, None, invalid))

    if not isinstance(document.get("version", "1.0"), str):
        fix("version", f"{document['version']!r} is not a version; set to '1.0'", invalid=True)
        document["version"] = "1.0"
    last = document.get("lastUpdated", "")
    if not isinstance(last, str):
        document["lastUpdated"] = ""
        fix("lastUpdated", f"{_shown(last)} is not a time; set to ''", invalid=last is not None)
    for group, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS)):
        value = document.pop(group, None)
        if value is not None and not isinstance(value, Mapping):
            fix(group, f"not an object ({type(value).__name__}); reset to empty", invalid=True)
        elif value is not None:
            sections = {k: v for k, v in value.items() if k not in names}
            for name in names:
                section = _section(value.get(name), f"{group}.{name}", fix)
                if section is not None:
                    sections[name] = section
            document[group] = sections
    marks = document.pop("watermarks", None)
    if marks is not None and not isinstance(marks, Mapping):
        fix("watermarks", f"not an object ({type(marks).__name__}); removed", invalid=True)
    elif marks is not None:
        document["watermarks"] = kept = {}
        for thread, mark in marks.items():
            try:
                kept[str(thread)] = Watermark.model_validate(mark)
            except ValidationError as exc:
                fix(f"watermarks.{thread}", f"{exc.errors()[0]['msg']}; removed", invalid=True)
    raw_facts = document.pop("facts", None)
    items: list[tuple[str, Any]] = []
    if isinstance(raw_facts, list | tuple | Mapping):
        items = _fact_items(raw_facts, fix)
    elif raw_facts is not None:
        reader.drop(0, "facts", f"not a list ({type(raw_facts).__name__})", raw_facts)
    read = [(label, reader.read(i, label, item)) for i, (label, item) in enumerate(items)]
    facts = [_follow_renamed(label, fact, reader) for label, fact in read if fact is not None]
    document["facts"] = facts
    if keep_dropped and reader.dropped:
        earlier = document.get(DROPPED_FACTS_KEY)
        stash = list(earlier) if isinstance(earlier, list) else []
        stash.extend({**item, "at": now} if now else item for item in reader.dropped)
        document[DROPPED_FACTS_KEY] = stash
    try:
        memory = Memory.model_validate(document)
    except ValidationError as exc:  # pragma: no cover - every modelled field is repaired above
        first = exc.errors()[0]
        raise DocumentFormatError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    report = RepairReport(
        where=where,
        repairs=(*top, *reader.repairs),
        facts_read=len(items) or len(reader.dropped),
        facts_kept=len(facts),
        dropped_items=tuple(reader.dropped),
    )
    return memory, report
