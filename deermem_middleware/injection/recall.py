"""What is injected for a conversation, and why: the guaranteed facts, the relevance picks and the
rendered block (pure over a loaded document; the engine loads it once per model call).

Between choosing and rendering, the user's own (manual) facts take precedence over extracted facts
that conflict with them (:mod:`deermem_middleware.retrieval.precedence`): what the user wrote by
hand holds until the user changes it, whatever an extraction's category or confidence."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import UTC, datetime

from langchain_core.messages import BaseMessage

from deermem_middleware.config import MemoryConfig
from deermem_middleware.injection.render import RenderedMemory, render_memory
from deermem_middleware.injection.tokens import make_token_counter
from deermem_middleware.memory.conversation import filter_messages
from deermem_middleware.memory.decay import last_confirmed
from deermem_middleware.memory.document import SECTION_FIELDS, Memory
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
    ) -> list[ScoredFact]:
        """The facts of ``memory`` most relevant to the conversation, best first."""
        if not memory.facts:
            return []
        turns = filter_messages(messages, max_message_chars=self.config.max_message_chars)
        query = SelectionQuery.from_turns(turns, self.config.query_turns)
        return self.selector.select(key, memory, query, top_k=top_k)

    def explain(
        self, key: Hashable, memory: Memory, messages: Sequence[BaseMessage]
    ) -> RenderedMemory:
        """The block for the conversation and what is in it (see
        :func:`~deermem_middleware.injection.render.render_memory`)."""
        if not memory.facts and not any(memory.section(n).summary for n in SECTION_FIELDS):
            return RenderedMemory("")
        guaranteed = self.guaranteed(memory)
        skip = {g.fact.id for g in guaranteed}
        top_k = self.config.top_k
        selected = [
            s
            for s in self.select(key, memory, messages, top_k + len(skip))
            if s.fact.id not in skip
        ][:top_k]
        manual = self.selector.lexical_index(key, memory).manual_facts() if memory.facts else ()
        chosen = manual_precedence(guaranteed, selected, manual)
        return render_memory(
            memory,
            chosen.selected,
            max_tokens=self.config.max_injection_tokens,
            count_tokens=self.count_tokens,
            guaranteed=chosen.guaranteed,
            guaranteed_tokens=self.config.guaranteed_token_budget,
            show_dates=self.config.show_fact_dates,
        )
