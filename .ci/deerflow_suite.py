"""CI: DeerFlow's own memory tests, as they are and with our backend in DeerMem's place.

Run by ``.ci/deerflow.sh`` with the Python of its DeerFlow environment, from this repository's
root::

    python .ci/deerflow_suite.py DEERFLOW_BACKEND_COPY

The tests are DeerFlow's memory test files (``tests/test_*memory*.py``) and the memory call
sites (the lead agent's prompt, the gateway's lifespan, the embedded client), minus the files
``tests/deerflow_host/expected_failures.toml`` excludes with a reason. They run twice from the
copy of DeerFlow's backend: as they are, then with the plugin
``tests.deerflow_host.ours_in_deermems_place``. Every outcome that is not a pass must be listed
in that file for that run, with the reason, and every listed outcome must still happen:
anything else fails the job. Standard library only (the DeerFlow environment's Python).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPECTED = REPO / "tests" / "deerflow_host" / "expected_failures.toml"
PLUGIN = "tests.deerflow_host.ours_in_deermems_place"
CALL_SITES = (
    "tests/test_lead_agent_prompt.py",
    "tests/test_gateway_lifespan_shutdown.py",
    "tests/test_client.py",
)


def test_files(backend: Path, excluded: set[str]) -> list[str]:
    found = backend.glob("tests/test_*memory*.py")
    memory = sorted(p.relative_to(backend).as_posix() for p in found)
    files = [f for f in [*memory, *CALL_SITES] if f not in excluded]
    missing = [f for f in files if not (backend / f).is_file()]
    if missing:
        sys.exit(f"deerflow: DeerFlow's backend has no {', '.join(missing)}")
    return files


def node_id(case: ET.Element) -> str:
    """``tests/test_x.py::Class::name`` from a JUnit ``testcase`` (``tests.test_x.Class``)."""
    parts = (case.get("classname") or "").split(".")
    path = "/".join(parts[:2]) + ".py"
    return "::".join([path, *parts[2:], case.get("name") or ""])


def outcomes(report: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
        found[node_id(case)] = outcome
    return found


def run(backend: Path, files: list[str], name: str, work: Path) -> tuple[dict[str, str], int]:
    report = work / f"{name}.xml"
    reached = work / f"{name}-reached.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DEERMEM_REACHED_FILE", None)
    command = [sys.executable, "-m", "pytest", *files, "-q", "--tb=line", "-p", "no:cacheprovider"]
    command += [f"--junitxml={report}"]
    if name == "ours":
        command += ["-p", PLUGIN]
        env["DEERMEM_REACHED_FILE"] = str(reached)
    print(f"== DeerFlow's tests, {name}: {len(files)} files ==", flush=True)
    subprocess.run(command, cwd=backend, env=env, check=False)
    if not report.is_file():
        sys.exit(f"deerflow: the {name} run wrote no report")
    count = len(reached.read_text().split()) if reached.is_file() else 0
    return outcomes(report), count


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend", type=Path, help="a writable copy of DeerFlow's backend/")
    args = parser.parse_args()
    backend = args.backend.resolve()
    listed = tomllib.loads(EXPECTED.read_text(encoding="utf-8"))
    excluded = {item["file"] for item in listed.get("excluded", [])}
    expected = {
        run_name: {e["test"]: e["outcome"] for e in listed["expected"] if run_name in e["runs"]}
        for run_name in ("as-is", "ours")
    }
    files = test_files(backend, excluded)
    work = backend / ".deermem-ci"
    work.mkdir(exist_ok=True)
    problems: list[str] = []
    rows: list[str] = []
    for name in ("as-is", "ours"):
        found, reached = run(backend, files, name, work)
        if not found:
            problems.append(f"{name}: no test ran")
        counts = {
            o: sum(1 for v in found.values() if v == o)
            for o in ("passed", "failed", "error", "skipped")
        }
        for test, outcome in sorted(found.items()):
            want = expected[name].get(test, "passed")
            if outcome != want:
                why = "" if want == "passed" else f" (listed as {want})"
                problems.append(f"{name}: {test}: {outcome}{why}")
        for test in sorted(set(expected[name]) - set(found)):
            problems.append(f"{name}: {test}: listed but did not run")
        listed_here = sum(1 for t in expected[name] if t in found)
        rows.append(
            f"| {name} | {len(found)} | {counts['passed']} | {counts['failed'] + counts['error']} "
            f"| {counts['skipped']} | {listed_here} | {reached if name == 'ours' else '–'} |"
        )
    print(
        "\n| run | tests | passed | failed | skipped | listed in expected_failures.toml "
        "| reached our backend |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    if problems:
        print("\ndeerflow: outcomes that expected_failures.toml does not list:", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    print("\ndeerflow: every outcome is as listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
