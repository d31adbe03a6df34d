"""What is injected for a conversation, and why: the guaranteed facts, the relevance picks and the
rendered block (pure over a loaded document; the engine loads it once per model call).

Between choosing and rendering, the user's own (manual) facts take precedence over extracted facts
that conflict with them (:mod:`deermem_middleware.retrieval.precedence`): what the user wrote by
hand holds until the user changes it, whatever an extraction's category or confidence."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from datetime import UTC, datetime

from langchain_core.messages import BaseMessage

from deermem_middleware.config import MemoryConfig
from deermem_middleware.injection.render import RenderedMemory, render_memory
from deermem_middleware.injection.tokens import make_token_counter
from deermem_middleware.memory.conversation import filter_messages
from deermem_middleware.memory.decay import last_confirmed
from deermem_middleware.memory.document import SECTION_FIELDS, Memory
from deermem_middleware.retrieval.index import FactIndex
from deermem_middleware.retrieval.precedence import manual_precedence
from deermem_middleware.retrieval.selector import FactSelector, ScoredFact, SelectionQuery

__all__ = ["Recall"]

_NEVER = datetime.min.replace(tzinfo=UTC)


class Recall:
    """Selection and rendering for one configuration (the selector caches indexes per key)."""

    def __init__(self, config: MemoryConfig, selector: FactSelector) -> None:
        self.config = config
        self.selector = selector
        self.count_tokens = make_token_counter(config.token_counting)

    def guaranteed(self, memory: Memory) -> list[ScoredFact]:
        """Active facts of the guaranteed categories (corrections), newest first."""
        categories = set(self.config.guaranteed_categories)
        if not categories or self.config.guaranteed_token_budget <= 0:
            return []
        chosen = [f for f in memory.facts if f.status == "active" and f.category in categories]
        chosen.sort(key=lambda f: last_confirmed(f) or _NEVER, reverse=True)
        return [ScoredFact(fact=f, score=1.0, relevance=0.0) for f in chosen]

    def select(
        self,
        key: Hashable,
        memory: Memory,
        messages: Sequence[BaseMessage],
        top_k: int | None = None,
        *,
        index: FactIndex | None = None,
    ) -> list[ScoredFact]:
        """The facts of ``memory`` most relevant to the conversation, best first (``index``:
        the index of ``memory`` when the caller has it)."""
        if not memory.facts:
            return []
        turns = filter_messages(messages, max_message_chars=self.config.max_message_chars)
        query = SelectionQuery.from_turns(turns, self.config.query_turns)
        if index is None:
            return self.selector.select(key, memory, query, top_k=top_k)
        return self.selector.select_from(index, query, top_k=top_k)

    def explain(
        self,
        key: Hashable,
        memory: Memory,
        messages: Sequence[BaseMessage],
        *,
        index: FactIndex | None = None,
    ) -> RenderedMemory:
        """The block for the conversation and what is in it (see
        :func:`~deermem_middleware.injection.render.render_memory`). ``index``: the index of
        ``memory`` (its stored verdicts are what the block reads; without it the selector's)."""
        if not memory.facts and not any(memory.section(n).summary for n in SECTION_FIELDS):
            return RenderedMemory("")
        if index is None and memory.facts:
            index = self.selector.index(key, memory)
        guaranteed = self.guaranteed(memory)
        skip = {g.fact.id for g in guaranteed}
        top_k = self.config.top_k
        selected = [
            s
            for s in self.select(key, memory, messages, top_k + len(skip), index=index)
            if s.fact.id not in skip
        ][:top_k]
        manual = index.manual_facts() if index is not None and memory.facts else ()
        chosen = manual_precedence(guaranteed, selected, manual)
        rendered = render_memory(
            memory,
            chosen.selected,
            max_tokens=self.config.max_injection_tokens,
            count_tokens=self.count_tokens,
            guaranteed=chosen.guaranteed,
            guaranteed_tokens=self.config.guaranteed_token_budget,
            show_dates=self.config.show_fact_dates,
            verdict=index.view.verdict if index is not None and index.view is not None else None,
        )
        if chosen.withheld:
            picks = {s.fact.id: s for s in (*guaranteed, *selected)}
            overruled = tuple((picks[f], rival) for f, rival in chosen.withheld if f in picks)
            return dataclasses.replace(rendered, overruled=overruled)
        return rendered
