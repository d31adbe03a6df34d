"""The engine's public surface: adapters call :data:`MemoryService.PUBLIC_SURFACE` and nothing else.

The adapters — the middleware, the node pair, the DeerFlow backend, the web console, the
``deermem`` command — are read as source (``ast``): every attribute read from a value that is a
:class:`MemoryService` must be on the declared surface. What counts as an engine, thoroughly
rather than cleverly: names annotated ``MemoryService`` (parameters, assignments), the names
``service``/``engine``/``_service``, any ``.service`` / ``._service`` attribute, what
``MemoryService(...)``/``MemoryService.acquire(...)`` return, and what any function of the
package annotated to return a ``MemoryService`` (alone, in a tuple, a list or an iterator)
returns — assigned, unpacked, iterated or used directly. A reach-in is reported as file:line.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deermem_middleware import MemoryConfig, MemoryMiddleware, MemoryService
from deermem_middleware.runtime.surface import PUBLIC_SURFACE

PACKAGE = Path(__file__).resolve().parents[3] / "deermem_middleware"
ADAPTERS = sorted(
    [
        PACKAGE / "middleware.py",
        PACKAGE / "nodes.py",
        *(PACKAGE / "deerflow").glob("*.py"),
        *(PACKAGE / "console").glob("*.py"),
        *(PACKAGE / "cli").glob("*.py"),
    ]
)
ENGINE_NAMES = frozenset({"service", "engine", "_service"})
ENGINE_ATTRIBUTES = frozenset({"service", "_service"})
DEPRECATED_PARTS = frozenset({"storage", "selector", "scheduler", "journal", "breaker"})
"""``MemoryMiddleware``'s deprecated accessors: the only functions allowed to read a part."""


def _mentions_engine(annotation: ast.expr | None) -> bool:
    return annotation is not None and "MemoryService" in ast.unparse(annotation)


def _is_engine_annotation(annotation: ast.expr | None) -> bool:
    """A name annotated as an engine (maybe None) — not a union with other kinds of object,
    which the code narrows with ``isinstance`` before use."""
    if annotation is None:
        return False
    text = ast.unparse(annotation).strip("'\"").replace(" ", "")
    return text in {"MemoryService", "MemoryService|None", "Optional[MemoryService]"}


def _engine_positions(annotation: ast.expr | None) -> set[int] | None:
    """Where a return annotation holds an engine: {-1} the value itself (or each item of a
    list/iterator of engines), {0, 2}: those items of a tuple; None: no engine."""
    if not _mentions_engine(annotation):
        return None
    assert annotation is not None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "tuple":
        items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
        return {i for i, item in enumerate(items) if _mentions_engine(item)}
    return {-1}


def _engine_returning_functions() -> dict[str, set[int]]:
    """Every function of the package annotated to return engines, by name."""
    found: dict[str, set[int]] = {"acquire": {-1}}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                positions = _engine_positions(node.returns)
                if positions is not None:
                    found.setdefault(node.name, set()).update(positions)
    return found


RETURNS_ENGINE = _engine_returning_functions()


@dataclass
class _Scope:
    names: set[str] = field(default_factory=set)


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _is_engine(node: ast.expr, names: set[str]) -> bool:
    """Whether the value of ``node`` is a MemoryService."""
    if isinstance(node, ast.Name):
        return node.id in names or node.id in ENGINE_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in ENGINE_ATTRIBUTES
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "MemoryService":
            return True
        called = _called_name(node)
        return called is not None and -1 in RETURNS_ENGINE.get(called, set())
    return False


def _bind(target: ast.expr, value: ast.expr, names: set[str]) -> None:
    """Record the names ``target = value`` (or ``for target in value``) binds to engines."""
    if isinstance(target, ast.Name) and _is_engine(value, names):
        names.add(target.id)
    elif isinstance(target, ast.Tuple):
        called = _called_name(value)
        positions = RETURNS_ENGINE.get(called, set()) if called is not None else set()
        for i, item in enumerate(target.elts):
            if isinstance(item, ast.Name) and i in positions:
                names.add(item.id)


def _bindings(function: ast.AST, inherited: set[str]) -> set[str]:
    """The names bound to engines in ``function`` (its parameters and body, two passes so an
    alias of an alias counts), plus those it sees from enclosing functions."""
    names = set(inherited)
    if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        args = function.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if _is_engine_annotation(arg.annotation):
                names.add(arg.arg)
    for _ in range(2):
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind(target, node.value, names)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if _is_engine_annotation(node.annotation) or (
                    node.value is not None and _is_engine(node.value, names)
                ):
                    names.add(node.target.id)
            elif isinstance(node, ast.For | ast.comprehension):
                iterable = node.iter
                if _is_engine(iterable, names) or (
                    isinstance(iterable, ast.Call)
                    and -1 in RETURNS_ENGINE.get(_called_name(iterable) or "", set())
                ):
                    _bind(node.target, ast.Name("engine"), names)
                    if isinstance(node.target, ast.Name):
                        names.add(node.target.id)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                _bind(node.optional_vars, node.context_expr, names)
    return names


def _deprecated_accessor(function: ast.AST | None) -> bool:
    """A ``MemoryMiddleware`` property that warns it is deprecated (``_deprecated(...)``)."""
    if not isinstance(function, ast.FunctionDef) or function.name not in DEPRECATED_PARTS:
        return False
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_deprecated"
        for n in ast.walk(function)
    )


def _reach_ins(source: str, where: str) -> Iterator[str]:
    tree = ast.parse(source)
    module_names = _bindings(tree, set())

    def visit(node: ast.AST, names: set[str], function: ast.AST | None) -> Iterator[str]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            names = _bindings(node, names)
            function = node
        if (
            isinstance(node, ast.Attribute)
            and node.attr not in PUBLIC_SURFACE
            and _is_engine(node.value, names)
            and not _deprecated_accessor(function)
        ):
            yield f"{where}:{node.lineno}: {ast.unparse(node)}"
        for child in ast.iter_child_nodes(node):
            yield from visit(child, names, function)

    yield from visit(tree, module_names, None)


def _all_reach_ins() -> list[str]:
    found: list[str] = []
    for path in ADAPTERS:
        where = str(path.relative_to(PACKAGE.parent))
        found.extend(_reach_ins(path.read_text(encoding="utf-8"), where))
    return found


def test_no_adapter_reaches_into_the_engines_parts() -> None:
    assert len(ADAPTERS) > 20  # the walk sees the adapters
    reach_ins = _all_reach_ins()
    assert not reach_ins, "adapters read engine attributes off its surface:\n" + "\n".join(
        reach_ins
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f(service: MemoryService):\n    return service._storage.load(s)\n",
        "def f(x):\n    return x.service.storage\n",
        "def f(mw):\n    return mw.service._selector\n",
        "def f(console):\n    service = console.service\n    return service.journal\n",
        "def f():\n    e = MemoryService.acquire(c)\n    return e._recall\n",
        "def f():\n    with _opened(a) as m:\n        return m._storage\n",
        "def f(self):\n    engine, agent = self.agents.resolve(a)\n    return engine.updater\n",
        "def f(self):\n    for e in self.agents.engines():\n        e._breaker.reset()\n",
        "def f(self):\n    return self._engine(u, a)._selector\n",
        "class M:\n    def f(self):\n        return self.service._scheduler\n",
    ],
)
def test_the_walk_catches_each_way_of_holding_an_engine(source: str) -> None:
    """The check can fail: each of these holds an engine and reads a part."""
    assert list(_reach_ins(source, "example.py")), source


def test_the_walk_passes_public_calls_and_other_objects() -> None:
    source = (
        "def f(service: MemoryService, storage):\n"
        "    storage.load(s)\n"
        "    service.load(s)\n"
        "    return service.config.max_facts\n"
    )
    assert list(_reach_ins(source, "example.py")) == []


def test_a_reach_in_added_to_an_adapter_is_reported_with_its_line() -> None:
    path = PACKAGE / "deerflow" / "manager.py"
    source = path.read_text(encoding="utf-8")
    assert list(_reach_ins(source, "manager.py")) == []
    broken = source + "\n\ndef _peek(manager):\n    return manager.service._storage\n"
    lines = len(broken.splitlines())
    assert list(_reach_ins(broken, "manager.py")) == [
        f"manager.py:{lines}: manager.service._storage"
    ]


def test_the_declared_surface_is_exactly_the_engines_public_attributes(
    memory_config: MemoryConfig,
) -> None:
    engine = MemoryService(memory_config)
    try:
        public = {n for n in dir(engine) if not n.startswith("_")} - {"PUBLIC_SURFACE"}
        assert public == set(PUBLIC_SURFACE)
        assert MemoryService.PUBLIC_SURFACE is PUBLIC_SURFACE
    finally:
        engine.close()


def test_the_middlewares_old_part_accessors_warn_and_name_the_replacement(
    memory_config: MemoryConfig,
) -> None:
    middleware = MemoryMiddleware(memory_config)
    try:
        for name in sorted(DEPRECATED_PARTS):
            with pytest.warns(DeprecationWarning, match=rf"MemoryMiddleware\.{name} .*: use"):
                getattr(middleware, name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert middleware.config is middleware.service.config  # the surface: no warning
    finally:
        middleware.close()
