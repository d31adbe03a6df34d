"""Tolerant parsing of a model's answer and item-by-item validation of the update.

Models wrap JSON in code fences, prose or ``<think>`` text, and stop mid-object at their token
limit; hostile or broken output can be megabytes of braces. :func:`parse_json_text` finds the
object (bounded work on any input) and salvages the complete items of a truncated one;
:func:`parse_update` validates each section, fact and removal on its own, so one bad item never
costs the rest.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from deermem_middleware.memory.document import (
    HISTORY_FIELDS,
    MAX_FACTS_PER_UPDATE,
    MAX_REMOVALS_PER_UPDATE,
    USER_FIELDS,
)
from deermem_middleware.memory.update import (
    HistoryUpdate,
    MemoryUpdate,
    NewFact,
    SectionUpdate,
    UserUpdate,
)

__all__ = ["MAX_LISTED_REJECTIONS", "ExtractionError", "parse_json_text", "parse_update"]

logger = logging.getLogger(__name__)


class ExtractionError(RuntimeError):
    """The model's answer could not be turned into an update at all."""


_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|\Z)", re.DOTALL)
_OBJECT_START = re.compile(r'\{\s*["}]')
"""Where a JSON object can begin: ``{"`` or ``{}``. Prose braces (``{maybe}``) are not tried."""
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
"""A JSON string (possibly unterminated) or a bracket: strings are skipped whole, in C."""

_MAX_OBJECT_STARTS = 64
"""Object starts tried from each end of an answer. Each failed decode costs time proportional to
its offset, so trying every ``{`` of a hostile megabyte of braces took minutes."""
_MAX_PARTIAL_CHARS = 256_000
"""How much of a truncated answer is completed. A whole legitimate update is about 20,000
characters; anything past this is noise a small model produced until its token limit."""
_MAX_CUTS = 200
_MAX_DEPTH = 32
"""An update nests four levels deep; past this a prefix holds nothing usable (and the decoder
would give up near a thousand levels anyway)."""

_UPDATE_KEYS = frozenset({"user", "history", "newFacts", "factsToRemove"})


def _looks_like_update(value: Any) -> bool:
    return isinstance(value, dict) and not _UPDATE_KEYS.isdisjoint(value)


def _loads(text: str) -> Any:
    """``json.loads`` that fails with ``ValueError`` only: a deeply nested answer makes the
    decoder raise ``RecursionError``, which must count as "not JSON", not crash the worker."""
    try:
        return json.loads(text, strict=False)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _complete_items(text: str) -> dict[str, Any] | None:
    """The longest prefix of a truncated object that ends at a closing brace, completed.

    Cutting at a ``}`` keeps only items the model finished writing: a half-written fact or summary
    at the end of a truncated answer is dropped, not stored with made-up defaults. One linear scan
    finds the braces outside strings and what each prefix needs closed; a failed decode at offset
    ``p`` rules out every longer prefix too (it holds the same error), so few decodes are tried.
    """
    text = text[:_MAX_PARTIAL_CHARS]
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token == "{" or token == "[":
            stack.append("}" if token == "{" else "]")
            if len(stack) > _MAX_DEPTH:
                break  # garbage nested thousands deep: keep the complete items before it
        elif token == "}" or token == "]":
            if not stack or stack[-1] != token:
                break  # mismatched bracket: no longer prefix can parse
            stack.pop()
            if token == "}":
                cuts.append((match.end(), "".join(reversed(stack))))
            if not stack:
                break  # the object is closed: what follows is not part of it
    limit = len(text)
    for end, closers in reversed(cuts[-_MAX_CUTS:]):
        if end > limit:
            continue
        try:
            value = _loads(text[:end] + closers)
        except json.JSONDecodeError as exc:
            limit = min(limit, exc.pos)
            continue
        except ValueError:
            continue
        if _looks_like_update(value):
            return value
    return None


def _bounded(items: list[int], limit: int) -> list[int]:
    """The first and the last ``limit`` items (the answer is near one end of the text)."""
    if len(items) <= 2 * limit:
        return items
    return items[:limit] + items[-limit:]


def parse_json_text(text: str) -> Any:
    """The JSON object in a model's text answer, however it was wrapped.

    Tries, in order: the whole text; fenced blocks; the first decodable ``{...}`` that has update
    keys (an inner object of a truncated answer must not pass for the answer); a truncated object
    cut back to its last complete item. Raises :class:`ExtractionError` when none works. The work
    is bounded whatever the text (a megabyte of braces, brackets nested thousands deep).
    """
    cleaned = _THINK.sub("", text).strip()
    candidates = [cleaned]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(cleaned))
    for candidate in candidates:
        try:
            return _loads(candidate)
        except ValueError:
            pass
    decoder = json.JSONDecoder(strict=False)
    starts = [m.start() for m in _OBJECT_START.finditer(cleaned)]
    for start in _bounded(starts, _MAX_OBJECT_STARTS):
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except (ValueError, RecursionError):
            continue
        if _looks_like_update(value):
            return value
    for start in starts[:5]:  # the answer starts early; bound the work
        value = _complete_items(cleaned[start:])
        if value is not None:
            logger.info("extraction answer was truncated JSON; using the complete items only")
            return value
    preview = text[:120].replace("\n", " ")
    raise ExtractionError(f"no JSON object in the model's answer (starts with {preview!r})")


def _error_text(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
    )


MAX_LISTED_REJECTIONS = 50
"""Rejections named one by one per update; the rest are counted in one last entry, so an answer
with thousands of bad items cannot flood the log."""


def _list_field(data: Mapping[str, Any], key: str, reject: Callable[[str, str], None]) -> list[Any]:
    """``data[key]`` when it is a list; [] when absent, or (rejected) when it is not a list."""
    raw = data.get(key)
    if raw is not None and not isinstance(raw, list):
        reject(key, f"expected a list, got {type(raw).__name__}")
        return []
    return raw or []


def parse_update(data: Any) -> tuple[MemoryUpdate, list[str]]:
    """Validate each part of a raw answer on its own; return the update and the rejections.

    Rejections are also logged (warning), each naming the field and the reason; past
    :data:`MAX_LISTED_REJECTIONS` they are counted in one final ``more: ...`` entry.
    """
    if not isinstance(data, Mapping):
        raise ExtractionError(f"the model's answer is a {type(data).__name__}, not a JSON object")
    if not any(k in data for k in ("user", "history", "newFacts", "factsToRemove", *USER_FIELDS)):
        raise ExtractionError(
            "the model's answer has none of the update fields (user, history, newFacts, "
            f"factsToRemove); keys: {sorted(map(str, data))[:10]}"
        )
    rejected: list[str] = []
    unlisted = 0

    def reject(where: str, why: str) -> None:
        # a hostile answer can hold thousands of bad items: name the first ones, count the rest
        nonlocal unlisted
        if len(rejected) >= MAX_LISTED_REJECTIONS:
            unlisted += 1
            return
        rejected.append(f"{where}: {why}")
        logger.warning("memory update item rejected: %s: %s", where, why)

    groups: dict[str, dict[str, SectionUpdate]] = {"user": {}, "history": {}}
    for group, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS)):
        raw_group = data.get(group)
        if raw_group is not None and not isinstance(raw_group, Mapping):
            reject(group, f"expected an object, got {type(raw_group).__name__}")
            raw_group = None
        for name in names:
            raw = raw_group.get(name) if raw_group is not None else data.get(name)
            if raw is None:
                continue
            where = f"{group}.{name}"
            if not isinstance(raw, Mapping):
                reject(
                    where,
                    f"expected an object with shouldUpdate and summary, got {type(raw).__name__}",
                )
                continue
            try:
                groups[group][name] = SectionUpdate.model_validate(raw)
            except ValidationError as exc:
                reject(where, _error_text(exc))

    facts: list[NewFact] = []
    for index, raw in enumerate(_list_field(data, "newFacts", reject)):
        where = f"newFacts[{index}]"
        if len(facts) >= MAX_FACTS_PER_UPDATE:
            reject(where, f"more than {MAX_FACTS_PER_UPDATE} new facts in one update")
            continue
        if not isinstance(raw, Mapping):
            reject(where, f"expected an object, got {type(raw).__name__}")
            continue
        try:
            facts.append(NewFact.model_validate(raw))
        except ValidationError as exc:
            reject(where, _error_text(exc))

    removals: list[str] = []
    for index, raw in enumerate(_list_field(data, "factsToRemove", reject)):
        where = f"factsToRemove[{index}]"
        if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
            raw = raw["id"]
        if not isinstance(raw, str) or not raw.strip() or len(raw) > 80:
            reject(where, f"expected a fact id, got {str(raw)[:40]!r}")
            continue
        if len(removals) >= MAX_REMOVALS_PER_UPDATE:
            reject(where, f"more than {MAX_REMOVALS_PER_UPDATE} removals in one update")
            continue
        if raw.strip() not in removals:
            removals.append(raw.strip())

    if unlisted:
        why = f"{unlisted} further item(s) rejected, not listed one by one"
        rejected.append(f"more: {why}")
        logger.warning("memory update item rejected: more: %s", why)
    update = MemoryUpdate(
        user=UserUpdate(**groups["user"]),
        history=HistoryUpdate(**groups["history"]),
        newFacts=facts,
        factsToRemove=removals,
    )
    return update, rejected
