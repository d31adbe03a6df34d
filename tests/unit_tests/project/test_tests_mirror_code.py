"""The unit tests mirror the package: ``tests/unit_tests/<sub-package>/test_<module>.py``.

A test of ``deermem_middleware/retrieval/routes.py`` lives in
``tests/unit_tests/retrieval/test_routes.py`` (or ``test_routes_<aspect>.py`` when one module has
several suites), so the tests of a module are found from its path and a module without tests shows.
Two folders hold what no single module owns: ``behaviours/`` (suites over the whole engine: crashes,
hostile output, long horizons, the CLI end to end) and ``project/`` (the layout, docs and
benchmarks' reports).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "deermem_middleware"
UNIT = ROOT / "tests" / "unit_tests"
FREE = {"behaviours", "project"}
"""Folders of suites that belong to no one module."""


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.stem not in {"__init__", "__main__"}}


def misplaced_tests(unit: Path = UNIT, package: Path = PACKAGE) -> list[str]:
    """Test files whose folder is no sub-package, or whose name names no module in it."""
    wrong = []
    for test in sorted(unit.rglob("test_*.py")):
        where = test.parent.relative_to(unit)
        if where.parts and where.parts[0] in FREE:
            continue
        folder = package / where
        name = test.stem.removeprefix("test_")
        modules = _modules(folder) if folder.is_dir() else set()
        if not any(name == m or name.startswith(f"{m}_") for m in modules):
            wrong.append(
                f"{test.relative_to(unit.parent.parent)}: no module deermem_middleware/"
                f"{(where / name).as_posix()}.py (name it after the module it tests, or move it "
                f"to behaviours/)"
            )
    return wrong


def test_every_unit_test_file_is_named_after_a_module_in_its_folder() -> None:
    assert misplaced_tests() == []


def test_every_test_folder_is_a_package(tmp_path: Path) -> None:
    """Same-named files in two folders (``extraction/test_models.py``, …) need packages."""
    missing = [
        d.relative_to(UNIT).as_posix()
        for d in UNIT.rglob("*")
        if d.is_dir() and d.name != "__pycache__" and not (d / "__init__.py").exists()
    ]
    assert missing == []


def test_the_check_names_a_test_file_that_mirrors_nothing(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "memory").mkdir(parents=True)
    (package / "memory" / "facts.py").write_text("")
    unit = tmp_path / "tests" / "unit_tests"
    (unit / "memory").mkdir(parents=True)
    for name in ("test_facts.py", "test_facts_trim.py", "test_factoids.py"):
        (unit / "memory" / name).write_text("")
    (unit / "behaviours").mkdir()
    (unit / "behaviours" / "test_anything.py").write_text("")
    (unit / "nowhere").mkdir()
    (unit / "nowhere" / "test_facts.py").write_text("")
    found = misplaced_tests(unit, package)
    assert len(found) == 2
    assert found[0].startswith("tests/unit_tests/memory/test_factoids.py: no module")
    assert found[1].startswith("tests/unit_tests/nowhere/test_facts.py")
