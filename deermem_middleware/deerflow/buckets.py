"""DeerFlow's per-agent fact buckets, as the gateway's calls change them.

Under DeerFlow's contract (``MemoryManager.clear_memory``; pull request #4594) the six summaries
are the user's, shared by all the user's agents, and facts are per agent. The engine composes
each (user, agent) document from the user's one document
(:mod:`~deermem_middleware.storage.shared_summaries`); what is left to the gateway's calls is
which change each one is when it names an agent:

- clear for one agent: :func:`facts_cleared` — its facts go, the shared summaries stay;
- clear for the whole user (no agent): every bucket and the summaries
  (:func:`~deermem_middleware.deerflow.gateway.cleared` on each);
- import for one agent: the agent's facts are replaced and the document's summaries become the
  user's (:func:`~deermem_middleware.deerflow.gateway.replacing`), as DeerMem does.
"""

from __future__ import annotations

from deermem_middleware.memory.document import Memory

__all__ = ["facts_cleared"]


def facts_cleared(memory: Memory, now: str) -> Memory:
    """One agent's memory cleared: no facts (nor a trim count), the user's summaries kept;
    threads' progress and the record of a carry-over kept, as a whole clear keeps them;
    ``memory`` itself when it holds no fact."""
    if not memory.facts and memory.trimmed is None:
        return memory
    return memory.model_copy(update={"facts": (), "trimmed": None, "lastUpdated": now})
