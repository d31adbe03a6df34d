"""A stored snapshot lined up with the document it was loaded with (the read side; pure).

When the storage hands out a document and the snapshot written with that very revision, row
``i`` of the snapshot is active fact ``i`` of the document (*exact*): the index is built from the
snapshot's arrays as they are. Otherwise — a document written by something that does not derive,
a snapshot made by other code, a backend that keeps none — each fact is found in the snapshot
by the digest of its text, and what is not found is *missing*: its n-grams and entities are
computed on the read (cheap), it is ranked without a vector, and its verdict is read by the
screen only if the block is about to show it. The engine then derives the snapshot again in the
background (:attr:`DerivedView.missing` says whether there is anything to do).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deermem_middleware.derived.derive import active_facts, lexical_index
from deermem_middleware.derived.snapshot import (
    DerivedSnapshot,
    MadeBy,
    SnapshotFormatError,
    decode_snapshot,
    text_digest,
    text_digests,
)
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.entities import EntityIndex, extract_entities
from deermem_middleware.retrieval.lexical import CharNgramIndex
from deermem_middleware.screen import TextAssessment

__all__ = ["DerivedView", "open_snapshot"]

logger = logging.getLogger(__name__)


def open_snapshot(blob: bytes | None, where: str = "") -> DerivedSnapshot | None:
    """The snapshot in ``blob`` (None for none, or for bytes that do not decode — logged, and
    then derived again: a snapshot is never a reason for a read to fail)."""
    if not blob:
        return None
    try:
        return decode_snapshot(blob)
    except SnapshotFormatError as exc:
        logger.warning(
            "memory derived data%s unreadable (%s); it is derived again",
            f" of {where}" if where else "",
            exc,
        )
        return None


@dataclass(eq=False)
class DerivedView:
    """What a read knows of each active fact without deriving it (see the module docstring)."""

    facts: tuple[Fact, ...]
    snapshot: DerivedSnapshot | None
    current: MadeBy
    """What runs now: parts made by something else are not used (verdicts), or used and
    re-derived (nothing else is used either: n-grams hashed another way would not match)."""
    rows: np.ndarray
    """Per fact its snapshot row, -1 when it has none."""
    exact: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        memory: Memory,
        snapshot: DerivedSnapshot | None,
        current: MadeBy,
        *,
        exact: bool = False,
    ) -> DerivedView:
        """Line ``snapshot`` up with ``memory``'s active facts; ``exact``: the storage says it
        was written with this revision of the document (rows are then taken in order)."""
        facts = active_facts(memory)
        n = len(facts)
        if snapshot is None:
            return cls(facts, None, current, np.full(n, -1, dtype=np.int64))
        if exact and snapshot.size == n:
            return cls(facts, snapshot, current, np.arange(n, dtype=np.int64), exact=True)
        row_of = snapshot.row_of()
        keys = text_digests([f.content for f in facts]).tolist()
        rows = np.fromiter((row_of.get(k, -1) for k in keys), dtype=np.int64, count=n)
        return cls(facts, snapshot, current, rows)

    # -- what is there --------------------------------------------------------------------

    def _part_current(self, part: str) -> bool:
        s = self.snapshot
        return s is not None and getattr(s.made_by, part) == getattr(self.current, part)

    def _has(self, flags: np.ndarray | None, part: str) -> np.ndarray:
        """Per fact, whether the snapshot holds ``part`` for it, made by what runs now."""
        n = len(self.facts)
        if flags is None or not self._part_current(part):
            return np.zeros(n, dtype=bool)
        found = self.rows >= 0
        out = np.zeros(n, dtype=bool)
        out[found] = flags[self.rows[found]]
        return out

    @property
    def missing(self) -> int:
        """Facts without a current verdict, lexical row, entities or (with an embedding
        model configured) vector: what a background derivation would add."""
        cached = self._cache.get("missing")
        if cached is None:
            s = self.snapshot
            n = len(self.facts)
            if s is None:
                cached = n
            else:
                ok = self._has(s.lexical_rows, "lexical") & self._has(s.entity_rows, "entities")
                if self.current.embedding:
                    ok &= self._has(s.vector_rows, "embedding")
                if self._part_current("screen"):
                    keys = s.digest[self.rows[self.rows >= 0]]
                    screened = np.zeros(n, dtype=bool)
                    screened[self.rows >= 0] = np.isin(keys, s.verdict_digest)
                    ok &= screened
                else:
                    ok[:] = False
                if self.exact and s.columns is None:
                    ok[:] = False  # a snapshot from before the fact columns were derived
                cached = int(n - ok.sum())
            self._cache["missing"] = cached
        return int(cached)

    def columns(self) -> tuple[np.ndarray, tuple[str, ...]] | None:
        """Per fact the :data:`~deermem_middleware.derived.snapshot.FACT_COLUMNS` and the
        category names, when the snapshot was written with this revision (None: read the
        facts)."""
        s = self.snapshot
        if self.exact and s is not None and s.columns is not None:
            return s.columns, s.categories
        return None

    # -- verdicts -------------------------------------------------------------------------

    def verdict(self, text: str) -> TextAssessment | None:
        """The stored verdict of ``text`` when the screen that runs now made it, else None
        (the caller screens it)."""
        if not self._part_current("screen"):
            return None
        assert self.snapshot is not None
        found = self.snapshot.verdict(text_digest(text))
        return None if found is None else TextAssessment(found[0], found[1])  # type: ignore[arg-type]

    # -- the lexical channel ----------------------------------------------------------------

    def lexical_index(self) -> CharNgramIndex:
        """The character n-gram index of the facts: from the snapshot's rows (an exact view
        takes its arrays as they are), texts without a row analysed now."""
        s = self.snapshot
        n = len(self.facts)
        has = self._has(s.lexical_rows if s is not None else None, "lexical")
        if s is not None and self.exact and has.all():
            return CharNgramIndex.from_csc(
                n, s.lex_vocab, s.lex_colptr, s.lex_row, s.lex_weight.astype(np.float32)
            )
        found = [(s, int(self.rows[i])) if s is not None and has[i] else None for i in range(n)]
        return lexical_index([f.content for f in self.facts], found)

    # -- entities ---------------------------------------------------------------------------

    def entity_index(self) -> EntityIndex | None:
        """The entity postings stored with this very revision (None: build them from
        :meth:`entity_lists` and the facts' listed entities)."""
        s = self.snapshot
        if not self.exact or s is None or not self._part_current("entities"):
            return None
        text = s.ent_names.tobytes().decode("utf-8", "surrogatepass")
        names = text.split("\x1f") if text else []
        if len(names) != len(s.ent_ptr) - 1:
            return None
        return EntityIndex.from_postings(len(self.facts), names, s.ent_ptr, s.ent_post)

    def entity_lists(self) -> list[tuple[str, ...]]:
        """Per fact the entities the rules find in its text (stored, or found now)."""
        s = self.snapshot
        has = self._has(s.entity_rows if s is not None else None, "entities")
        out: list[tuple[str, ...]] = []
        for i, fact in enumerate(self.facts):
            if has[i]:
                assert s is not None
                out.append(s.entities(int(self.rows[i])))
            else:
                out.append(extract_entities(fact.content))
        return out

    # -- vectors ----------------------------------------------------------------------------

    def dense(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(unit float32 rows, per-fact "has a usable vector" or None when all have) — or
        (None, None) when no fact has a usable vector made by the configured model."""
        cached = self._cache.get("dense")
        if cached is not None:
            return cached
        s = self.snapshot
        result: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        if s is not None and self.current.embedding and s.vectors.shape[1]:
            has = self._has(s.vector_rows, "embedding")
            usable = np.zeros(len(self.facts), dtype=bool)
            usable[has] = s.scales[self.rows[has]] > 0
            if usable.all() and self.exact:  # the stored rows as they are: one pass
                matrix = s.vectors.astype(np.float32)
                matrix *= s.scales[:, None]
                result = (matrix, None)
            elif usable.any():
                rows = np.where(usable, self.rows, 0)
                matrix = s.vectors[rows].astype(np.float32)
                matrix *= np.where(usable, s.scales[rows], 0.0).astype(np.float32)[:, None]
                result = (matrix, None if usable.all() else usable)
        self._cache["dense"] = result
        return result
