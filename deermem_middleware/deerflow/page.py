"""The Memory page's fact edits of the DeerFlow backend: add, edit, remove, and (DeerFlow PR
#4885) several at once.

A mixin of :class:`~deermem_middleware.deerflow.manager.DeermemMemoryManager`, kept apart so the
manager stays about DeerFlow's calls and this about what a person changes by hand. Each edit is
one change function (:mod:`~deermem_middleware.deerflow.edits`, pure) run by the manager's
``_write`` under the storage's compare-and-set loop: a batch is checked whole — every value,
then every id — before anything changes, so one bad item changes nothing. DeerFlow is not
imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deermem_middleware.deerflow import edits, gateway
from deermem_middleware.memory.document import Memory, new_fact_id
from deermem_middleware.storage.base import MemoryScope

__all__ = ["FactEdits"]


class FactEdits:
    """DeerFlow's fact methods over ``_scope`` and ``_write``, which the manager provides."""

    def _scope(self, user_id: str | None, agent_name: str | None) -> MemoryScope:
        raise NotImplementedError  # the manager's

    def _write(self, scope: MemoryScope, change: Callable[[Memory], Memory]) -> dict[str, Any]:
        raise NotImplementedError  # the manager's

    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Add a fact by hand (``manual``: extraction never changes or removes it; its
        ``source`` reads ``"manual"``). ValueError ``"content"`` (blank or too long),
        ``"confidence"`` or ``"Duplicate fact"``."""
        fact_id = new_fact_id()
        change = edits.adding(content, fact_id, category, confidence)
        return self._write(self._scope(user_id, agent_name), change), fact_id

    def delete_fact(
        self,
        fact_id: str,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Remove one fact; KeyError when the bucket has none with this id."""
        return self._write(self._scope(user_id, agent_name), edits.removing(fact_id))

    def update_fact(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Change the given fields of one fact, keep the others; the fact becomes ``manual``.
        KeyError when missing; ValueError like :meth:`create_fact`."""
        with gateway.fact_errors():  # bad values are refused before the fact is looked up
            change = edits.editing(fact_id, content, category, confidence)
        return self._write(self._scope(user_id, agent_name), change)

    def batch_update_facts(
        self,
        updates: list[dict[str, Any]],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Change several facts at once (DeerFlow PR #4885): each item a ``fact_id`` and the
        fields to change (``content``, ``category``, ``confidence``), applied like
        :meth:`update_fact`, all in one compare-and-set — every value is checked, then every
        id, before anything changes: one bad item changes nothing. 1 to 100 items. ValueError
        like :meth:`update_fact` (and ``"fact_id"``, ``"updates"``); KeyError naming the first
        missing fact."""
        with gateway.fact_errors():
            change = edits.editing_many(updates)
        return self._write(self._scope(user_id, agent_name), change)

    def batch_delete_facts(
        self,
        fact_ids: list[str],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Remove several facts at once (DeerFlow PR #4885), in one compare-and-set: every id
        is looked up before any fact is removed, so a missing one (KeyError naming it) removes
        nothing. 1 to 100 ids (ValueError ``"fact_ids"``)."""
        change = edits.removing_many(fact_ids)
        return self._write(self._scope(user_id, agent_name), change)
