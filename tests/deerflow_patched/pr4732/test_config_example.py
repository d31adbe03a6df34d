"""DeerFlow #4732's own ``config.example.yaml`` loads in the two-line setup.

The pull request adds two host-level ``memory:`` keys (``session_injection_enabled``,
``turn_injection_enabled``). Our loader reads DeerFlow's ``config.yaml`` itself (the two-line
setup), so the example of the patched source — found from the ``deerflow`` package that is
imported, the patched copy — must load with ``manager_class`` set to our backend.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from deermem_middleware.config import load_memory_config
from tests.deerflow_host.conftest import deerflow_module

OURS = "deermem_middleware.deerflow:DeermemMemoryManager"


def patched_example() -> Path:
    """``config.example.yaml`` at the root of the DeerFlow source ``deerflow`` is imported from
    (``<root>/backend/packages/harness/deerflow``)."""
    package = Path(deerflow_module("deerflow").__file__).resolve().parent
    root = package.parents[3]
    example = root / "config.example.yaml"
    assert example.is_file(), f"no config.example.yaml at {root} (deerflow from {package})"
    return example


def test_the_patched_config_example_loads_with_our_manager_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    text = patched_example().read_text(encoding="utf-8")
    assert "session_injection_enabled:" in text and "turn_injection_enabled:" in text, (
        "deerflow is not the copy with DeerFlow #4732 applied"
    )
    assert text.count("  manager_class: deermem\n") == 1
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        text.replace("  manager_class: deermem\n", f"  manager_class: {OURS}\n"), encoding="utf-8"
    )
    monkeypatch.setenv("DEER_FLOW_HOME", str(tmp_path / "home"))
    caplog.set_level(logging.INFO, logger="deermem_middleware.config.loading")

    config = load_memory_config(config_file)

    assert config.enabled and config.injection_enabled
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    [info] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "memory.session_injection_enabled" in info
    assert "memory.turn_injection_enabled" in info
