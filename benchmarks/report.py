"""What every benchmark writes, what the README and ``docs/`` quote, and what CI holds them to.

Why one module: a figure in the documentation is a promise, and a promise nobody re-measures goes
stale silently (the lifecycle benchmark kept printing a table from before the write gates while it
stored 0 facts). So every benchmark

- takes ``--smoke`` (a small slice, well under a minute on 2 cores) and ``--json-out PATH``;
- ends with :func:`save`, which writes one JSON file: the command that produced it, the date, the
  machine, the raw ``results`` and the ``tables`` the docs show, each cell formatted once, here
  — a full run to ``benchmarks/results/<name>.json`` (committed), a smoke run to
  ``artifacts/benchmarks/<name>.json`` (not committed);
- has its floors in ``benchmarks/floors.toml``, checked on the smoke run's results by
  ``benchmarks/smoke.py`` (CI's step after the test suite) with :func:`check_floors`.

The documents (``README.md`` and every ``docs/**/*.md``, see :func:`documents`) never hold a
table of their own: each one sits between ``<!-- results: NAME TABLE -->`` and
``<!-- /results -->``, appears once across all of them, and is exactly :func:`render_block` of
the committed results file; ``tests/unit_tests/project/test_benchmark_report.py`` fails when
they differ, and ``python benchmarks/report.py --docs`` (or its old name ``--readme``) rewrites
the blocks after a re-run. Without a flag it only checks, and exits 1 on a stale or duplicated
block.

Library code, no third-party imports beyond the standard library (``tomllib``: Python 3.11).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
SMOKE_RESULTS = ROOT / "artifacts" / "benchmarks"
FLOORS = BENCHMARKS / "floors.toml"
README = ROOT / "README.md"
DOCS = ROOT / "docs"

BLOCK = re.compile(
    r"^<!-- results: (?P<name>[a-z_]+) (?P<table>[a-z0-9_]+) -->\n(?P<body>.*?)^<!-- /results -->$",
    re.S | re.M,
)


# ------------------------------------------------------------------------------------------------
# Arguments and the results file
# ------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--smoke`` and ``--json-out``, the two flags every benchmark takes."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a small slice for CI (results to artifacts/benchmarks/, checked against floors.toml)",
    )
    parser.add_argument(
        "--json-out",
        type=Path,
        help="where to write the results (default: benchmarks/results/NAME.json; "
        "artifacts/benchmarks/NAME.json with --smoke)",
    )


@dataclass(frozen=True)
class Table:
    """A table as the docs show it: every cell already formatted (``align``: one ``l``/``r``
    per column)."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    align: str = ""

    def __post_init__(self) -> None:
        width = len(self.header)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"row {list(row)!r} has {len(row)} cells, the header {width}")
        if self.align and len(self.align) != width:
            raise ValueError(f"align {self.align!r} has {len(self.align)} columns, not {width}")

    def markdown(self) -> str:
        align = self.align or "l" + "r" * (len(self.header) - 1)
        rule = ["---:" if a == "r" else "---" for a in align]
        lines = [_row(self.header), "|" + "|".join(rule) + "|", *(_row(r) for r in self.rows)]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "header": list(self.header),
            "align": self.align,
            "rows": [list(r) for r in self.rows],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Table:
        return cls(
            tuple(data["header"]), tuple(tuple(r) for r in data["rows"]), data.get("align", "")
        )


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def command(script: str, argv: Sequence[str] | None) -> str:
    """The command line that reproduces a run (without where it wrote its JSON)."""
    args = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--json-out":
            skip = True
            continue
        if arg.startswith("--json-out="):
            continue
        kept.append(arg)
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *kept])


def save(
    script: str,
    args: argparse.Namespace,
    results: Mapping[str, Any],
    tables: Mapping[str, Table] | None = None,
    argv: Sequence[str] | None = None,
) -> Path:
    """Write the run's JSON (see the module docstring for where) and return its path."""
    name = Path(script).stem
    smoke = bool(getattr(args, "smoke", False))
    path = args.json_out or (SMOKE_RESULTS if smoke else RESULTS) / f"{name}.json"
    payload = {
        "benchmark": name,
        "command": command(script, argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "smoke": smoke,
        "results": _finite(results),
        "tables": {key: table.to_json() for key, table in (tables or {}).items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _finite(value: Any) -> Any:
    """JSON without NaN/Infinity (which ``json`` writes but is not JSON): they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------------
# Generated blocks in the README and docs/
# ------------------------------------------------------------------------------------------------


def documents(root: Path = ROOT) -> list[Path]:
    """The files that may hold generated blocks: ``README.md``, then ``docs/**/*.md`` sorted."""
    readme = root / "README.md"
    found = [readme] if readme.is_file() else []
    return found + sorted((root / "docs").rglob("*.md"))


def render_block(payload: Mapping[str, Any], table: str) -> str:
    """A generated block's body: the table, then where it comes from."""
    try:
        body = Table.from_json(payload["tables"][table]).markdown()
    except KeyError as exc:
        raise KeyError(f"{payload.get('benchmark')}: no table {table!r} in its results") from exc
    m = payload["machine"]
    source = (
        f"From `{payload['command']}` → `benchmarks/results/{payload['benchmark']}.json` "
        f"({payload['date']}; {m['cpus']} × {m['arch']} cores, Python {m['python']})."
    )
    return f"{body}\n\n{source}\n"


def blocks(text: str) -> Iterator[re.Match[str]]:
    return BLOCK.finditer(text)


def load_results(name: str, results_dir: Path = RESULTS) -> dict[str, Any]:
    path = results_dir / f"{name}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"{path}: no results file (run python benchmarks/{name}.py)"
        ) from exc
    return data


def stale_blocks(text: str, results_dir: Path = RESULTS, where: str = "README") -> list[str]:
    """Each block of ``text`` that differs from its results file, as ``NAME TABLE (WHERE line
    N)``."""
    stale = []
    for match in blocks(text):
        name, table = match["name"], match["table"]
        expected = render_block(load_results(name, results_dir), table)
        if match["body"] != expected:
            line = text.count("\n", 0, match.start()) + 1
            stale.append(f"{name} {table} ({where} line {line})")
    return stale


def _label(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def document_blocks(
    paths: Sequence[Path] | None = None, root: Path = ROOT
) -> dict[tuple[str, str], list[str]]:
    """Where each ``(NAME, TABLE)`` block sits: ``{(name, table): ["docs/x.md line N", ...]}``."""
    where: dict[tuple[str, str], list[str]] = {}
    for path in documents(root) if paths is None else paths:
        text = path.read_text(encoding="utf-8")
        for match in blocks(text):
            line = text.count("\n", 0, match.start()) + 1
            where.setdefault((match["name"], match["table"]), []).append(
                f"{_label(path, root)} line {line}"
            )
    return where


def duplicated_blocks(paths: Sequence[Path] | None = None, root: Path = ROOT) -> list[str]:
    """Blocks that appear more than once across the documents: each table has one home."""
    return [
        f"{name} {table} ({', '.join(places)})"
        for (name, table), places in document_blocks(paths, root).items()
        if len(places) > 1
    ]


def stale_documents(
    paths: Sequence[Path] | None = None, results_dir: Path = RESULTS, root: Path = ROOT
) -> list[str]:
    """Every stale block of every document, as ``NAME TABLE (FILE line N)``."""
    stale = []
    for path in documents(root) if paths is None else paths:
        text = path.read_text(encoding="utf-8")
        stale.extend(stale_blocks(text, results_dir, _label(path, root)))
    return stale


def rewrite_documents(
    paths: Sequence[Path] | None = None, results_dir: Path = RESULTS, root: Path = ROOT
) -> list[Path]:
    """Rewrite every document's blocks from the results files; return the files that changed."""
    changed = []
    for path in documents(root) if paths is None else paths:
        text = path.read_text(encoding="utf-8")
        new = rewrite_readme(text, results_dir)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def rewrite_readme(text: str, results_dir: Path = RESULTS) -> str:
    """``text`` with every block rendered afresh (the README's or any document's)."""

    def replace(match: re.Match[str]) -> str:
        body = render_block(load_results(match["name"], results_dir), match["table"])
        return f"<!-- results: {match['name']} {match['table']} -->\n{body}<!-- /results -->"

    return BLOCK.sub(replace, text)


# ------------------------------------------------------------------------------------------------
# Floors
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One floor: ``path`` (dotted, into ``results``) is >= ``min`` and/or <= ``max``; with
    ``of`` (another path) the bounds apply to the ratio ``path / of``."""

    benchmark: str
    path: str
    min: float | None = None
    max: float | None = None
    of: str | None = None
    why: str = ""

    def describe(self) -> str:
        subject = f"{self.path} / {self.of}" if self.of else self.path
        bounds = []
        if self.min is not None:
            bounds.append(f">= {self.min:g}")
        if self.max is not None:
            bounds.append(f"<= {self.max:g}")
        return f"{subject} {' and '.join(bounds)}"


def load_floors(path: Path = FLOORS) -> dict[str, list[Check]]:
    """``floors.toml``: one table per benchmark, ``[[NAME.check]]`` entries; errors name the
    file, the benchmark and the check."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    floors: dict[str, list[Check]] = {}
    for name, section in data.items():
        checks = section.get("check", []) if isinstance(section, dict) else None
        if not checks:
            raise ValueError(f"{path}: [{name}] has no [[{name}.check]] entries")
        parsed = []
        for number, raw in enumerate(checks, 1):
            unknown = set(raw) - {"path", "min", "max", "of", "why"}
            if unknown or "path" not in raw or ("min" not in raw and "max" not in raw):
                raise ValueError(
                    f"{path}: {name} check {number}: needs path and min or max "
                    f"(unknown keys: {sorted(unknown)})"
                )
            parsed.append(Check(name, **raw))
        floors[name] = parsed
    return floors


def lookup(results: Mapping[str, Any], path: str) -> Any:
    node: Any = results
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(path)
    return node


def check_floors(results: Mapping[str, Any], checks: Sequence[Check]) -> list[str]:
    """Every breached (or unreadable) floor, as a sentence; empty when all hold."""
    breaches = []
    for check in checks:
        try:
            value = float(lookup(results, check.path))
            if check.of is not None:
                base = float(lookup(results, check.of))
                value = value / base if base else math.inf if value else math.nan
        except KeyError as exc:
            breaches.append(f"{check.benchmark}: {check.describe()}: no value at {exc.args[0]}")
            continue
        except (TypeError, ValueError):
            breaches.append(f"{check.benchmark}: {check.describe()}: not a number")
            continue
        low = check.min is not None and not value >= check.min
        high = check.max is not None and not value <= check.max
        if low or high or math.isnan(value):
            why = f" ({check.why})" if check.why else ""
            breaches.append(f"{check.benchmark}: {check.describe()}: got {value:.4g}{why}")
    return breaches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="the benchmark tables of README.md and docs/ from benchmarks/results/ "
        "(without a flag: check them)"
    )
    parser.add_argument(
        "--docs",
        "--readme",
        dest="rewrite",
        action="store_true",
        help="rewrite the blocks in README.md and docs/**/*.md (--readme: the old name)",
    )
    args = parser.parse_args(argv)
    if args.rewrite:
        for path in rewrite_documents():
            print(f"rewrote {_label(path, ROOT)}")
    stale = stale_documents()
    duplicated = duplicated_blocks()
    for item in stale:
        print(f"stale: {item}")
    for item in duplicated:
        print(f"duplicated: {item}")
    where = document_blocks()
    files = {place.rsplit(" line ", 1)[0] for places in where.values() for place in places}
    count = sum(len(places) for places in where.values())
    print(f"{count} blocks in {len(files)} files, {len(stale)} stale, {len(duplicated)} duplicated")
    return 1 if stale or duplicated else 0


if __name__ == "__main__":
    raise SystemExit(main())
