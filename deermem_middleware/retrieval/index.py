"""The per-revision index of one list of facts: everything selection needs about them, built
once per memory revision and cached by the selector (lexical index, decayed confidences, usage,
dates, vectors, entities, threads, the rule masks and the query-less choices)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

import numpy as np

from deermem_middleware.memory.decay import effective_confidence, last_confirmed
from deermem_middleware.memory.document import Fact
from deermem_middleware.memory.time import epoch_seconds, event_date_range
from deermem_middleware.memory.usage import access_frequency
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
    ) -> None:
        self.facts: tuple[Fact, ...] = tuple(facts)
        self.method: Method = method
        texts = [f.content for f in self.facts]
        self.lexical: CharNgramIndex | WordTfidfIndex = (
            WordTfidfIndex(texts) if method == "seed" else CharNgramIndex(texts)
        )
        if now is None or method == "seed":
            confidences = [f.confidence for f in self.facts]
        else:  # unused facts fade (per-category half-life): lower in rank, never out
            confidences = [effective_confidence(f, now, half_lives) for f in self.facts]
        self.confidence = np.array(confidences, dtype=np.float64)
        self.usage = access_frequency(self.facts)
        """Per fact, how often answers used it when it was injected (see ``usage_weight``)."""
        self.dense: np.ndarray | None = None
        """Unit vectors of the facts (rows), once every fact is embedded; None: lexical only. A
        fact whose vector was unusable has a zero row and is False in :attr:`has_vector`."""
        self.has_vector: np.ndarray | None = None
        """Per fact, whether its row of :attr:`dense` is a real vector (None: every row is);
        a fact without one is ranked by its lexical score alone."""
        confirmed = [last_confirmed(f) for f in self.facts]
        self.confirmed = np.array(
            [math.nan if m is None else m.timestamp() for m in confirmed], dtype=np.float64
        )
        """Per fact, seconds since the epoch of its last confirmation (NaN: no usable date)."""
        self._recency: np.ndarray | None = None
        self._recency_values: dict[float, np.ndarray] = {}
        self._dates: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._hub: tuple[np.ndarray, np.ndarray] | None = None
        self._entities: EntityIndex | None = None
        self.rule_masks: dict[RecallRule, np.ndarray] = {}
        """Per recall rule, the facts it names (filled on first use)."""
        self._manual: tuple[Fact, ...] | None = None
        self._threads: np.ndarray | None = None
        self.queryless_choices: dict[
            tuple[QuerylessParams, int], tuple[np.ndarray | None, QuerylessChoice]
        ] = {}
        """The query-less choices made on this revision, per (params, k), with the ``dense``
        they were made with: the choice does not depend on the message, so ``get_context``
        calls after the first cost a look-up (filled by the selector)."""

    @property
    def threads(self) -> np.ndarray:
        """Per fact, a number for the conversation (``source``) it was learnt in; -1 when it has
        none (typed by a person, imported). Built on first use."""
        if self._threads is None:
            numbers: dict[str, int] = {}
            self._threads = np.array(
                [
                    numbers.setdefault(f.source, len(numbers)) if f.source else -1
                    for f in self.facts
                ],
                dtype=np.int64,
            )
        return self._threads

    def manual_facts(self) -> tuple[Fact, ...]:
        """The user's own (manual) facts among these, found once per revision: manual
        precedence asks for them on every model call, and scanning 10,000 facts for them took
        0.4 ms of a 0.8 ms selection."""
        if self._manual is None:
            self._manual = tuple(f for f in self.facts if f.manual)
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
        if self._entities is None:
            self._entities = EntityIndex(
                [(*f.entities, *extract_entities(f.content)) for f in self.facts]
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
        if self._dates is None:
            n = len(self.facts)
            start = np.full(n, math.nan)
            end = np.full(n, math.nan)
            learnt = np.full(n, math.nan)
            for i, fact in enumerate(self.facts):
                period = event_date_range(fact.eventAt)
                if period is not None:
                    start[i], end[i] = period[0].timestamp(), period[1].timestamp()
                moment = epoch_seconds(fact.createdAt)
                if moment is not None:
                    learnt[i] = moment
            self._dates = (start, end, learnt)
        return self._dates
