"""The process's engines, one per configuration, reference-counted.

Hosts build their middleware per request (DeerFlow's ``extensions.middlewares`` does, and so do
web apps that call ``create_agent`` per request). With an engine per adapter, 21 runs once left
21 engines, and threads went from 4 to 64 and stayed there. Here adapters built with the same
configuration — and the very same model, storage and embeddings objects — share one engine: the
first builds it, each counts one user, and the last to release it closes it.

Two configurations are the same when their canonical JSON is: secrets count by digest (two API
keys are two engines), objects by identity (two model objects may differ in ways a config
cannot show).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

from deermem_middleware.config import MemoryConfig

__all__ = ["EngineRegistry", "engine_key"]


class _Engine(Protocol):
    @property
    def closed(self) -> bool: ...

    def close(self, timeout: float | None = ...) -> bool: ...


E = TypeVar("E", bound=_Engine)


def _identity(value: Any) -> Hashable:
    """What makes two adapters' argument "the same": equal text, or the very same object."""
    if value is None or isinstance(value, str):
        return ("value", value)
    return ("object", id(value))


def _plain(value: Any) -> Any:
    if hasattr(value, "get_secret_value"):
        secret = str(value.get_secret_value()).encode("utf-8", "backslashreplace")
        return {"secret": hashlib.blake2b(secret, digest_size=16).hexdigest()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def engine_key(config: MemoryConfig, *objects: Any) -> Hashable:
    """The configuration as canonical text (secrets by digest) plus the objects' identities."""
    text = json.dumps(_plain(config.model_dump()), sort_keys=True, default=str)
    return (text, *(_identity(o) for o in objects))


class EngineRegistry:
    """Engines by key, with how many users each has. Thread-safe."""

    def __init__(self) -> None:
        self._engines: dict[Hashable, Any] = {}
        self._users: dict[int, int] = {}
        self._keys: dict[int, Hashable] = {}
        self._lock = threading.Lock()

    def acquire(self, key: Hashable, build: Callable[[], E]) -> E:
        """The live engine under ``key`` (built by ``build`` if none), with one more user."""
        with self._lock:
            engine = self._engines.get(key)
            if engine is None or engine.closed:
                if engine is not None:  # closed directly, not released: forget it
                    self._users.pop(id(engine), None)
                    self._keys.pop(id(engine), None)
                engine = build()
                self._engines[key] = engine
                self._keys[id(engine)] = key
                self._users[id(engine)] = 0
            self._users[id(engine)] += 1
            return engine

    def users(self, engine: object) -> int:
        """How many users share ``engine`` (0: a private one, or all released)."""
        with self._lock:
            return self._users.get(id(engine), 0)

    def release(self, engine: E, timeout: float | None) -> bool:
        """One user fewer; the last one closes ``engine``. True when nothing was left pending
        (or others still use it)."""
        with self._lock:
            users = max(0, self._users.get(id(engine), 0) - 1)
            if users > 0:
                self._users[id(engine)] = users
                return True
            self._users.pop(id(engine), None)
            key = self._keys.pop(id(engine), None)
            if key is not None and self._engines.get(key) is engine:
                del self._engines[key]
        return engine.close(timeout)


ENGINES = EngineRegistry()
"""The process-wide registry that :meth:`MemoryService.acquire` uses."""
