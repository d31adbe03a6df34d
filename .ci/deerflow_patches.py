"""CI: DeerFlow's open memory pull requests, applied one by one and stacked, against our backend.

Run by ``.ci/deerflow.sh`` after ``.ci/deerflow_suite.py``, with the Python of its DeerFlow
environment, from this repository's root::

    python .ci/deerflow_patches.py [--source DIR] [--prs DIR] [--only N ...] [--no-stacked]

The patches (``deerflow-pr-N.patch``, each a ``git diff`` of DeerFlow's ``backend/`` and
``config.example.yaml``) come from ``--prs``, else ``$DEERMEM_DEERFLOW_PRS``, else the ``prs/``
folder beside DeerFlow's source (found as ``.ci/deerflow.sh`` finds it: ``--source``,
``$DEERMEM_DEERFLOW_SOURCE``, or ``shared/deerflow/source`` next to the repository or one of its
parents). For each patch:

1. DeerFlow's pristine ``backend/`` and ``config.example.yaml`` are copied to
   ``.venv-deerflow/patched/pr-N/`` and the patch is applied (``git apply``, else ``patch -p1``);
2. the patched copy's harness (``packages/harness``), extension API and backend root (DeerFlow's
   gateway package ``app``) go in front of the installed DeerFlow on ``PYTHONPATH`` — checked: the
   ``deerflow`` and ``app`` a test imports are the patched ones, or the job fails;
3. the DeerFlow test files the patch adds or changes (its ``backend/tests/**/test_*.py``) run
   twice from the patched copy: as they are, and with our backend in DeerMem's place (the plugin
   ``tests.deerflow_host.ours_in_deermems_place``);
4. our own end-to-end tests of that pull request, ``tests/deerflow_patched/pr<N>/`` if there is
   one, run from this repository's root against the patched copy: every test must pass, none
   may skip.

Then all patches that apply together are stacked in one copy (``patched/stacked``) and the union
of their test files runs the same two ways. Every outcome that is not a pass must be listed in
``tests/deerflow_host/expected_patches.toml`` for that patch (or ``stacked``) and run, with the
reason, and every listed outcome must still happen: anything else fails the job. Nothing is
installed: one environment, the patch's own test files only. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from deerflow_runs import (
    REPO,
    RUNS,
    counts,
    find_source,
    problems,
    pythonpath,
    run_pytest,
    verdict,
)

EXPECTED = REPO / "tests" / "deerflow_host" / "expected_patches.toml"
OUR_TESTS = REPO / "tests" / "deerflow_patched"
WORK = REPO / ".venv-deerflow" / "patched"
PATCH_NAME = re.compile(r"deerflow-pr-(\d+)\.patch$")
TEST_FILE = re.compile(r"^diff --git a/\S+ b/backend/(tests/(?:\S+/)?test_[^/\s]+\.py)$", re.M)
DIFF_PATHS = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)
STACKED = "stacked"


@dataclass
class Result:
    """One patch's (or the stack's) runs."""

    name: str
    files: list[str] = field(default_factory=list)
    rows: list[tuple[str, dict[str, str], int, int, float]] = field(default_factory=list)
    """(run, outcomes, listed, reached, seconds)."""


def find_prs(source: Path | None) -> Path | None:
    """The patches folder: ``$DEERMEM_DEERFLOW_PRS``, else ``prs/`` beside DeerFlow's source."""
    named = os.environ.get("DEERMEM_DEERFLOW_PRS")
    if named:
        return Path(named).resolve()
    if source is not None and (source.parent / "prs").is_dir():
        return source.parent / "prs"
    return None


def patches(prs: Path) -> dict[str, Path]:
    """``{"4732": .../deerflow-pr-4732.patch, ...}`` in number order."""
    found = {m.group(1): p for p in prs.iterdir() if (m := PATCH_NAME.search(p.name))}
    return dict(sorted(found.items(), key=lambda item: int(item[0])))


def pristine_copy(source: Path, copy: Path) -> Path:
    """DeerFlow's ``backend/`` and ``config.example.yaml`` copied to ``copy``; its backend."""
    if copy.exists():
        shutil.rmtree(copy)
    copy.mkdir(parents=True)
    junk = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".venv", ".deermem-ci")
    shutil.copytree(source / "backend", copy / "backend", ignore=junk)
    if (source / "config.example.yaml").is_file():
        shutil.copy2(source / "config.example.yaml", copy / "config.example.yaml")
    for path in copy.rglob("*"):  # a read-only source stays writable in its copy
        path.chmod(path.stat().st_mode | 0o200)
    return copy / "backend"


def apply(patch: Path, copy: Path, source: Path) -> str | None:
    """Apply ``patch`` in ``copy`` (``git apply``, else ``patch -p1``); why not, or None.

    The copy lies inside this repository's (ignored) ``.venv-deerflow``: ``git apply`` must not
    take it for a subfolder of this repository, where it silently skips every path outside the
    folder it runs in — so git looks no higher than the copy, and every file the patch names is
    checked to have changed (or gone, or appeared) against DeerFlow's source."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(copy.parent)}
    if shutil.which("git"):
        command = ["git", "apply", "--whitespace=nowarn", str(patch)]
    else:
        command = ["patch", "-p1", "--batch", "--forward", "--silent", "-i", str(patch)]
    done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        return (done.stderr or done.stdout).strip() or f"{command[0]} exited {done.returncode}"
    unchanged = []
    for before, after in DIFF_PATHS.findall(patch.read_text(encoding="utf-8")):
        old, new = source / before, copy / after
        if new.is_file():
            same = old.is_file() and new.read_bytes() == old.read_bytes()
        else:  # only a deleted file may be gone
            same = not (old.is_file() and before == after)
        if same:
            unchanged.append(after)
    if unchanged:
        return f"{command[0]} left unchanged: {', '.join(unchanged)}"
    return None


def changed_tests(patch: Path, backend: Path) -> list[str]:
    """The test files (``tests/...py``, backend-relative) the patch adds or changes that exist
    once it is applied."""
    names = TEST_FILE.findall(patch.read_text(encoding="utf-8"))
    return sorted({n for n in names if (backend / n).is_file()})


def front(backend: Path) -> list[Path]:
    """What goes in front of the installed DeerFlow: the patched harness, extension API and
    backend root (``app``)."""
    packages = [backend / "packages" / "harness", backend / "packages" / "extension-api"]
    return [*(p for p in packages if p.is_dir()), backend]


def check_imports(backend: Path) -> None:
    """Fail unless ``deerflow`` and ``app`` import from the patched copy with ``front``."""
    probe = "import app, deerflow; print(deerflow.__file__); print(app.__file__)"
    env = {**os.environ, "PYTHONPATH": pythonpath(front(backend))}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=backend, env=env, capture_output=True, text=True
    )
    where = [Path(line).resolve() for line in done.stdout.split()]
    wanted = [backend / "packages" / "harness" / "deerflow", backend / "app"]
    if (
        done.returncode
        or len(where) != 2
        or any(not path.is_relative_to(want) for path, want in zip(where, wanted, strict=True))
    ):
        sys.exit(
            f"deerflow: the patched copy {backend} is not what imports:\n{done.stdout}{done.stderr}"
        )


def our_tests(number: str, backend: Path, work: Path) -> tuple[dict[str, str], float] | None:
    """Our end-to-end tests of pull request ``number`` (``tests/deerflow_patched/pr<N>``), run
    from the repository's root with the patched copy in front; None if there are none."""
    folder = OUR_TESTS / f"pr{number}"
    if not folder.is_dir():
        return None
    start = time.monotonic()
    found, _ = run_pytest(
        REPO,
        [str(folder.relative_to(REPO))],
        "e2e",
        work,
        ours=False,
        front=front(backend),
        label=f"our end-to-end tests of pr-{number}",
        tb="short",
    )
    return found, time.monotonic() - start


def expectations(names: list[str]) -> tuple[dict[tuple[str, str], dict[str, str]], list[str]]:
    """``{(patch, run): {test: outcome}}`` from expected_patches.toml, and what is wrong in it."""
    listed = tomllib.loads(EXPECTED.read_text(encoding="utf-8")) if EXPECTED.is_file() else {}
    expected: dict[tuple[str, str], dict[str, str]] = {}
    wrong: list[str] = []
    for entry in listed.get("expected", []):
        patch, run, test = str(entry.get("patch")), entry.get("run"), entry.get("test")
        if patch not in names or run not in RUNS or not test or not entry.get("reason"):
            wrong.append(f"expected_patches.toml: an entry for no patch, run or reason: {entry}")
            continue
        expected.setdefault((patch, run), {})[test] = entry.get("outcome", "failed")
    return expected, wrong


def run_copy(
    result: Result, backend: Path, expected: dict[tuple[str, str], dict[str, str]]
) -> list[str]:
    """Run ``result.files`` as they are and with ours in the patched copy ``backend``."""
    found_problems: list[str] = []
    label = f"DeerFlow's tests with pr-{result.name}" if result.name != STACKED else "stacked"
    for run in RUNS:
        want = expected.get((result.name, run), {})
        start = time.monotonic()
        found, reached = run_pytest(
            backend,
            result.files,
            run,
            backend / ".deermem-ci",
            ours=run == "ours",
            front=front(backend),
            label=label,
        )
        seconds = time.monotonic() - start
        found_problems += problems(f"{result.name} {run}", found, want)
        listed = sum(1 for t in want if t in found)
        result.rows.append((run, found, listed, reached, seconds))
    return found_problems


def table(results: list[Result]) -> str:
    lines = [
        "| patch | run | test files | tests | passed | failed | skipped "
        "| listed in expected_patches.toml | reached our backend | seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for run, found, listed, reached, seconds in result.rows:
            n = counts(found)
            name = result.name if result.name == STACKED else f"pr-{result.name}"
            files = len(result.files) if run != "e2e" else "–"
            lines.append(
                f"| {name} | {run} | {files} | {len(found)} | {n['passed']} "
                f"| {n['failed'] + n['error']} | {n['skipped']} "
                f"| {listed if run != 'e2e' else '–'} "
                f"| {reached if run == 'ours' else '–'} | {seconds:.0f} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, help="DeerFlow's pristine source (with backend/)")
    parser.add_argument("--prs", type=Path, help="the folder of deerflow-pr-N.patch files")
    parser.add_argument("--only", nargs="+", metavar="N", help="these pull requests only")
    parser.add_argument("--no-stacked", action="store_true", help="skip the stacked run")
    parser.add_argument("--work", type=Path, default=WORK, help=f"default: {WORK}")
    args = parser.parse_args()
    started = time.monotonic()

    source = (args.source or find_source() or Path("/nonexistent")).resolve()
    if not (source / "backend" / "uv.lock").is_file():
        sys.exit("deerflow: DeerFlow's source not found (set DEERMEM_DEERFLOW_SOURCE)")
    prs = args.prs.resolve() if args.prs else find_prs(source)
    if prs is None or not prs.is_dir():
        sys.exit("deerflow: the pull requests' patches not found (set DEERMEM_DEERFLOW_PRS)")
    every = patches(prs)
    if not every:
        sys.exit(f"deerflow: no deerflow-pr-N.patch in {prs}")
    chosen = {n: p for n, p in every.items() if not args.only or n in args.only}
    if args.only and (unknown := set(args.only) - set(every)):
        sys.exit(f"deerflow: no patch for {', '.join(sorted(unknown))} in {prs}")
    print(f"== DeerFlow's pull requests: {', '.join(f'pr-{n}' for n in every)} from {prs} ==")
    expected, found_problems = expectations([*every, STACKED])
    ran = {(n, run) for n in chosen for run in RUNS}
    if not args.no_stacked:
        ran |= {(STACKED, run) for run in RUNS}
    results: list[Result] = []

    for number, patch in chosen.items():
        result = Result(number)
        results.append(result)
        copy = args.work / f"pr-{number}"
        backend = pristine_copy(source, copy)
        why = apply(patch, copy, source)
        if why:
            found_problems.append(f"pr-{number}: does not apply to DeerFlow's source: {why}")
            continue
        check_imports(backend)
        result.files = changed_tests(patch, backend)
        if not result.files:
            found_problems.append(f"pr-{number}: the patch changes no test file")
            continue
        found_problems += run_copy(result, backend, expected)
        mine = our_tests(number, backend, backend / ".deermem-ci")
        if mine is not None:
            found, seconds = mine
            result.rows.append(("e2e", found, 0, 0, seconds))
            if not found:
                found_problems.append(f"pr-{number} e2e: no test ran")
            found_problems += [
                f"pr-{number} e2e: {test}: {outcome}"
                for test, outcome in sorted(found.items())
                if outcome != "passed"
            ]

    if not args.no_stacked:
        stack = Result(STACKED)
        results.append(stack)
        copy = args.work / STACKED
        backend = pristine_copy(source, copy)
        stacked: list[str] = []
        for number, patch in every.items():
            why = apply(patch, copy, source)
            if why:
                print(f"deerflow: pr-{number} does not apply on the stack, left out: {why}")
                continue
            stacked.append(number)
        print(f"== stacked: {', '.join(f'pr-{n}' for n in stacked)} ==")
        check_imports(backend)
        stack.files = sorted({f for n in stacked for f in changed_tests(every[n], backend)})
        found_problems += run_copy(stack, backend, expected)

    for (patch, run), tests in sorted(expected.items()):
        if (patch, run) not in ran:
            continue
        if not any(r.name == patch and any(row[0] == run for row in r.rows) for r in results):
            found_problems += [f"{patch} {run}: {t}: listed but did not run" for t in tests]

    print("\n" + table(results))
    print(f"\n== DeerFlow's pull requests took {time.monotonic() - started:.0f}s ==")
    return verdict(found_problems, "expected_patches.toml", "every outcome of every pull request")


if __name__ == "__main__":
    sys.exit(main())
