"""Unit tests are offline: any attempt to open an internet socket fails the test."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


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
