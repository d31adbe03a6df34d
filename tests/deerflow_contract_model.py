"""Our model of DeerFlow's ``MemoryManager`` contract module, put on ``sys.path`` for a test.

DeerFlow cannot be installed here (it needs Python 3.12), so ``tests/deerflow_contract`` holds a
model of its ``deerflow.agents.memory.manager`` written from DeerFlow's file. The ``contract``
fixture (``tests/conftest.py``) makes it importable as ``deerflow`` for one test and forgets it
afterwards, with our manager module that imported it.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["CONTRACT", "CONTRACT_MODULE", "forget_deerflow_modules"]

CONTRACT = Path(__file__).resolve().parent / "deerflow_contract"
"""The folder to put on ``sys.path`` (it holds the ``deerflow`` package of our model)."""

CONTRACT_MODULE = "deerflow.agents.memory.manager"
DEERFLOW_IMPORTING = ("manager", "errors")
"""Our modules that import DeerFlow (forgotten with it)."""


def forget_deerflow_modules() -> None:
    """Drop ``deerflow`` and our modules that import it from ``sys.modules``."""
    for name in list(sys.modules):
        if name == "deerflow" or name.startswith("deerflow."):
            del sys.modules[name]
    package = sys.modules.get("deermem_middleware.deerflow")
    for name in DEERFLOW_IMPORTING:  # our modules that import DeerFlow
        sys.modules.pop(f"deermem_middleware.deerflow.{name}", None)
        if package is not None and name in vars(package):
            delattr(package, name)
