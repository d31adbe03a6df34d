"""pytest plugin: DeerFlow's own tests, run with this package's backend in DeerMem's place.

Loaded into DeerFlow's test run (``pytest -p tests.deerflow_host.ours_in_deermems_place``),
never into DeerFlow's tree: wherever DeerFlow resolves a memory backend by name or by config
(``memory.manager_class``: the default ``deermem``, or a dotted path to DeerMem's class), its
resolver returns :class:`~deermem_middleware.deerflow.DeermemMemoryManager` instead. Tests that
import DeerMem's classes directly still test DeerMem: they do not select a backend.

The tests that resolved our backend are listed in the file ``$DEERMEM_REACHED_FILE`` names (one
node id a line), so the CI job can say how many of DeerFlow's tests reached it. A manager
DeerFlow drops (``reset_memory_manager``) is closed, and the last one at the end of the run, so
no engine threads outlive the tests that built them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

_reached: set[str] = set()
_current: list[str] = [""]
_ours: list[type[Any]] = []


def pytest_configure(config: pytest.Config) -> None:
    from deerflow.agents.memory import manager as factory

    from deermem_middleware.deerflow import DeermemMemoryManager

    deermem = factory._scan_backends().get("deermem")
    if deermem is None:
        raise pytest.UsageError("DeerFlow has no 'deermem' backend to put ours in place of")
    resolve = factory._resolve_manager_class
    reset = factory.reset_memory_manager

    def resolve_ours(manager_class: str) -> type[Any]:
        cls = resolve(manager_class)
        if cls is not deermem:
            return cls
        _reached.add(_current[0])
        return DeermemMemoryManager

    def reset_and_close() -> None:
        current = factory._memory_manager
        reset()
        if isinstance(current, DeermemMemoryManager):
            current.close()

    factory._resolve_manager_class = resolve_ours
    factory.reset_memory_manager = reset_and_close
    _ours.append(DeermemMemoryManager)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current[0] = item.nodeid


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _ours:
        return
    from deerflow.agents.memory import manager as factory

    current = factory._memory_manager
    if isinstance(current, _ours[0]):
        current.close()
    path = os.environ.get("DEERMEM_REACHED_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            out.write("".join(f"{nodeid}\n" for nodeid in sorted(_reached) if nodeid))


def pytest_report_header(config: pytest.Config) -> str:
    return "memory backend: deermem_middleware.deerflow:DeermemMemoryManager in DeerMem's place"
