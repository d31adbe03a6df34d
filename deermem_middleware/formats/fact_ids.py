"""The one rule for the id of a fact read from a document that comes from outside — an import
file, an upload to the console, DeerFlow's gateway import, a DeerFlow folder (pure).

Every reader of such documents (:mod:`~deermem_middleware.formats.repair`, which all imports go
through) asks :func:`check_fact_id` about each fact's id, so the same id gets the same treatment
whichever way it came in. The rule, per kind of id:

- **usable** (a string of at most :data:`MAX_FACT_ID_CHARS` characters, valid Unicode, no
  control or invisible format characters, no spaces around it, not seen before in the same
  document): kept as written;
- **missing**, ``null`` or ``""`` (DeerFlow's loaders give such a fact an id too), **blank**
  (only spaces), **not a string** (a number, ``true``/``false``, a list), **not valid Unicode**
  (a lone surrogate), holding **control characters**, with **spaces around it**, or **too long**:
  *repaired* — the fact is kept under a new id derived from its text
  (:func:`derived_fact_id`: the same on every read, so importing the file again finds it);
- the **same id as an earlier fact** of the document: with the same text, the fact is a copy
  and is *dropped*; with other text it is *repaired*, kept under a new id.

None of them is refused: an id only names a fact inside its memory, so a new one loses nothing
the fact says, while refusing the document would lose every other fact in it. But nothing is
silent either: each verdict that is not "kept" has a reason naming the fact (its place in the
document and the start of its text) and what was done, for the import's receipt, and is counted
there (:attr:`~deermem_middleware.formats.repair.RepairReport.ids_repaired`).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from deermem_middleware.memory.values import invalid_text

__all__ = [
    "MAX_FACT_ID_CHARS",
    "IdVerdict",
    "check_fact_id",
    "derived_fact_id",
    "fact_preview",
    "id_problem",
]

MAX_FACT_ID_CHARS: Final = 256
"""The longest id kept as written (ours are 25 characters, DeerFlow's 13, a UUID 36)."""

PREVIEW_CHARS: Final = 40
"""Characters of a fact's text a reason shows."""


def derived_fact_id(*parts: str) -> str:
    """A stable id for a fact that came without a usable one: the same fact gets the same id on
    every read (a random one would change until the repaired document is saved)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return "fact_" + digest[:20]


def fact_preview(content: str) -> str:
    """The start of a fact's text, quoted, safe to print (a lone surrogate is escaped)."""
    text = " ".join(content.split())
    short = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return repr(short)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


def id_problem(raw: Any) -> str | None:
    """What is wrong with ``raw`` as a fact id (None: usable as written)."""
    if raw is None:
        return "no id"
    if not isinstance(raw, str):
        shown = repr(raw) if len(repr(raw)) <= 60 else repr(raw)[:59] + "…"
        return f"id {shown} is {_type_name(raw)}, not a string"
    if raw == "":
        return "empty id"
    if not raw.strip():
        return f"blank id {raw!r}"
    shown = repr(raw) if len(raw) <= 60 else repr(raw[:59] + "…")
    if invalid_text(raw):
        return f"id {shown} is not valid Unicode (a lone surrogate)"
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in raw):
        return f"id {shown} holds control or invisible characters"
    if raw != raw.strip():
        return f"id {shown} has spaces around it"
    if len(raw) > MAX_FACT_ID_CHARS:
        return f"id of {len(raw):,} characters (over {MAX_FACT_ID_CHARS})"
    return None


@dataclass(frozen=True)
class IdVerdict:
    """What :func:`check_fact_id` decided for one fact: ``action`` ``kept`` (the id as
    written), ``repaired`` (kept under ``fact_id``, a new id) or ``dropped`` (a copy of an
    earlier fact); ``reason`` says, for the receipt, what was wrong, on which fact and what was
    done (empty when kept); ``missing`` is True when the document gave no id at all (DeerFlow's
    loaders give one too: not an error in the file)."""

    action: Literal["kept", "repaired", "dropped"]
    fact_id: str
    reason: str = ""
    missing: bool = False


def check_fact_id(
    raw: Any, *, content_key: str, content: str, earlier: Mapping[str, tuple[str, str]]
) -> IdVerdict:
    """The rule (see the module docstring) for one fact's id ``raw`` as written in a document.

    ``content_key`` is the fact's normalised text (it derives a new id and tells a copy from
    another fact), ``content`` its text as written (shown in the reason), ``earlier`` the ids of
    the facts read before it in the same document, each with (its place, its normalised text).
    """
    about = f"(fact {fact_preview(content)})"
    problem = id_problem(raw)
    fact_id = raw if problem is None else derived_fact_id(content_key)
    reason = "" if problem is None else f"{problem} {about}; given {fact_id}"
    if fact_id in earlier:
        first, first_key = earlier[fact_id]
        if first_key == content_key:  # DeerFlow's migration skips an equal duplicate too
            shown = repr(raw) if problem is None else "its new id"
            return IdVerdict(
                "dropped", fact_id, f"duplicate of {first} (same id {shown} and text) {about}"
            )
        new_id = derived_fact_id(fact_id, content_key)
        what = f"duplicate id {fact_id!r}" if problem is None else f"{problem}, and its new id"
        reason = f"{what} (also {first}) {about}; given {new_id}"
        return IdVerdict("repaired", new_id, reason)
    if problem is None:
        return IdVerdict("kept", fact_id)
    return IdVerdict("repaired", fact_id, reason, missing=raw is None or raw == "")
