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
import sys
import tomllib
from pathlib import Path

from deerflow_runs import REPO, RUNS, counts, problems, run_pytest, verdict

EXPECTED = REPO / "tests" / "deerflow_host" / "expected_failures.toml"
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend", type=Path, help="a writable copy of DeerFlow's backend/")
    args = parser.parse_args()
    backend = args.backend.resolve()
    listed = tomllib.loads(EXPECTED.read_text(encoding="utf-8"))
    excluded = {item["file"] for item in listed.get("excluded", [])}
    expected = {
        run_name: {e["test"]: e["outcome"] for e in listed["expected"] if run_name in e["runs"]}
        for run_name in RUNS
    }
    files = test_files(backend, excluded)
    work = backend / ".deermem-ci"
    found_problems: list[str] = []
    rows: list[str] = []
    for name in RUNS:
        found, reached = run_pytest(backend, files, name, work, ours=name == "ours")
        found_problems += problems(name, found, expected[name])
        n = counts(found)
        listed_here = sum(1 for t in expected[name] if t in found)
        rows.append(
            f"| {name} | {len(found)} | {n['passed']} | {n['failed'] + n['error']} "
            f"| {n['skipped']} | {listed_here} | {reached if name == 'ours' else '–'} |"
        )
    print(
        "\n| run | tests | passed | failed | skipped | listed in expected_failures.toml "
        "| reached our backend |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    return verdict(found_problems, "expected_failures.toml", "every outcome")


if __name__ == "__main__":
    sys.exit(main())
