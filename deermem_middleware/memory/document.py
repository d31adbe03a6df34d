"""The stored memory document, as pydantic models (the LLM's update is in
:mod:`deermem_middleware.memory.update`).

The stored document is a strict superset of DeerFlow's v1.0 ``memory.json``: every key DeerFlow
writes is modelled by name, and every key we do not know is kept (``extra="allow"``) so a file
written by DeerFlow, or by a newer version of this package, round-trips without losing anything.

The stored models are *frozen* and hold tuples: a loaded memory can be shared by caches and
readers without anyone mutating it behind their back (DeerFlow's cache corruption after a failed
save came from exactly that). The pure functions in ``sections``/``facts``/``apply`` return new
objects instead of mutating. Counters are clamped and confidences coerced when a document is read:
a hand-edited or hostile file never fails later on an out-of-range number.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
)

from deermem_middleware.memory.sections import HISTORY_FIELDS, SECTION_FIELDS, USER_FIELDS
from deermem_middleware.memory.values import (
    COUNT,
    MAX_COUNT,
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_SEEN_TURNS,
    coerce_confidence,
    entity_list,
    is_invisible,
)

__all__ = [
    "FACT_CATEGORIES",
    "HISTORY_FIELDS",
    "MAX_COUNT",
    "MAX_DATE_CHARS",
    "MAX_ENTITIES",
    "MAX_ENTITY_CHARS",
    "MAX_FACTS_PER_UPDATE",
    "MAX_FACT_CHARS",
    "MAX_REMOVALS_PER_UPDATE",
    "MAX_SEEN_TURNS",
    "MAX_SUMMARY_CHARS",
    "MAX_SUPERSEDES_PER_FACT",
    "SECTION_FIELDS",
    "USER_FIELDS",
    "CarriedOver",
    "DocumentFormatError",
    "Fact",
    "FactCategory",
    "History",
    "Memory",
    "Section",
    "SourceKind",
    "TrimCount",
    "UserContext",
    "Watermark",
    "coerce_confidence",
    "is_invisible",
    "new_fact_id",
    "parse_document_json",
    "utc_now_iso",
]


FactCategory = Literal["preference", "knowledge", "context", "behavior", "goal", "correction"]
FACT_CATEGORIES: Final[tuple[str, ...]] = (
    "preference",
    "knowledge",
    "context",
    "behavior",
    "goal",
    "correction",
)

MAX_SUMMARY_CHARS: Final = 800
MAX_FACT_CHARS: Final = 400
MAX_DATE_CHARS: Final = 32
"""A date as the model writes it ("2026-05-07", "May 2026", "2026-05-07T14:00:00Z")."""
MAX_FACTS_PER_UPDATE: Final = 20
MAX_REMOVALS_PER_UPDATE: Final = 20
MAX_FACT_ID_CHARS: Final = 80
MAX_SUPERSEDES_PER_FACT: Final = 5
"""Old facts one new fact may replace: a change of mind replaces one or two facts, and a cap keeps
a looping model from marking the whole memory as history with one item."""

SourceKind = Literal["stated", "inferred"]


class DocumentFormatError(ValueError):
    """A stored or imported document is not readable JSON; the message says why, in one line."""


def parse_document_json(raw: bytes | str) -> Any:
    """Decode a JSON document from a file or a database, turning *every* way it can fail into
    :class:`DocumentFormatError` with a one-line reason.

    ``json.loads`` raises more than ``JSONDecodeError``: a number of more than 4,300 digits is a
    ``ValueError`` (Python's int-string limit) and deep nesting a ``RecursionError``; either one
    used to escape as a traceback (and, in a stored document, to fail every update forever).
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise DocumentFormatError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentFormatError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise DocumentFormatError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # the int-string limit
        reason = str(exc).split(";")[0]
        raise DocumentFormatError(f"invalid JSON: a number is too long ({reason})") from None


def utc_now_iso(now: datetime | None = None) -> str:
    """ISO-8601 UTC timestamp with a ``Z`` suffix, the format DeerFlow writes."""
    moment = now if now is not None else datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_fact_id() -> str:
    """A fact id with 80 random bits (DeerFlow's 32-bit ids can collide in large stores)."""
    return "fact_" + secrets.token_hex(10)


# --------------------------------------------------------------------------------------------
# The stored document
# --------------------------------------------------------------------------------------------

_STORED = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class Section(BaseModel):
    """One summary field: free text plus when it was last rewritten."""

    model_config = _STORED

    summary: str = ""
    updatedAt: str = ""

    def replaced_by(self, other: Section) -> bool:
        """Whether ``other`` wins when two copies of one section meet (an import, a carry-over,
        an adoption, an export of several agents): it says something, and this one is empty
        or older (``updatedAt``)."""
        return bool(other.summary) and (not self.summary or other.updatedAt > self.updatedAt)


class UserContext(BaseModel):
    model_config = _STORED

    workContext: Section = Field(default_factory=Section)
    personalContext: Section = Field(default_factory=Section)
    topOfMind: Section = Field(default_factory=Section)


class History(BaseModel):
    model_config = _STORED

    recentMonths: Section = Field(default_factory=Section)
    earlierContext: Section = Field(default_factory=Section)
    longTermBackground: Section = Field(default_factory=Section)


_LIFECYCLE_DEFAULTS: dict[str, Any] = {
    "sourceKind": None,
    "lastConfirmedAt": None,
    "confirmations": 0,
    "lastInjectedAt": None,
    "injections": 0,
    "used": 0,
    "status": "active",
    "supersededBy": None,
    "manual": False,
    "eventAt": None,
    "validUntil": None,
    "entities": (),
}


_OMIT_WHEN_NONE: Final = ("source", "updatedAt")


class Fact(BaseModel):
    """A discrete thing we know about the user.

    ``source`` is the thread the fact was learnt in; ``updatedAt`` moves when it is reinforced.
    Stored confidences are coerced leniently (an old file with ``95`` still loads).
    """

    model_config = _STORED

    id: str
    content: str
    category: str = "context"
    confidence: float = 0.5
    createdAt: str = ""
    updatedAt: str | None = None
    source: str | None = None
    # -- lifecycle (all optional: a DeerFlow file without them loads as "active, never
    # confirmed again, never injected") -------------------------------------------------------
    sourceKind: SourceKind | None = None
    """Whether the user said it (``stated``) or the model inferred it."""
    lastConfirmedAt: str | None = None
    """When a later conversation last confirmed (reinforced) it; decay counts from here."""
    confirmations: Annotated[int, COUNT] = 0
    """How many times a later conversation confirmed it."""
    lastInjectedAt: str | None = None
    injections: Annotated[int, COUNT] = 0
    used: Annotated[int, COUNT] = 0
    """How many of the turns it was injected for had an answer that used it (estimated by
    overlap: :mod:`deermem_middleware.memory.usage`); ``used / injections`` is its hit rate."""
    status: Literal["active", "superseded", "archived"] = "active"
    """Only ``active`` facts are injected; the others stay for audit."""
    supersededBy: str | None = None
    """The id of the fact that replaced this one (status ``superseded``)."""
    manual: bool = False
    """Added or edited by a person: extraction never modifies or removes it."""
    # -- time (optional; partial ISO dates: "2023", "2023-05", "2023-W18", "2023-05-07") ----
    eventAt: str | None = None
    """When the event the fact describes happened (or will happen), when known — as opposed to
    ``createdAt``, when it was learnt ("went to Lisbon last May", learnt in December:
    ``2026-05``)."""
    validUntil: str | None = None
    """The last day a transient fact holds ("is in Berlin this week"): after it the fact expires
    (archived, not deleted). None: the fact holds until something replaces it."""
    entities: Annotated[tuple[str, ...], BeforeValidator(entity_list)] = ()
    """The people, products and places the fact names, as the extraction model listed them
    (the entity route also finds them in the text by rule: see
    :mod:`deermem_middleware.retrieval.entities`)."""

    @model_serializer(mode="wrap")
    def _compact(self, handler: Any) -> Any:
        """Lifecycle keys at their defaults are left out: files stay DeerFlow-shaped and small.
        ``source`` and ``updatedAt`` are left out when unknown rather than written as ``null``:
        DeerFlow types both as strings (its v2.0.0 API rejects ``source: null``, HEAD's loader
        ``updatedAt: null``)."""
        data = handler(self)
        if isinstance(data, dict):
            for key, default in _LIFECYCLE_DEFAULTS.items():
                if key in data and (data[key] == default or (default == () and not data[key])):
                    del data[key]
            for key in _OMIT_WHEN_NONE:
                if key in data and data[key] is None:
                    del data[key]
        return data

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> float:
        return coerce_confidence(value)


class Watermark(BaseModel):
    """How far a thread's conversation has been distilled into memory.

    ``turn`` is the fingerprint of the last turn that was extracted (the message id when the
    message has one, else a content hash), so a restart or a re-capture never resends old turns.
    """

    model_config = _STORED

    turn: str
    count: Annotated[int, COUNT] = 0
    updatedAt: str = ""
    position: Annotated[int | None, COUNT] = None
    """How many turns the capture had up to ``turn``: where a conversation resent whole still
    holds ``turn`` (and, for a watermark without ``seen``, the length below which a capture
    without ``turn`` is an older one)."""
    seen: tuple[str, ...] = ()
    """The fingerprints of the turns extracted under this key, newest last. For a thread: its
    most recent ones (at most ``MAX_THREAD_SEEN_TURNS``), which tell a trimmed window or a
    capture of only the newest message (new turns) from an older capture (nothing new). For a
    conversation without a thread id: at most :data:`MAX_SEEN_TURNS`. Empty in watermarks
    written before threads kept it."""
    opening: tuple[str, ...] = ()
    """For a thread: the fingerprints of the first turns (at most ``MAX_OPENING_TURNS``) of the
    capture ``turn`` was extracted from — done, like every turn of that capture. A conversation
    resent whole keeps its opening, so an older capture replayed long after (a crashed worker's
    journal entry) is still recognised when ``seen`` no longer reaches back to it."""

    @model_serializer(mode="wrap")
    def _compact(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("seen", "opening"):
                if not data.get(key):
                    data.pop(key, None)
        return data


class TrimCount(BaseModel):
    """The facts capacity (``max_facts``) deleted from a memory: deleted facts leave nothing
    behind, so they are counted here, for ``deermem stats`` and the console (see
    :mod:`deermem_middleware.memory.capacity`)."""

    model_config = _STORED

    count: Annotated[int, COUNT] = 0
    """Facts deleted by capacity, in all."""
    lastAt: str = ""
    """When the last of them were deleted (an update or an import)."""
    lastCount: Annotated[int, COUNT] = 0
    """How many that last time."""


class CarriedOver(BaseModel):
    """That a host's own memory of this scope was carried over into this document, once — so it
    is never carried over again, also after the document was cleared or its user erased (see
    :mod:`deermem_middleware.storage.carry_over`)."""

    model_config = _STORED

    source: str = "deerflow"
    """Whose memory: ``deerflow`` (its data folder)."""
    at: str = ""
    """When it was carried over (or, with ``erased``, when the user was erased instead)."""
    facts: Annotated[int, COUNT] = 0
    """Facts found there."""
    files: tuple[str, ...] = ()
    """The files and fact folders read, relative to the host's data folder."""
    erased: bool = False
    """The user was erased here before (or instead of) a carry-over: the host's own copy is
    the host's to delete, and is not read."""


def _carried_over(value: Any) -> Any:
    """A record as a hand-edited file may hold it: one that does not read still says a
    carry-over happened (reading the host's memory twice would duplicate it)."""
    if value is None or isinstance(value, CarriedOver):
        return value
    try:
        return CarriedOver.model_validate(value)
    except ValueError:
        return CarriedOver()


def _trim_count(value: Any) -> Any:
    """A counter as a hand-edited file may hold it: one that does not read is no counter (it is
    a statistic; the document must still load)."""
    if value is None or isinstance(value, TrimCount):
        return value
    try:
        return TrimCount.model_validate(value)
    except ValueError:  # pydantic's ValidationError is one
        return None


class Memory(BaseModel):
    """The whole memory of one (user, agent) scope."""

    model_config = _STORED

    version: str = "1.0"
    lastUpdated: str = ""
    user: UserContext = Field(default_factory=UserContext)
    history: History = Field(default_factory=History)
    facts: tuple[Fact, ...] = ()
    watermarks: dict[str, Watermark] = Field(default_factory=dict)
    trimmed: Annotated[TrimCount | None, BeforeValidator(_trim_count)] = None
    """What capacity deleted so far (None: nothing, and the key is not written)."""
    carriedOver: Annotated[CarriedOver | None, BeforeValidator(_carried_over)] = None
    """The host's memory carried over into this document (None: none, and the key is not
    written)."""

    @model_serializer(mode="wrap")
    def _compact(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("trimmed", "carriedOver"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    def section(self, name: str) -> Section:
        """The section called ``name`` (one of :data:`SECTION_FIELDS`)."""
        group: BaseModel = self.user if name in USER_FIELDS else self.history
        if name not in SECTION_FIELDS:
            raise KeyError(name)
        section: Section = getattr(group, name)
        return section

    def unknown_sections(self, group: Literal["user", "history"]) -> dict[str, Any]:
        """The sections of ``group`` this package does not model — a newer DeerFlow's
        ``user.cognitiveStyle`` (its pull request #3182), a section another tool added — as they
        were read. They are kept through every update, import, carry-over and export (the
        ``extra="allow"`` of the group models), exported as they came, and never injected: the
        block shows only the sections of :data:`SECTION_FIELDS`, whose labels and screening we
        know."""
        holder: BaseModel = self.user if group == "user" else self.history
        return dict(holder.model_extra or {})

    def to_json_dict(self) -> dict[str, Any]:
        """The document as stored: DeerFlow's keys plus ours, unknown keys preserved."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Memory:
        return cls.model_validate(dict(data))
