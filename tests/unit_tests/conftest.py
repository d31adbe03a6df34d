"""Unit tests are offline: any attempt to open an internet socket fails the test."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deermem_middleware.runtime.scheduler import DebounceScheduler

SAFETY = 10.0  # seconds: only ever a safety net against hangs


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise RuntimeError(f"unit tests must not open network connections (tried {address!r})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


@pytest.fixture(autouse=True)
def _lexical_selection_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests select facts lexically unless a test passes an ``Embeddings`` object itself
    (the offline embedding engine is exercised by the integration tests)."""
    monkeypatch.setenv("DEERMEM_EMBEDDINGS", "none")


@pytest.fixture
def make_scheduler() -> Iterator[Callable[..., DebounceScheduler[Any, Any]]]:
    """Build debounce schedulers that are always closed at the end of the test."""
    made: list[DebounceScheduler[Any, Any]] = []

    def make(handler: Callable[[Any, Any], None], **kwargs: Any) -> DebounceScheduler[Any, Any]:
        kwargs.setdefault("flush_on_exit_seconds", None)
        scheduler: DebounceScheduler[Any, Any] = DebounceScheduler(handler, **kwargs)
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.close(timeout=SAFETY)
