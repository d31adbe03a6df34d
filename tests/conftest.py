"""Shared fixtures."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from deermem_middleware import MemoryConfig
from tests.deerflow_contract_model import CONTRACT, CONTRACT_MODULE, forget_deerflow_modules

# tests/deerflow_host/ runs against DeerFlow installed for real (Python 3.12, its own lock):
# `.ci/deerflow.sh` runs it in that environment; elsewhere there is no DeerFlow to run it on.
# tests/deerflow_patched/ needs a DeerFlow pull request applied: only that CI job runs it.
collect_ignore = ["deerflow_patched"]
if not importlib.util.find_spec("deerflow"):
    collect_ignore.append("deerflow_host")


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


@pytest.fixture
def contract(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Our model of DeerFlow's contract module, importable as ``deerflow`` for this test."""
    forget_deerflow_modules()
    monkeypatch.syspath_prepend(str(CONTRACT))
    yield importlib.import_module(CONTRACT_MODULE)
    forget_deerflow_modules()
