"""The package's import graph: no cycles between modules, no import from a lower layer to a higher.

Computed from the source with :mod:`ast`, not by importing it, so the test sees every import the
code can make: module-level imports *and* imports inside functions (a function-level import only
postpones a cycle to the first call; it does not remove it). Imports under ``if TYPE_CHECKING:``
are left out — they never run, and annotations naming a higher layer's type are not a
dependency. Relative imports are resolved, and ``from pkg import name`` where ``name`` is a
submodule counts as importing that submodule.

The layers, lowest first. A module may import its own sub-package and any lower layer; sub-packages
that share a layer may import each other (the module-level cycle check still applies):

- ``screen``: the instruction screen (pure text classification; it knows nothing else);
- ``memory``: the document and its algebra (pure);
- ``formats``: documents from outside — DeerFlow's files and paths, our interchange, repair,
  import — which know only the document;
- ``config``: the configuration (it finds DeerFlow's config by DeerFlow's paths);
- ``storage``: the storage contract and its backends (lenient reading uses ``formats.repair``,
  the DeerFlow carry-over ``formats.importing``);
- ``retrieval``, ``extraction``, ``injection``, ``derived``: scoring and selection, the LLM's
  update, what is put into the prompt, and what reads need of each fact, derived when it is
  written;
- ``runtime``: the engine (:class:`~deermem_middleware.runtime.service.MemoryService`);
- ``deerflow``, ``console``, ``cli``, ``middleware``, ``nodes``, ``testing``: the adapters and
  the helpers for hosts' tests;
- the top-level package ``deermem_middleware`` (its ``__init__``) above everything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "deermem_middleware"
ROOT = Path(__file__).resolve().parents[3] / PACKAGE

LAYERS: tuple[tuple[str, ...], ...] = (
    ("screen",),
    ("memory",),
    ("formats",),
    ("config",),
    ("storage",),
    ("retrieval", "extraction", "injection", "derived"),
    ("runtime",),
    ("deerflow", "console", "cli", "middleware", "nodes", "testing"),
    ("",),  # the top-level package itself
)
"""Sub-packages (or top-level modules) of :data:`PACKAGE`, lowest layer first."""


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    file: Path
    line: int

    def where(self) -> str:
        return f"{self.file.relative_to(ROOT.parent)}:{self.line}"


def _modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name → (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node`` (functions and classes included), except those in
    the body of ``if TYPE_CHECKING:`` (its ``else`` runs, so it is kept)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for statement in child.orelse:
                if isinstance(statement, ast.Import | ast.ImportFrom):
                    yield statement
                yield from _import_nodes(statement)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _import_nodes(child)


def _owner(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module ``name`` is, or the closest enclosing one (``pkg.mod.attr`` → ``pkg.mod``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path = ROOT) -> list[Import]:
    """Every import from one module of the package to another (itself excluded)."""
    modules = _modules(root)
    edges: list[Import] = []
    for module, (path, is_package) in modules.items():
        package = module if is_package else module.rpartition(".")[0]
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [t for a in node.names if (t := _owner(a.name, modules))]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    parent = ".".join([*base, node.module] if node.module else base)
                else:
                    parent = node.module or ""
                if parent != PACKAGE and not parent.startswith(PACKAGE + "."):
                    continue
                names = [f"{parent}.{a.name}" for a in node.names]
                submodules = [n for n in names if n in modules]
                targets = submodules
                if len(submodules) < len(names) and (owner := _owner(parent, modules)):
                    targets.append(owner)
            edges.extend(
                Import(module, target, path, node.lineno) for target in targets if target != module
            )
    return edges


def find_cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the layer ``module`` belongs to."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    for level, members in enumerate(LAYERS):
        if top in members:
            return level
    raise AssertionError(f"{module}: sub-package {top!r} is in no layer of LAYERS")


def upward_imports(edges: list[Import]) -> list[Import]:
    return [e for e in edges if layer_of(e.source) < layer_of(e.target)]


def _describe_cycle(component: list[str], edges: list[Import]) -> str:
    members = set(component)
    inside = [e for e in edges if e.source in members and e.target in members]
    lines = [f"  {e.where()}: {e.source} -> {e.target}" for e in inside]
    return " <-> ".join(component) + "\n" + "\n".join(lines)


def test_the_graph_sees_the_package() -> None:
    edges = import_graph()
    sources = {e.source for e in edges}
    # the engine imports storage; a function-level import is seen; every module has a layer
    assert any(
        e.source == f"{PACKAGE}.runtime.service" and e.target == f"{PACKAGE}.storage.base"
        for e in edges
    )
    assert f"{PACKAGE}.cli" in sources
    for module in _modules():
        layer_of(module)


def test_no_import_cycles_between_modules() -> None:
    edges = import_graph()
    cycles = find_cycles(edges)
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(
        _describe_cycle(c, edges) for c in cycles
    )


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    upward = upward_imports(import_graph())
    assert not upward, f"{len(upward)} upward import(s):\n" + "\n".join(
        f"  {e.where()}: {e.source} (layer {layer_of(e.source)}) imports {e.target} "
        f"(layer {layer_of(e.target)})"
        for e in upward
    )


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """A cycle hidden in a function and an upward import are both reported."""
    package = tmp_path / PACKAGE
    (package / "memory").mkdir(parents=True)
    (package / "config").mkdir()
    (package / "__init__.py").write_text("")
    (package / "memory" / "__init__.py").write_text("")
    (package / "config" / "__init__.py").write_text("")
    (package / "memory" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from deermem_middleware.config import loading\n"
        "def f():\n    from . import b\n"
    )
    (package / "memory" / "b.py").write_text("from deermem_middleware.memory.a import f\n")
    (package / "config" / "loading.py").write_text("from ..memory import a\n")
    (package / "memory" / "c.py").write_text("import deermem_middleware.config.loading\n")
    edges = import_graph(package)
    assert find_cycles(edges) == [[f"{PACKAGE}.memory.a", f"{PACKAGE}.memory.b"]]
    upward = upward_imports(edges)
    assert [(e.source, e.target, e.line) for e in upward] == [
        (f"{PACKAGE}.memory.c", f"{PACKAGE}.config.loading", 1)
    ]
