"""Choosing the facts worth injecting: which of the user's facts matter for *this* message?

Measured on LoCoMo (``benchmarks/locomo_retrieval.py``), three choices carry the quality:

1. **Query the newest user message on its own.** Concatenating the last turns lets unrelated
   small talk dilute the query (−10 to −20 points); older turns only add a small, max-normalised
   share (``context_weight``), enough for follow-ups like "what about her sister?".
2. **Match word forms and scripts without spaces**: TF-IDF over character n-grams within word
   boundaries (3–5, sublinear tf) matches "paint"/"painting" and Chinese or Japanese text, where a
   word tokenizer scores every fact 0.
3. **Meaning, when available**: an optional embedding channel
   (:mod:`deermem_middleware.retrieval.embeddings`), fused ``lexical_weight`` : (1 −
   ``lexical_weight``) after min–max scaling of each channel.

Confidence is a tie-breaker (``confidence_weight`` 0.05), not 40 % of the score: with confidences
between 0.7 and 1.0 the seed's 0.4 weight let unrelated sure facts push out relevant ones. It is
the *decayed* confidence (:mod:`deermem_middleware.memory.decay`): age lowers a fact's rank, it
never removes it from the candidates.

**The time route.** A question about time
(:func:`~deermem_middleware.memory.time.query_time_intent`) adds ``time_weight`` × a bonus in [0, 1]
per fact: a period it names ("last month", "in May 2023") favours facts whose event date — or,
without one, whose learnt date — falls in it; "now", "currently", "recently" favour recently learnt
or confirmed facts, so the current value of something that changed ranks above the stale one even
when the extraction did not link them; "when…" slightly favours facts that know their date.

The seed formula stays available (``selection: seed``): word TF-IDF cosine to the last turns
concatenated × 0.6 + confidence × 0.4.

**Nothing to match** (a blank message and no turns before it: DeerFlow's ``get_context`` before
the thread's first message): ``deermem`` makes the query-less choice of
:mod:`deermem_middleware.retrieval.queryless` instead — guaranteed categories, then specific,
used, recent and sure facts spread over topics (LoCoMo dev, no question: hit@15 13.3 lexical,
13.9 with embeddings, against 6.8 for the blank-query formula and 7.4 for random picks).

Speed: everything the index needs of each fact — its n-grams, entities and vector, and the
screen's verdict the block reads — is derived when the fact is written and stored with the
document (:mod:`deermem_middleware.derived`), so the index of a revision is built from stored
arrays; the index is cached per (scope, revision). A query touches only the matrix columns of
its own n-grams, and embeds the newest user message only (one embedding per message: the older
turns' share is lexical).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from threadpoolctl import ThreadpoolController

from deermem_middleware.derived.derive import Deriver, derive
from deermem_middleware.derived.view import DerivedView
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.time import TimeIntent
from deermem_middleware.retrieval.bonuses import _about_the_present
from deermem_middleware.retrieval.embeddings import EmbeddingStore, embedding_identity
from deermem_middleware.retrieval.index import FactIndex
from deermem_middleware.retrieval.lexical import CharNgramIndex
from deermem_middleware.retrieval.params import SelectionParams, SelectionQuery
from deermem_middleware.retrieval.queryless import choose_queryless, is_queryless
from deermem_middleware.retrieval.ranking import (
    _NO_INTENT,
    ScoredFact,
    _cached_intent,
    newer_competitors_first,
    rank,
    rank_diverse,
    route_hits,
    score_facts,
    scored_facts,
)
from deermem_middleware.retrieval.routes import GUARANTEED, QUERYLESS

__all__ = ["FactSelector", "ScoredFact", "SelectionParams", "SelectionQuery"]

logger = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


_BLAS: list[ThreadpoolController] = []
_BLAS_LOCK = threading.Lock()


def one_blas_thread() -> AbstractContextManager[object]:
    """BLAS on one thread while a selection scores (a 384-wide product per fact): OpenBLAS
    threads spin after each call and, on 2 cores, took the CPU from the embedding engine's next
    query — measured, 31.8 ms per warm model call at 1,000 facts against 14.2 ms on one BLAS
    thread (the embedding itself: ~10 ms). 6 µs a call."""
    with _BLAS_LOCK:
        if not _BLAS:
            _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


class _Entry:
    """One cached index: the document it was built from, the revision it belongs to (None:
    known by the document's identity only) and the index."""

    __slots__ = ("index", "memory", "revision")

    def __init__(self, memory: Memory, revision: int | None, index: FactIndex) -> None:
        self.memory = memory
        self.revision = revision
        self.index = index

    def serves(self, memory: Memory | None, revision: int | None) -> bool:
        if revision is not None and self.revision is not None:
            return revision == self.revision
        return memory is not None and memory is self.memory


class FactSelector:
    """Selects facts for a conversation; what the middleware, the nodes and the benchmark use.

    Indexes are cached per scope key, for one revision of the scope's document each (or, for a
    document handed in without a revision, as long as the same object comes back: documents
    are frozen). An index is built from the revision's derived snapshot when there is one
    (:class:`~deermem_middleware.derived.view.DerivedView`); :meth:`prepare` derives it now
    (blocking) for a document that has none.
    """

    def __init__(
        self,
        params: SelectionParams | None = None,
        embeddings: EmbeddingStore | None = None,
        *,
        cache_size: int = 64,
        half_lives: Mapping[str, float] | None = None,
        clock: Callable[[], datetime] | None = None,
        deriver: Deriver | None = None,
    ) -> None:
        self.params = params or SelectionParams()
        self.clock: Callable[[], datetime] = clock or _utc_now
        """Decay and the periods questions name ("last month") are measured against it."""
        self.embeddings = embeddings if self.params.method == "deermem" else None
        self.deriver = deriver or Deriver(
            embed=self.embeddings.embed_texts if self.embeddings is not None else None,
            embedding=(
                embedding_identity(self.embeddings.embeddings)
                if self.embeddings is not None
                else ""
            ),
        )
        """What derives a document's snapshot (the screen, and the embedding model if any)."""
        self.half_lives: Mapping[str, float] | None = half_lives
        self._cache_size = cache_size
        self._items: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def semantic(self) -> bool:
        """True when an embedding channel is configured."""
        return self.embeddings is not None

    def holds(self, key: Hashable) -> bool:
        """Whether an index of ``key`` is cached (of whatever revision)."""
        with self._lock:
            return key in self._items

    def cached(self, key: Hashable, revision: int) -> tuple[Memory, FactIndex] | None:
        """The document and index cached for ``key`` at ``revision``, or None."""
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry.revision != revision:
                return None
            self._items.move_to_end(key)
            return entry.memory, entry.index

    def index(
        self,
        key: Hashable,
        memory: Memory,
        *,
        view: DerivedView | None = None,
        revision: int | None = None,
    ) -> FactIndex:
        """The index of ``memory`` (cached under ``key`` for ``revision``, or for as long as
        the same document object comes back), built from ``view`` when given."""
        with self._lock:
            entry = self._items.get(key)
            if entry is not None and entry.serves(memory, revision):
                self._items.move_to_end(key)
                return entry.index
        if view is None:
            view = DerivedView.of(memory, None, self.deriver.made_by)
        index = FactIndex(
            view.facts,
            self.params.method,
            now=self.clock(),
            half_lives=self.half_lives,
            view=view,
        )
        with self._lock:
            self._items[key] = _Entry(memory, revision, index)
            self._items.move_to_end(key)
            while len(self._items) > self._cache_size:
                self._items.popitem(last=False)
        return index

    def prepare(self, key: Hashable, memory: Memory) -> FactIndex:
        """Derive ``memory``'s snapshot now (blocking: every verdict and vector) and index it;
        for documents that have none stored — tests, benchmarks, a warm-up."""
        with self._lock:
            entry = self._items.get(key)
            if (
                entry is not None
                and entry.memory is memory
                and entry.index.view is not None
                and entry.index.view.missing == 0
            ):
                return entry.index
        snapshot = derive(memory, (), self.deriver).snapshot
        view = DerivedView.of(memory, snapshot, self.deriver.made_by, exact=True)
        with self._lock:
            self._items.pop(key, None)
        return self.index(key, memory, view=view)

    def select(
        self,
        key: Hashable,
        memory: Memory,
        query: SelectionQuery | Sequence[Turn] | str,
        *,
        top_k: int | None = None,
    ) -> list[ScoredFact]:
        """The facts of ``memory`` most worth injecting for ``query``, best first."""
        if isinstance(query, str):
            query = SelectionQuery(query)
        elif not isinstance(query, SelectionQuery):
            query = SelectionQuery.from_turns(query, self.params.query_turns)
        index = self.index(key, memory)
        return self.select_from(index, query, top_k=top_k)

    def select_from(
        self, index: FactIndex, query: SelectionQuery, *, top_k: int | None = None
    ) -> list[ScoredFact]:
        """Like :meth:`select`, on an index you hold."""
        with one_blas_thread():
            return self._select_from(index, query, top_k)

    def _select_from(
        self, index: FactIndex, query: SelectionQuery, top_k: int | None
    ) -> list[ScoredFact]:
        k = self.params.top_k if top_k is None else top_k
        if k <= 0 or not len(index):
            return []
        if self.params.method == "deermem" and is_queryless(query.primary, query.context):
            return self._select_queryless(index, k)
        primary_vector = None
        store = self.embeddings
        if store is not None and index.dense is not None and query.primary.strip():
            try:  # one embedding per message: the older turns' share is lexical
                primary_vector = store.query(query.primary)
            except Exception:  # the store logs and answers None; anything else is a bug
                logger.exception("query embedding failed; selecting facts lexically")
                primary_vector = None
        intent = self._intent(query)
        parts = score_facts(
            index,
            query,
            self.params,
            primary_vector=primary_vector,
            intent=intent,
        )
        scores, relevance = parts.score, parts.relevance
        if parts.semantic is not None:
            picks = rank_diverse(
                index, scores, k, self.params.duplicate_similarity, self.params.duplicate_penalty
            )
        else:
            picks = rank(index, scores, k)
        moved: dict[int, int] = {}
        if _about_the_present(intent) and self.params.competitors > 0 and len(picks) > 1:
            if parts.semantic is not None and index.dense is not None:
                rows = index.dense[picks]
                similarity = rows @ rows.T
            elif isinstance(index.lexical, CharNgramIndex):
                similarity = index.lexical.pairwise([index.facts[i].content for i in picks])
            else:
                similarity = None
            if similarity is not None:
                picks, moved = newer_competitors_first(
                    picks,
                    similarity,
                    index.confirmed[picks],
                    self.params.competitors,
                    relevance[picks],
                )
        deermem = self.params.method == "deermem"
        routes = route_hits(parts, picks, k) if deermem else [()] * len(picks)
        return scored_facts(index, parts, picks, routes, moved)

    def _select_queryless(self, index: FactIndex, k: int) -> list[ScoredFact]:
        """Nothing to match (:func:`~deermem_middleware.retrieval.queryless.is_queryless`):
        the query-less choice, as scored facts. ``score`` is the query-less score, relevance
        and the query's channels are 0, and the routes say ``guaranteed`` (a guaranteed
        category) or ``queryless`` (with the score), plus ``usage`` when answers used it."""
        key = (self.params.queryless, k)
        cached = index.queryless_choices.get(key)
        if cached is not None and cached[0] is index.dense:
            choice = cached[1]
        else:  # once per revision (and again when the vectors arrive)
            choice = choose_queryless(index, self.params.queryless, k)
            index.queryless_choices[key] = (index.dense, choice)
        parts = choice.parts
        picked: list[ScoredFact] = []
        for i in choice.picks:
            routes: list[tuple[str, float]] = [
                (GUARANTEED, 1.0) if parts.guaranteed[i] else (QUERYLESS, float(parts.score[i]))
            ]
            if parts.usage[i] > 0:
                routes.append(("usage", float(parts.usage[i])))
            picked.append(
                ScoredFact(
                    fact=index.facts[i],
                    score=float(parts.score[i]),
                    relevance=0.0,
                    confidence=float(parts.confidence[i]),
                    bonuses=(
                        ("recency", float(parts.recency[i])),
                        ("usage", float(parts.usage[i])),
                    ),
                    routes=tuple(routes),
                )
            )
        return picked

    def _intent(self, query: SelectionQuery) -> TimeIntent:
        """What the newest message says about time (none for the seed's formula, or when the
        time route is off)."""
        if self.params.method != "deermem" or self.params.time_weight <= 0:
            return _NO_INTENT
        now = self.clock()
        day = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo or UTC)
        return _cached_intent(query.primary, day)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def close(self) -> None:
        if self.embeddings is not None:
            self.embeddings.close()
