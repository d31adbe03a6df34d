"""CI's benchmark step: every benchmark's ``--smoke`` run, held to ``benchmarks/floors.toml``.

Each benchmark runs in its own process (``python benchmarks/NAME.py --smoke --json-out
artifacts/benchmarks/NAME.json``, its output in ``artifacts/benchmarks/NAME.log``); then each
floor of its section is checked against the results it wrote. The step fails when a benchmark
exits non-zero, writes no results, or breaches a floor — or when a benchmark script has no
section in ``floors.toml`` (a new benchmark cannot stay out of CI by omission).

Quality floors are absolute (hit@15, facts stored, recall); speed floors are only ever ratios
against a baseline measured in the same run, because the CI machine is shared and its absolute
times say nothing.

    python benchmarks/smoke.py [--only NAME,NAME]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from report import BENCHMARKS, SMOKE_RESULTS, Check, check_floors, load_floors

NOT_BENCHMARKS = {"report", "smoke"}
TIMEOUT_S = 600


def scripts() -> list[str]:
    return sorted(
        p.stem
        for p in BENCHMARKS.glob("*.py")
        if p.stem not in NOT_BENCHMARKS and not p.stem.startswith("_")
    )


def run_one(name: str, checks: list[Check], out_dir: Path) -> tuple[float, list[str]]:
    out = out_dir / f"{name}.json"
    log = out_dir / f"{name}.log"
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        try:
            proc = subprocess.run(
                [sys.executable, str(BENCHMARKS / f"{name}.py"), "--smoke", "--json-out", str(out)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
                check=False,
            )
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = f"timed out after {TIMEOUT_S} s"
    seconds = time.perf_counter() - started
    if code != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        return seconds, [f"{name}: exited with {code}; the end of {log}:\n{tail}"]
    if not out.is_file():
        return seconds, [f"{name}: wrote no results to {out}"]
    payload = json.loads(out.read_text(encoding="utf-8"))
    return seconds, check_floors(payload["results"], checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    args = parser.parse_args(argv)
    floors = load_floors()
    names = scripts()
    problems: list[str] = [
        f"{name}: no [{name}] section in benchmarks/floors.toml"
        for name in names
        if name not in floors
    ]
    problems += [
        f"{name}: in floors.toml but no benchmarks/{name}.py"
        for name in floors
        if name not in names
    ]
    if args.only:
        names = [n for n in names if n in set(args.only.split(","))]
    SMOKE_RESULTS.mkdir(parents=True, exist_ok=True)
    rows = []
    total = time.perf_counter()
    for name in names:
        if name not in floors:
            continue
        print(f"-- {name} --smoke", flush=True)
        seconds, breaches = run_one(name, floors[name], SMOKE_RESULTS)
        rows.append((name, seconds, len(floors[name]), breaches))
        for breach in breaches:
            print(f"   BREACH {breach}", flush=True)
        problems += breaches
    print("\n| benchmark | seconds | floors | result |\n|---|---:|---:|---|")
    for name, seconds, count, breaches in rows:
        result = "ok" if not breaches else f"{len(breaches)} breached"
        print(f"| {name} | {seconds:.1f} | {count} | {result} |")
    print(f"\nsmoke step: {time.perf_counter() - total:.0f} s, {len(problems)} problem(s)")
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
