"""Shared fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from deermem_middleware import MemoryConfig


@pytest.fixture
def memory_config(tmp_path: Path) -> MemoryConfig:
    """Defaults, files in a temp folder, and a debounce short enough for tests."""
    return MemoryConfig(
        storage_path=str(tmp_path / "memory"), debounce_seconds=0.05, max_wait_seconds=1.0
    )


@pytest.fixture(autouse=True)
def _deermem_debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="deermem_middleware")
    yield
