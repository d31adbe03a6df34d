"""What DeerFlow's memory API (its gateway) gets from the backend and gives it, as pure
functions over our documents: the v1.0 document with its revision, search hits, the errors of
fact operations, and what "clear" and "import" make of a document. DeerFlow is never imported
here; :class:`~deermem_middleware.deerflow.manager.DeermemMemoryManager` does the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from deermem_middleware.formats.deerflow import deerflow_source, from_deerflow, to_deerflow
from deermem_middleware.formats.importing import log_import_cuts
from deermem_middleware.formats.interchange import cap_document
from deermem_middleware.injection.render import MEMORY_CLOSE, MEMORY_OPEN
from deermem_middleware.memory import manual
from deermem_middleware.memory.document import SECTION_FIELDS, Memory
from deermem_middleware.retrieval.selector import ScoredFact
from deermem_middleware.storage.base import CorruptedMemoryError, MemoryScope, RevisionConflict

__all__ = [
    "cleared",
    "document",
    "fact_errors",
    "imported",
    "replacing",
    "search_hits",
    "storage_errors",
    "unwrapped",
]

logger = logging.getLogger(__name__)


def document(memory: Memory, revision: int) -> dict[str, Any]:
    """DeerFlow's v1.0 document (active facts; ``lastUpdated`` always a time) plus our
    ``revision``. Its facts are listed by id, as DeerFlow's DeerMem lists every document it
    answers with (it reads its fact files back sorted by id), so a fact the gateway just created
    or edited sits where DeerMem puts it; the stored order (oldest first) is unchanged."""
    data = to_deerflow(memory)
    data["facts"] = sorted(data["facts"], key=lambda fact: str(fact["id"]))
    data["revision"] = revision
    return data


def search_hits(
    picks: Sequence[ScoredFact], *, top_k: int, category: str | None = None
) -> list[dict[str, Any]]:
    """The best ``top_k`` of ``picks`` (of ``category`` only, when given) as the gateway's
    search results: ``id, content, category, confidence, createdAt, source, score`` (``source``
    as DeerFlow's documents write it: the thread, ``manual`` or ``unknown``)."""
    if category is not None:
        picks = [p for p in picks if p.fact.category == category]
    return [
        {
            "id": p.fact.id,
            "content": p.fact.content,
            "category": p.fact.category,
            "confidence": p.fact.confidence,
            "createdAt": p.fact.createdAt,
            "source": deerflow_source(p.fact),
            "score": round(p.score, 6),
        }
        for p in picks[:top_k]
    ]


def unwrapped(block: str) -> str:
    """The block without its outer ``<memory>`` tags: DeerFlow's prompt wraps what
    ``get_context`` returns in its own ``<memory>`` element."""
    text = block.strip()
    if text.startswith(MEMORY_OPEN) and text.endswith(MEMORY_CLOSE):
        return text[len(MEMORY_OPEN) : -len(MEMORY_CLOSE)].strip("\n")
    return block


@contextmanager
def fact_errors() -> Iterator[None]:
    """The errors of :mod:`deermem_middleware.memory.manual` as the gateway reads them:
    ``ValueError(field, why)`` (400: ``"content"``, ``"confidence"``),
    ``ValueError("Duplicate fact")`` (409), ``KeyError(fact_id)`` (404)."""
    try:
        yield
    except manual.InvalidFactError as exc:
        raise ValueError(exc.field, str(exc)) from None
    except manual.DuplicateFactError:
        raise ValueError("Duplicate fact") from None
    except manual.UnknownFactError as exc:
        raise KeyError(exc.fact_id) from None


def cleared(memory: Memory, now: str) -> Memory:
    """``memory`` emptied (no facts, no summaries), threads' progress kept so turns already
    read are not extracted again, and the record of a carry-over kept so DeerFlow's old copy is
    not read back in; ``memory`` itself when there is nothing to clear."""
    if not memory.facts and not any(memory.section(n).summary for n in SECTION_FIELDS):
        return memory
    return Memory(lastUpdated=now, watermarks=memory.watermarks, carriedOver=memory.carriedOver)


def imported(
    memory_data: Mapping[str, Any], *, max_facts: int, now: str, scope: MemoryScope
) -> Memory:
    """A DeerFlow document for ``scope`` read leniently, fact by fact, and capped like
    extracted memory, as every import is (what was repaired or cut is logged as WARNINGs,
    :func:`~deermem_middleware.formats.importing.log_import_cuts`; facts over ``max_facts`` are
    left out and counted as trimmed); to replace a document with, keeping its threads' progress
    (:func:`replacing`)."""
    incoming, report = from_deerflow(memory_data, where="imported memory", now=now)
    for line in report.lines():
        logger.warning("memory import: %s", line)
    (logger.warning if report.changed else logger.info)(
        "memory import into user %r agent %r: %d fact(s) read, %d kept; %d repaired "
        "(%d given a new id), %d dropped",
        scope.user_id,
        scope.agent_name,
        report.facts_read,
        report.facts_kept,
        report.facts_repaired,
        report.ids_repaired,
        report.facts_dropped,
    )
    capped, cuts = cap_document(incoming, max_facts=max_facts, now=now)
    log_import_cuts(cuts, user=scope.user_id, agent=scope.agent_name)
    return capped.model_copy(update={"lastUpdated": now})


def replacing(incoming: Memory, memory: Memory) -> Memory:
    """``incoming`` in place of ``memory``, with ``memory``'s threads' progress and its record
    of a carry-over."""
    return incoming.model_copy(
        update={"watermarks": memory.watermarks, "carriedOver": memory.carriedOver}
    )


@contextmanager
def storage_errors(conflict: type[Exception], corruption: type[Exception]) -> Iterator[None]:
    """A lost compare-and-set race as ``conflict`` (gateway: 409), unreadable stored memory as
    ``corruption`` (gateway: 500): DeerFlow's error classes, passed in by the manager."""
    try:
        yield
    except RevisionConflict as exc:
        raise conflict(str(exc)) from exc
    except CorruptedMemoryError as exc:
        raise corruption(str(exc)) from exc
