"""pytest plugin: DeerFlow's own tests, run with this package's backend in DeerMem's place.

Loaded into DeerFlow's test run (``pytest -p tests.deerflow_host.ours_in_deermems_place``),
never into DeerFlow's tree. Before any test module is imported, DeerMem's class is replaced by
:class:`OursInDeerMemsPlace` (a :class:`~deermem_middleware.deerflow.DeermemMemoryManager` that
only counts and closes itself) in both places DeerFlow's tests get it from:

- DeerFlow's resolver: wherever DeerFlow resolves a memory backend by name or by config
  (``memory.manager_class``: the default ``deermem``, or a dotted path to DeerMem's class);
- DeerMem's module ``deerflow.agents.memory.backends.deermem.deer_mem``: a test that imports
  ``DeerMem`` from it and builds ``DeerMem(backend_config=...)`` itself (the gateway router's
  tests, the retrieval and storage tests) builds ours, and its ``isinstance`` checks see ours.

What still tests DeerMem itself: tests that import DeerMem's private modules (``deermem.core``,
``DeerMemConfig``, its queue and storage classes) — they do not build a backend — and tests that
reach into a DeerMem instance's private attributes, which ours do not have (listed, with the
reason, in ``tests/deerflow_host/expected_failures.toml``). The backend registry keeps DeerMem's
real class (``MANAGER_CLASS``), so resolving it is what is swapped, not what DeerFlow discovers.

The tests that built our backend (through the resolver or directly) are listed in the file
``$DEERMEM_REACHED_FILE`` names (one node id a line), so the CI job can say how many of
DeerFlow's tests reached it. A manager DeerFlow drops (``reset_memory_manager``) is closed, one
a test built itself is closed when the test ends, and the factory's last one at the end of the
run, so no engine threads outlive the tests that built them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

_reached: set[str] = set()
_current: list[str] = [""]
_ours: list[type[Any]] = []
_built: list[Any] = []
"""Our managers built during the current test (closed when it ends)."""
DEERMEM_MODULE = "deerflow.agents.memory.backends.deermem.deer_mem"


def _ours_in_deermems_place() -> type[Any]:
    from deermem_middleware.deerflow import DeermemMemoryManager

    class OursInDeerMemsPlace(DeermemMemoryManager):
        """Our backend where DeerFlow's tests expect DeerMem: counted, and closed after use.

        Built without a ``storage_path`` in a test that isolates DeerMem's zero-config storage
        with DeerMem's ``$DEERMEM_DATA_DIR``, it is given that folder as its ``storage_path``
        (ours would otherwise share DeerFlow's default data folder across tests)."""

        def __init__(self, **data: Any) -> None:
            config = dict(data.get("backend_config") or {})
            isolated = os.environ.get("DEERMEM_DATA_DIR")
            if isolated and not config.get("storage_path"):
                data["backend_config"] = {**config, "storage_path": isolated}
            super().__init__(**data)

        def model_post_init(self, context: Any) -> None:
            super().model_post_init(context)
            _reached.add(_current[0])
            _built.append(self)

    return OursInDeerMemsPlace


def pytest_configure(config: pytest.Config) -> None:
    import importlib

    from deerflow.agents.memory import manager as factory

    deermem = factory._scan_backends().get("deermem")
    if deermem is None:
        raise pytest.UsageError("DeerFlow has no 'deermem' backend to put ours in place of")
    deer_mem = importlib.import_module(DEERMEM_MODULE)
    if deer_mem.DeerMem is not deermem:
        raise pytest.UsageError(f"{DEERMEM_MODULE}.DeerMem is not DeerFlow's 'deermem' backend")
    ours = _ours_in_deermems_place()
    resolve = factory._resolve_manager_class
    reset = factory.reset_memory_manager

    def resolve_ours(manager_class: str) -> type[Any]:
        cls = resolve(manager_class)
        return ours if cls is deermem else cls

    def reset_and_close() -> None:
        current = factory._memory_manager
        reset()
        if isinstance(current, ours):
            current.close()

    factory._resolve_manager_class = resolve_ours
    factory.reset_memory_manager = reset_and_close
    deer_mem.DeerMem = ours
    _ours.append(ours)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current[0] = item.nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    if not _ours:
        return
    from deerflow.agents.memory import manager as factory

    kept = factory._memory_manager
    while _built:
        manager = _built.pop()
        if manager is not kept:
            manager.close()


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
