"""The per-revision index of one list of facts: everything selection needs about them, built
once per memory revision and cached by the selector (lexical index, decayed confidences, usage,
dates, vectors, entities, threads, the rule masks and the query-less choices).

Built from the revision's derived snapshot (:class:`~deermem_middleware.derived.view.
DerivedView`) when the storage has one: the n-gram rows, the entities and the vectors are read,
not computed; without one, the texts are analysed here (and the engine derives the snapshot in
the background)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

import numpy as np

from deermem_middleware.derived.derive import fact_columns
from deermem_middleware.derived.snapshot import COLUMN
from deermem_middleware.derived.view import DerivedView
from deermem_middleware.memory.decay import (
    effective_confidences,
    half_life_days,
)
from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.usage import usage_ratios
from deermem_middleware.retrieval.entities import EntityIndex, extract_entities
from deermem_middleware.retrieval.lexical import CharNgramIndex, WordTfidfIndex
from deermem_middleware.retrieval.queryless import QuerylessChoice, QuerylessParams
from deermem_middleware.retrieval.rules import RecallRule

__all__ = ["FactIndex", "Method"]

Method = Literal["deermem", "seed"]


class FactIndex:
    """Everything selection needs about one list of facts (one memory revision)."""

    def __init__(
        self,
        facts: Sequence[Fact],
        method: Method = "deermem",
        *,
        now: datetime | None = None,
        half_lives: Mapping[str, float] | None = None,
        view: DerivedView | None = None,
    ) -> None:
        self.facts: tuple[Fact, ...] = tuple(facts)
        self.method: Method = method
        self.view = view
        """The derived snapshot lined up with these facts (None: nothing derived is known):
        the stored verdicts the block reads come from here."""
        self.lexical: CharNgramIndex | WordTfidfIndex
        if method == "seed":
            self.lexical = WordTfidfIndex([f.content for f in self.facts])
        elif view is not None:
            self.lexical = view.lexical_index()
        else:
            self.lexical = CharNgramIndex([f.content for f in self.facts])
        # the facts' fields as the write derived them, or read now the same way (no snapshot)
        stored = view.columns() if view is not None else None
        columns, categories = stored if stored is not None else fact_columns(self.facts)
        self._from_columns(columns, categories, now=now, half_lives=half_lives)
        self.dense: np.ndarray | None = None
        """Unit vectors of the facts (rows); None: lexical only. A fact without a usable vector
        (unusable, or not derived yet) has a zero row and is False in :attr:`has_vector`."""
        self.has_vector: np.ndarray | None = None
        """Per fact, whether its row of :attr:`dense` is a real vector (None: every row is);
        a fact without one is ranked by its lexical score alone."""
        if view is not None and method != "seed":
            self.dense, self.has_vector = view.dense()
        self._recency: np.ndarray | None = None
        self._recency_values: dict[float, np.ndarray] = {}
        self._hub: tuple[np.ndarray, np.ndarray] | None = None
        self._entities: EntityIndex | None = None
        self.rule_masks: dict[RecallRule, np.ndarray] = {}
        """Per recall rule, the facts it names (filled on first use)."""
        self.queryless_choices: dict[
            tuple[QuerylessParams, int], tuple[np.ndarray | None, QuerylessChoice]
        ] = {}
        """The query-less choices made on this revision, per (params, k), with the ``dense``
        they were made with: the choice does not depend on the message, so ``get_context``
        calls after the first cost a look-up (filled by the selector)."""

    def _from_columns(
        self,
        columns: np.ndarray,
        categories: tuple[str, ...],
        *,
        now: datetime | None,
        half_lives: Mapping[str, float] | None,
    ) -> None:
        """Confidences, usage, dates, threads and manual facts from the fact columns
        (:func:`~deermem_middleware.derived.derive.fact_columns`; no loop over the facts: from
        a snapshot, a 5,000-fact memory in a fraction of a millisecond)."""
        raw = np.array(columns[:, COLUMN["confidence"]], dtype=np.float64)
        if now is None or self.method == "seed":
            self.confidence = raw
        else:  # unused facts fade (per-category half-life): lower in rank, never out
            table = np.array([half_life_days(c, half_lives) for c in categories] or [0.0])
            codes = columns[:, COLUMN["category"]].astype(np.int64)
            self.confidence = effective_confidences(
                raw, columns[:, COLUMN["used_at"]], table[codes], now
            )
        self.usage = usage_ratios(columns[:, COLUMN["used"]], columns[:, COLUMN["injections"]])
        """Per fact, how often answers used it when it was injected (see ``usage_weight``)."""
        self.confirmed = np.array(columns[:, COLUMN["confirmed"]], dtype=np.float64)
        """Per fact, seconds since the epoch of its last confirmation (NaN: no usable date)."""
        self._dates = (
            columns[:, COLUMN["event_start"]],
            columns[:, COLUMN["event_end"]],
            columns[:, COLUMN["learnt"]],
        )
        self.threads = columns[:, COLUMN["thread"]].astype(np.int64)
        """Per fact, a number for the conversation (``source``) it was learnt in; -1 when it
        has none (typed by a person, imported)."""
        manual = np.flatnonzero(columns[:, COLUMN["manual"]] > 0)
        self._manual = tuple(self.facts[i] for i in manual)

    def manual_facts(self) -> tuple[Fact, ...]:
        """The user's own (manual) facts among these, found once per revision: manual
        precedence asks for them on every model call, and scanning 10,000 facts for them took
        0.4 ms of a 0.8 ms selection."""
        return self._manual

    def hubness(self) -> np.ndarray | None:
        """Per fact, its vector's dot product with the mean fact vector (None: lexical only).
        Computed once per attached ``dense`` (O(n·d), 2–3 ms at 10,000 facts)."""
        dense = self.dense
        if dense is None:
            return None
        if self._hub is None or self._hub[0] is not dense:
            mean = dense.mean(axis=0)
            self._hub = (dense, np.asarray(dense @ mean, dtype=np.float64))
        return self._hub[1]

    @property
    def entities(self) -> EntityIndex:
        """The facts' entities — those the extraction listed and those the rules find in the
        text — built on first use (selection without the entity route never pays for it)."""
        if self._entities is None and self.view is not None:
            self._entities = self.view.entity_index()
        if self._entities is None:
            found = (
                self.view.entity_lists()
                if self.view is not None
                else [extract_entities(f.content) for f in self.facts]
            )
            self._entities = EntityIndex(
                [(*f.entities, *names) for f, names in zip(self.facts, found, strict=True)]
            )
        return self._entities

    def __len__(self) -> int:
        return len(self.facts)

    def recency(self, half_life_days: float) -> np.ndarray:
        """Per fact 0.5 ** (days before the newest fact / half-life), from the last time it was
        confirmed (or learnt); facts without a readable date count as old: 0."""
        cached = self._recency_values.get(half_life_days)
        if cached is not None:
            return cached
        values = np.zeros(len(self.facts))
        known = ~np.isnan(self.confirmed)
        if known.any() and half_life_days > 0:
            newest = float(self.confirmed[known].max())
            age_days = np.maximum(0.0, newest - self.confirmed[known]) / 86400.0
            values[known] = 0.5 ** (age_days / half_life_days)
        self._recency_values[half_life_days] = values
        return values

    @property
    def recency_rank(self) -> np.ndarray:
        """Per fact, its place when sorted newest first (breaks ties in score)."""
        if self._recency is None:
            stamps = np.nan_to_num(self.confirmed, nan=-math.inf)
            order = np.argsort(-stamps, kind="stable")
            ranks = np.empty(len(order), dtype=np.int64)
            ranks[order] = np.arange(len(order))
            self._recency = ranks
        return self._recency

    def dates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per fact (event start, event end, learnt), seconds since the epoch; NaN when unknown.
        The event range comes from ``eventAt`` (a day, week, month or year), learnt from
        ``createdAt``."""
        return self._dates
