"""CI helpers shared by ``.ci/deerflow_suite.py`` and ``.ci/deerflow_patches.py``.

DeerFlow's own tests are run with pytest from a copy of DeerFlow's backend, once as they are
("as-is") and once with the plugin ``tests.deerflow_host.ours_in_deermems_place`` ("ours");
their JUnit report gives each test's outcome, which is held to a list of expected non-passes.
Standard library only (these scripts run with the DeerFlow environment's Python).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "tests.deerflow_host.ours_in_deermems_place"
RUNS = ("as-is", "ours")
OUTCOMES = ("passed", "failed", "error", "skipped")


def find_source() -> Path | None:
    """DeerFlow's source as ``.ci/deerflow.sh`` finds it: ``$DEERMEM_DEERFLOW_SOURCE``, else a
    ``shared/deerflow/source`` folder (with ``backend/uv.lock``) next to the repository or one of
    its parents."""
    named = os.environ.get("DEERMEM_DEERFLOW_SOURCE")
    if named:
        return Path(named).resolve()
    for parent in REPO.parents:
        candidate = parent / "shared" / "deerflow" / "source"
        if (candidate / "backend" / "uv.lock").is_file():
            return candidate
    return None


def node_id(case: ET.Element, root: Path) -> str:
    """``tests/sub/test_x.py::Class::name`` from a JUnit ``testcase`` (classname
    ``tests.sub.test_x.Class``): the longest dotted prefix that names a file under ``root``. A
    module that failed or skipped as a whole has no classname and its dotted path as name:
    ``tests/sub/test_x.py``."""
    if not case.get("classname"):
        return (case.get("name") or "").replace(".", "/") + ".py"
    parts = (case.get("classname") or "").split(".")
    split = 2
    for k in range(len(parts), 0, -1):
        if (root / Path(*parts[:k])).with_suffix(".py").is_file():
            split = k
            break
    path = "/".join(parts[:split]) + ".py"
    return "::".join([path, *parts[split:], case.get("name") or ""])


def outcomes(report: Path, root: Path) -> dict[str, str]:
    """Each test's outcome in a JUnit report: passed, failed, error or skipped."""
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
        found[node_id(case, root)] = outcome
    return found


def pythonpath(front: Iterable[Path]) -> str:
    """``PYTHONPATH`` with ``front`` first, then this repository (for the plugin)."""
    return os.pathsep.join(str(p) for p in [*front, REPO])


def run_pytest(
    root: Path,
    files: list[str],
    name: str,
    work: Path,
    *,
    ours: bool,
    front: Iterable[Path] = (),
    label: str = "DeerFlow's tests",
    tb: str = "line",
) -> tuple[dict[str, str], int]:
    """Run ``files`` with pytest in ``root`` (with our plugin when ``ours``), with ``front`` in
    front of the installed packages on ``PYTHONPATH``. Each test's outcome, and how many tests
    reached our backend (the plugin's count; 0 as they are); ``tb``: pytest's traceback style.
    No outcome at all when pytest
    wrote no report (it could not start: the caller's "no test ran")."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / f"{name}.xml"
    reached = work / f"{name}-reached.txt"
    for stale in (report, reached):
        stale.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": pythonpath(front)}
    env.pop("DEERMEM_REACHED_FILE", None)
    command = [sys.executable, "-m", "pytest", *files, "-q", f"--tb={tb}", "-p", "no:cacheprovider"]
    command += [f"--junitxml={report}"]
    if ours:
        command += ["-p", PLUGIN]
        env["DEERMEM_REACHED_FILE"] = str(reached)
    print(f"== {label}, {name}: {len(files)} files ==", flush=True)
    subprocess.run(command, cwd=root, env=env, check=False)
    if not report.is_file():
        print(f"deerflow: the {name} run wrote no report", file=sys.stderr)
        return {}, 0
    count = len(reached.read_text().split()) if reached.is_file() else 0
    return outcomes(report, root), count


def counts(found: Mapping[str, str]) -> dict[str, int]:
    """How many tests had each outcome."""
    return {o: sum(1 for v in found.values() if v == o) for o in OUTCOMES}


def problems(name: str, found: Mapping[str, str], expected: Mapping[str, str]) -> list[str]:
    """Every outcome that differs from the list (a test not listed must pass), and every listed
    test that did not run."""
    lines: list[str] = []
    if not found:
        lines.append(f"{name}: no test ran")
    for test, outcome in sorted(found.items()):
        want = expected.get(test, "passed")
        if outcome != want:
            why = "" if want == "passed" else f" (listed as {want})"
            lines.append(f"{name}: {test}: {outcome}{why}")
    for test in sorted(set(expected) - set(found)):
        lines.append(f"{name}: {test}: listed but did not run")
    return lines


def verdict(found_problems: list[str], listed_in: str, every: str) -> int:
    """The job's exit status: 1 with every unlisted outcome on stderr, else 0 with ``every``."""
    if found_problems:
        print(f"\ndeerflow: outcomes that {listed_in} does not list:", file=sys.stderr)
        for line in found_problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"\ndeerflow: {every} is as listed")
    return 0
