"""Fixtures shared by the tests: a test config. The test doubles and prompt helpers (scripted and
marker chat models, the OpenAI stub, system_text) live in :mod:`deermem_middleware.testing`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deermem_middleware import MemoryConfig


def memory_config(tmp_path: Path, **overrides: Any) -> MemoryConfig:
    """A config for tests: files under ``tmp_path/memory``, an hour of debounce (tests flush),
    no flush at exit, no embeddings; ``overrides`` win."""
    values: dict[str, Any] = {
        "storage_path": str(tmp_path / "memory"),
        "debounce_seconds": 3600,
        "flush_on_exit_seconds": None,
        "embeddings": "none",
    }
    values.update(overrides)
    return MemoryConfig(**values)
