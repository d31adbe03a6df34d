"""Our model of DeerFlow's memory backend contract (``deerflow.agents.memory.manager``).

Modelled on DeerFlow HEAD (f1f4af9) with its open memory pull requests that change the
contract applied: #4732 (``get_context``/``aget_context`` take an optional ``query``, which the
host passes only to a backend with ``supports_query_aware_context``) and #4885
(``batch_update_facts``, ``batch_delete_facts``). :data:`PULL_REQUEST_ADDITIONS` names what they
add, so a test can check this model against DeerFlow's file without them too. The names, fields,
method signatures, defaults and the validation rule a backend meets at construction are
DeerFlow's; the bodies are the defaults DeerFlow documents (``NotImplementedError`` for
unsupported management operations, no-ops for hooks). What DeerFlow's factory does around a
backend is :func:`build_memory_manager`.
"""

from __future__ import annotations

import importlib
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PULL_REQUEST_ADDITIONS: dict[int, dict[str, tuple[str, ...]]] = {
    4732: {
        "parameters": ("get_context.query", "aget_context.query"),
        "attributes": ("supports_query_aware_context",),
    },
    4885: {"methods": ("batch_delete_facts", "batch_update_facts")},
}
"""What each modelled pull request adds to DeerFlow's ``MemoryManager`` (``method.parameter``
for parameters); not in DeerFlow's file until it is merged."""


class MemoryCallbacks:
    """Observability hooks a host gives its backend (no-ops by default)."""

    def on_memory_llm_call(
        self,
        invoke_config: dict[str, Any],
        *,
        thread_id: str | None,
        user_id: str | None,
        trace_id: str | None,
        model_name: str | None,
    ) -> None:
        """Before the backend calls its model: may add tracing metadata to ``invoke_config``."""

    def on_memory_llm_result(
        self,
        invoke_config: dict[str, Any],
        *,
        prompt: Any,
        response: Any,
        error: BaseException | None,
        duration_ms: float,
        model_name: str | None,
    ) -> None:
        """After the backend's model call, successful or not."""


class MemoryManagerError(RuntimeError):
    """Base of the errors a backend raises at the contract's boundary."""


class MemoryConflictError(MemoryManagerError):
    """A write lost an optimistic-concurrency race (the gateway answers 409)."""


class MemoryCorruptionError(MemoryManagerError):
    """Stored memory cannot be read safely (the gateway answers 500)."""


def _unsupported(manager: MemoryManager, operation: str) -> NotImplementedError:
    return NotImplementedError(f"{operation} not supported by {type(manager).__name__}")


class MemoryManager(BaseModel):
    """What every DeerFlow memory backend is: a pydantic model with abstract ``add``,
    ``get_context`` and ``from_config``; management operations and hooks with defaults."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backend_config: dict[str, Any] = Field(default_factory=dict)
    mode: Literal["middleware", "tool"] = "middleware"
    callbacks: MemoryCallbacks | None = None

    supports_search: ClassVar[bool] = False
    requires_passive_writes_in_tool_mode: ClassVar[bool] = False
    # PR #4732: opt-in, so a backend without it never receives a ``query`` keyword
    supports_query_aware_context: ClassVar[bool] = False

    @field_validator("backend_config", mode="before")
    @classmethod
    def _coerce_backend_config(cls, value: Any) -> dict[str, Any]:
        return value or {}

    @model_validator(mode="after")
    def _check_invariants(self) -> MemoryManager:
        """``supports_search`` must say whether ``search`` is overridden; tool mode needs it."""
        overridden = type(self).search is not MemoryManager.search
        if type(self).supports_search != overridden:
            raise ValueError(
                f"{type(self).__name__}.supports_search={type(self).supports_search} does not "
                f"match search() being {'overridden' if overridden else 'inherited'}"
            )
        if self.mode == "tool" and not overridden:
            raise ValueError(f"mode='tool' needs search(); {type(self).__name__} has none")
        return self

    # -- tier 1 -------------------------------------------------------------------------------
    @abstractmethod
    def add(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """Queue a conversation (raw messages) for a debounced memory update."""

    @abstractmethod
    def get_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
        query: str | None = None,
    ) -> str:
        """Text to inject (the host wraps it in ``<memory>``). ``query`` (PR #4732): the
        turn's user message, passed only when ``supports_query_aware_context``."""

    # -- tier 2 -------------------------------------------------------------------------------
    def add_nowait(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        self.add(thread_id, messages, agent_name=agent_name, user_id=user_id)

    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        raise _unsupported(self, "search")

    def get_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "get_memory")

    def delete_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> None:
        raise _unsupported(self, "delete_memory")

    def clear_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "clear_memory")

    def import_memory(
        self,
        memory_data: dict[str, Any],
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "import_memory")

    def export_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "export_memory")

    def shutdown_flush(self, timeout: float) -> bool:
        """Drain pending updates within a hard ``timeout``; True only when drained."""
        return True

    # -- tier 3 -------------------------------------------------------------------------------
    def warm(self) -> bool | None:
        """True: warmed; False: warming failed; None: nothing to warm."""
        return None

    def reload_memory(
        self,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "reload_memory")

    def create_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 0.5,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        raise _unsupported(self, "create_fact")

    def delete_fact(
        self,
        fact_id: str,
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        raise _unsupported(self, "delete_fact")

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
        raise _unsupported(self, "update_fact")

    # PR #4885
    def batch_delete_facts(
        self,
        fact_ids: list[str],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Delete several facts by id; the memory without them."""
        raise _unsupported(self, "batch_delete_facts")

    def batch_update_facts(
        self,
        updates: list[dict[str, Any]],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Update several facts (``fact_id`` plus optional ``content``, ``category``,
        ``confidence`` each); the memory with them."""
        raise _unsupported(self, "batch_update_facts")

    def on_pre_compress(self, messages: list[Any]) -> str:
        return ""

    def on_turn_start(self, turn_number: int, message: Any, **kwargs: Any) -> None:
        return None

    # -- async (delegate to the sync methods by default) --------------------------------------
    async def aadd(
        self,
        thread_id: str,
        messages: list[Any],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        return self.add(
            thread_id, messages, agent_name=agent_name, user_id=user_id, trace_id=trace_id
        )

    async def aget_context(
        self,
        user_id: str | None,
        *,
        agent_name: str | None = None,
        thread_id: str | None = None,
        query: str | None = None,
    ) -> str:
        kwargs: dict[str, Any] = {"agent_name": agent_name, "thread_id": thread_id}
        if query is not None and type(self).supports_query_aware_context:
            kwargs["query"] = query
        return self.get_context(user_id, **kwargs)

    async def asearch(
        self,
        query: str,
        top_k: int = 5,
        *,
        user_id: str | None = None,
        agent_name: str | None = None,
        category: str | None = None,
    ) -> list[dict[str, Any]]:
        return self.search(query, top_k, user_id=user_id, agent_name=agent_name, category=category)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def from_config(
        cls,
        backend_config: dict[str, Any],
        *,
        mode: Literal["middleware", "tool"] = "middleware",
        **host_hooks: Any,
    ) -> MemoryManager:
        """Build a wired backend from its config and the host's hooks."""

    def close(self) -> None:
        return None


def _resolve_manager_class(manager_class: str) -> type[MemoryManager]:
    """``memory.manager_class`` as a class: ``"pkg.mod:Cls"`` or ``"pkg.mod.Cls"`` (this model
    has no registered short names). ValueError when it is not a ``MemoryManager`` subclass."""
    if ":" in manager_class:
        module_path, _, attr = manager_class.partition(":")
    else:
        module_path, _, attr = manager_class.rpartition(".")
    problem = "not a 'pkg.mod:Cls' path"
    if module_path and attr:
        try:
            module = importlib.import_module(module_path)
        except ImportError as exc:
            problem = f"cannot import module {module_path!r}: {exc}"
        else:
            cls = getattr(module, attr, None)
            if isinstance(cls, type) and issubclass(cls, MemoryManager):
                return cls
            problem = f"{manager_class!r} resolved to {cls!r}, not a MemoryManager"
    raise ValueError(f"memory.manager_class={manager_class!r}: {problem}")


def default_host_hooks(
    host_llm_factory: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments DeerFlow's factory passes to ``from_config`` (stand-ins)."""
    return {
        "callbacks": MemoryCallbacks(),
        "should_keep_hidden_message": lambda additional_kwargs: False,
        "trace_context_manager": None,
        "host_llm_factory": host_llm_factory or (lambda: None),
        "extraction_callback": lambda payload: None,
    }


def build_memory_manager(
    manager_class: str,
    backend_config: dict[str, Any] | None,
    *,
    runtime_home: str | Path,
    mode: Literal["middleware", "tool"] = "middleware",
    host_hooks: dict[str, Any] | None = None,
) -> MemoryManager:
    """What DeerFlow's ``get_memory_manager`` does, without its singleton: resolve the class,
    default ``storage_path`` to the host's state folder (a relative one resolves against it),
    then ``cls.from_config(backend_config, mode=mode, **host_hooks)``."""
    cls = _resolve_manager_class(manager_class)
    config = dict(backend_config or {})
    storage_path = config.get("storage_path")
    if not storage_path:
        config["storage_path"] = str(runtime_home)
    elif not Path(storage_path).is_absolute():
        config["storage_path"] = str((Path(runtime_home) / storage_path).resolve())
    hooks = default_host_hooks() if host_hooks is None else host_hooks
    return cls.from_config(config, mode=mode, **hooks)
