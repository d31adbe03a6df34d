"""The figures in the README and docs/ are the committed results, and CI's floors are read as
written.

``benchmarks/report.py`` renders every benchmark table of ``README.md`` and ``docs/**/*.md`` from
``benchmarks/results/<name>.json``; these tests hold the documents to it (a number edited by hand
fails, each table has one home), check that each results file says what produced it, and check
the floor logic ``benchmarks/smoke.py`` runs in CI.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


report = _load("report")
sys.modules.setdefault("report", report)  # what benchmarks/smoke.py imports as a script
DOCUMENTS = report.documents()
TEXTS = {path: path.read_text(encoding="utf-8") for path in DOCUMENTS}


def _payload(**overrides: Any) -> dict[str, Any]:
    payload = {
        "benchmark": "demo",
        "command": "python benchmarks/demo.py --users 3",
        "date": "2026-12-03",
        "machine": {"cpus": 2, "arch": "x86_64", "python": "3.11.7", "platform": "Linux"},
        "smoke": False,
        "results": {"shipped": {"hit15": 75.6}},
        "tables": {
            "main": report.Table(("configuration", "hit@15"), (("shipped", "75.6"),)).to_json()
        },
    }
    payload.update(overrides)
    return payload


# ------------------------------------------------------------------------------------------------
# The README and docs/ against the committed results
# ------------------------------------------------------------------------------------------------


def test_the_documents_are_the_readme_and_every_page_of_docs() -> None:
    assert DOCUMENTS[0] == ROOT / "README.md"
    assert {p.relative_to(ROOT).as_posix() for p in DOCUMENTS} >= {
        "README.md",
        "docs/performance.md",
        "docs/retrieval.md",
    }


def test_the_docs_quote_their_tables_from_results_files() -> None:
    found = [m for text in TEXTS.values() for m in report.blocks(text)]
    assert len(found) >= 10, "the benchmark tables of the README and docs/ are generated blocks"


def test_every_block_equals_its_committed_results() -> None:
    stale = report.stale_documents()
    assert not stale, f"blocks differ from benchmarks/results/: {stale}; re-run the " + (
        "benchmark, then python benchmarks/report.py --docs"
    )


def test_each_table_has_one_home() -> None:
    assert report.duplicated_blocks() == []


def test_every_table_of_every_results_file_is_quoted() -> None:
    quoted = set(report.document_blocks())
    tables = set()
    for path in (BENCHMARKS / "results").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        tables.update((path.stem, table) for table in data["tables"])
    assert sorted(tables - quoted) == [], "tables in benchmarks/results/ that no document shows"
    assert sorted(quoted - tables) == [], "blocks naming a table no results file has"


def test_a_number_edited_by_hand_in_a_document_is_caught() -> None:
    path, text = next((p, t) for p, t in TEXTS.items() if next(report.blocks(t), None))
    match = next(report.blocks(text))
    body = match["body"]
    digit = next(i for i, ch in enumerate(body) if ch.isdigit() and body[i - 1] == " ")
    edited = body[:digit] + str((int(body[digit]) + 1) % 10) + body[digit + 1 :]
    text = text[: match.start("body")] + edited + text[match.end("body") :]
    line = text.count("\n", 0, match.start()) + 1
    where = path.relative_to(ROOT).as_posix()
    assert report.stale_blocks(text, where=where) == [
        f"{match['name']} {match['table']} ({where} line {line})"
    ]
    assert report.stale_blocks(report.rewrite_readme(text)) == []


def test_documents_are_checked_and_rewritten_in_place(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "demo.json").write_text(json.dumps(_payload()), encoding="utf-8")
    block = report.render_block(_payload(), "main")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# front door\n", encoding="utf-8")
    page = tmp_path / "docs" / "performance.md"
    text = f"intro\n<!-- results: demo main -->\n{block}<!-- /results -->\n"
    page.write_text(text.replace("| 75.6 |", "| 76.6 |"), encoding="utf-8")
    assert report.documents(tmp_path) == [tmp_path / "README.md", page]
    kw = {"results_dir": tmp_path / "results", "root": tmp_path}
    assert report.stale_documents(**kw) == ["demo main (docs/performance.md line 2)"]
    assert report.rewrite_documents(**kw) == [page]
    assert page.read_text(encoding="utf-8") == text and report.stale_documents(**kw) == []
    (tmp_path / "README.md").write_text(text, encoding="utf-8")
    assert report.duplicated_blocks(root=tmp_path) == [
        "demo main (README.md line 2, docs/performance.md line 2)"
    ]


def test_each_results_file_says_what_produced_it() -> None:
    paths = sorted((BENCHMARKS / "results").glob("*.json"))
    assert paths, "benchmarks/results/ holds the committed results"
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["benchmark"] == path.stem
        assert data["command"].startswith(f"python benchmarks/{path.stem}.py"), path
        assert "--smoke" not in data["command"] and data["smoke"] is False, path
        assert data["date"] and data["machine"]["cpus"] and data["machine"]["python"], path
        assert data["results"], f"{path}: the raw figures, not only the tables"
        assert (BENCHMARKS / f"{path.stem}.py").is_file(), path


def test_every_results_file_is_quoted_by_the_docs() -> None:
    quoted = {name for name, _ in report.document_blocks()}
    committed = {p.stem for p in (BENCHMARKS / "results").glob("*.json")}
    assert committed <= quoted, f"results nobody reads: {sorted(committed - quoted)}"


def test_render_block_names_the_command_and_the_results_file() -> None:
    body = report.render_block(_payload(), "main")
    assert body.startswith("| configuration | hit@15 |\n|---|---:|\n| shipped | 75.6 |\n\n")
    assert "`python benchmarks/demo.py --users 3`" in body
    assert "`benchmarks/results/demo.json`" in body and "2026-12-03" in body


def test_stale_blocks_reads_the_named_results(tmp_path: Path) -> None:
    (tmp_path / "demo.json").write_text(json.dumps(_payload()), encoding="utf-8")
    block = report.render_block(_payload(), "main")
    text = f"intro\n<!-- results: demo main -->\n{block}<!-- /results -->\nafter\n"
    assert report.stale_blocks(text, tmp_path) == []
    changed = text.replace("| 75.6 |", "| 76.6 |")
    assert report.stale_blocks(changed, tmp_path) == ["demo main (README line 2)"]
    assert report.rewrite_readme(changed, tmp_path) == text
    with pytest.raises(KeyError, match="no table 'other'"):
        report.stale_blocks(text.replace("demo main", "demo other"), tmp_path)


def test_save_records_the_command_without_where_it_wrote(tmp_path: Path) -> None:
    import argparse

    args = argparse.Namespace(smoke=True, json_out=tmp_path / "x.json")
    path = report.save(
        "benchmarks/demo.py",
        args,
        {"ratio": float("nan"), "n": 3},
        {"t": report.Table(("a", "b"), (("1", "2"),), "lr")},
        ["--smoke", "--json-out", str(tmp_path / "x.json"), "--users", "3"],
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["command"] == "python benchmarks/demo.py --smoke --users 3"
    assert data["smoke"] is True and data["results"] == {"ratio": None, "n": 3}
    assert data["tables"]["t"] == {"header": ["a", "b"], "align": "lr", "rows": [["1", "2"]]}


def test_a_table_refuses_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="has 1 cells, the header 2"):
        report.Table(("a", "b"), (("1",),))


# ------------------------------------------------------------------------------------------------
# Floors
# ------------------------------------------------------------------------------------------------


def _check(**kw: Any) -> Any:
    return report.Check("demo", **kw)


def test_floors_hold_and_breach_as_written() -> None:
    results = {"shipped": {"hit15": 75.0, "facts": 10}, "ceiling": {"hit15": 80.0}, "rows": [3, 4]}
    assert report.check_floors(results, [_check(path="shipped.hit15", min=70)]) == []
    assert report.check_floors(results, [_check(path="rows.1", min=4, max=4)]) == []
    breaches = report.check_floors(
        results,
        [
            _check(path="shipped.hit15", min=76, why="the shipped selection"),
            _check(path="shipped.hit15", of="ceiling.hit15", min=0.95),
            _check(path="shipped.facts", max=5),
            _check(path="shipped.missing", min=0),
        ],
    )
    assert breaches == [
        "demo: shipped.hit15 >= 76: got 75 (the shipped selection)",
        "demo: shipped.hit15 / ceiling.hit15 >= 0.95: got 0.9375",
        "demo: shipped.facts <= 5: got 10",
        "demo: shipped.missing >= 0: no value at shipped.missing",
    ]


def test_a_degenerate_result_breaches_a_ratio_floor() -> None:
    results = {"a": 0.0, "b": 0.0, "c": None}
    assert report.check_floors(results, [_check(path="a", of="b", min=0.5)]) == [
        "demo: a / b >= 0.5: got nan"
    ]
    assert report.check_floors(results, [_check(path="c", min=0)]) == ["demo: c >= 0: not a number"]


def test_the_floors_file_covers_every_benchmark() -> None:
    floors = report.load_floors()
    smoke = _load("smoke")
    assert sorted(floors) == smoke.scripts()
    for name, checks in floors.items():
        assert checks, name


def test_a_floors_file_with_a_malformed_check_names_it(tmp_path: Path) -> None:
    path = tmp_path / "floors.toml"
    path.write_text('[demo]\n[[demo.check]]\npath = "a"\nmn = 1\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"floors.toml: demo check 1: needs path and min or max"):
        report.load_floors(path)
    path.write_text("[demo]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[demo\] has no \[\[demo.check\]\] entries"):
        report.load_floors(path)


def test_every_benchmark_takes_smoke_and_saves_through_report() -> None:
    smoke = _load("smoke")
    for name in smoke.scripts():
        source = (BENCHMARKS / f"{name}.py").read_text(encoding="utf-8")
        assert "add_arguments(" in source and "save(" in source, name
