"""Nothing leaves a memory by capacity (``max_facts``) or by archiving without a log line naming
the user, the agent and the count, and ``deermem stats`` (and the console's stats) count what
capacity deleted: the ``trimmed`` counter of the document.

An import over ``max_facts`` is trimmed when it is imported — the receipt says how many were
left out, which, at what ``max_facts``, and how to keep them — so the next conversation's update
does not silently delete what the import had just added.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.cli import main
from deermem_middleware.deerflow import gateway
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.formats.deerflow import to_deerflow
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.testing import ScriptedChatModel, update_json
from tests.helpers import memory_config

AGENT = "__default__"
BOB = MemoryScope("bob", AGENT)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _config(tmp_path: Path, max_facts: int = 100) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"memory:\n  storage_path: mem\n  embeddings: none\n  max_facts: {max_facts}\n",
        encoding="utf-8",
    )
    return path


def _facts(count: int) -> list[dict[str, Any]]:
    """``count`` DeerFlow facts, ``f000`` the least confident (0.5) and each next one more."""
    return [
        {
            "id": f"f{i:03d}",
            "content": f"Imported fact number {i}",
            "category": "context",
            "confidence": round(0.5 + i / 1000, 3),
            "createdAt": "2026-01-01T00:00:00Z",
        }
        for i in range(count)
    ]


def _source(tmp_path: Path, count: int = 250) -> Path:
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"version": "1.0", "facts": _facts(count)}), encoding="utf-8")
    return path


def _stored(tmp_path: Path) -> Memory:
    return JSONFileStorage(tmp_path / "mem").load(BOB).memory


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def _import(tmp_path: Path, *options: str) -> int:
    config = _config(tmp_path)
    source = _source(tmp_path)
    return main([*options, "import", str(source), "--user", "bob", "--config", str(config)])


# -- the import --------------------------------------------------------------------------------


def test_import_over_max_facts_says_how_many_which_and_how_to_keep_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="deermem_middleware"):
        assert _import(tmp_path) == 0
    out = capsys.readouterr().out
    assert "100 fact(s) added" in out  # what was kept, not what the file had
    assert "150 fact(s) over max_facts not kept" in out
    assert "max_facts is 100" in out and "raise max_facts" in out, out
    # the least valuable are named, the first 20 of them (-v lists them all)
    assert "f000: Imported fact number 0" in out and "... and 130 more" in out, out
    assert len(_stored(tmp_path).facts) == 100
    assert {f.id for f in _stored(tmp_path).facts} == {f"f{i:03d}" for i in range(150, 250)}
    warnings = [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]
    assert len(warnings) == 1, warnings
    assert "user 'bob' agent '__default__'" in warnings[0] and "150 fact(s)" in warnings[0]
    assert "max_facts=100" in warnings[0]
    assert not [m for m in _records(caplog, logging.WARNING) if "Imported fact" in m]  # no text
    assert any("f000" in m and "f149" in m for m in _records(caplog, logging.DEBUG))


def test_import_with_verbose_lists_every_fact_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(tmp_path, "-v") == 0
    out = capsys.readouterr().out
    assert "f149: Imported fact number 149" in out and "more (-v" not in out


def test_a_deerflow_folder_import_over_max_facts_reports_and_logs_it_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "deer-flow"
    (folder / "users" / "bob").mkdir(parents=True)
    (folder / "users" / "bob" / "memory.json").write_text(
        json.dumps({"version": "1.0", "facts": _facts(250)}), encoding="utf-8"
    )
    config = _config(tmp_path)
    with caplog.at_level(logging.WARNING, logger="deermem_middleware"):
        assert main(["import", "--deerflow", str(folder), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "150 fact(s) over max_facts not kept (max_facts is 100" in out, out
    assert "user 'bob', agent '__default__': f000: Imported fact number 0" in out
    warnings = [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]
    assert len(warnings) == 1 and "user 'bob' agent '__default__'" in warnings[0], warnings
    assert _stored(tmp_path).trimmed.count == 150  # type: ignore[union-attr]


def test_the_trimmed_count_is_kept_in_the_document_and_shown_by_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(tmp_path) == 0
    trimmed = _stored(tmp_path).trimmed
    assert trimmed is not None and (trimmed.count, trimmed.lastCount) == (150, 150)
    assert trimmed.lastAt.startswith("20")
    capsys.readouterr()
    assert main(["stats", "--config", str(tmp_path / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "trimmed: 150 fact(s) deleted by max_facts" in out, out
    assert main(["stats", "--json", "--config", str(tmp_path / "config.yaml")]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["trimmed"], item["archived"]) == (150, 0)
    assert item["lastTrimmedAt"] == trimmed.lastAt


def test_stats_of_a_memory_never_trimmed_say_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, max_facts=500)
    assert main(["import", str(_source(tmp_path)), "--user", "bob", "--config", str(config)]) == 0
    capsys.readouterr()
    assert main(["stats", "--config", str(config)]) == 0
    assert "trimmed: none" in capsys.readouterr().out
    assert main(["stats", "--json", "--config", str(config)]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["trimmed"], item["lastTrimmedAt"]) == (0, None)


# -- the conversation's update -----------------------------------------------------------------


def _updater(tmp_path: Path, answers: list[str], max_facts: int = 100) -> MemoryUpdater:
    config = memory_config(tmp_path, storage_path=str(tmp_path / "mem"), max_facts=max_facts)
    model = ScriptedChatModel(answers=answers)
    counter = iter(range(1_000_000))
    return MemoryUpdater(
        JSONFileStorage(tmp_path / "mem", fsync=False),
        lambda: MemoryExtractor(model),
        config,
        clock=lambda: NOW,
        id_factory=lambda: f"fact_new{next(counter):03d}",
    )


def _turns(said: str) -> tuple[Any, ...]:
    from deermem_middleware.memory.conversation import Turn

    return (
        Turn("user", said, f"id:{said[:12]}u"),
        Turn("assistant", "Noted.", f"id:{said[:12]}a"),
    )


def test_an_update_over_max_facts_logs_a_warning_with_the_count_and_counts_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert _import(tmp_path) == 0  # 100 facts stored, 150 counted as trimmed
    answers = [
        update_json(facts=[("Works at Acme as a backend developer", "context", 0.95)]),
        update_json(facts=[("Learning Rust on weekends", "goal", 0.95)]),
    ]
    updater = _updater(tmp_path, answers)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="deermem_middleware"):
        first = updater.run(CaptureJob(BOB, "t1", _turns("I work at Acme as a backend developer.")))
    assert first.report is not None and len(first.report.facts.trimmed) == 1
    warnings = [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]
    assert len(warnings) == 1, warnings
    assert "user 'bob' agent '__default__'" in warnings[0] and "1 fact(s)" in warnings[0]
    assert "151 in all" in warnings[0], warnings[0]
    assert "Imported fact" not in warnings[0]
    assert any("f150" in m for m in _records(caplog, logging.DEBUG))  # the least valuable
    trimmed = _stored(tmp_path).trimmed
    assert trimmed is not None and (trimmed.count, trimmed.lastCount) == (151, 1)
    assert trimmed.lastAt == "2026-06-01T12:00:00Z"

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="deermem_middleware"):
        updater.run(CaptureJob(BOB, "t2", _turns("I am learning Rust on weekends.")))
    assert not [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]  # once
    later = [m for m in _records(caplog, logging.INFO) if "over max_facts" in m]
    assert len(later) == 1 and "user 'bob' agent '__default__'" in later[0], later
    assert "1 fact(s)" in later[0] and "152 in all" in later[0]
    assert _stored(tmp_path).trimmed.count == 152  # type: ignore[union-attr]


def test_archiving_is_logged_with_the_scope_and_the_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = JSONFileStorage(tmp_path / "mem", fsync=False)
    expired = Fact(
        id="f_trip",
        content="Is in Berlin this week",
        createdAt="2026-05-01T00:00:00Z",
        validUntil="2026-05-07",
    )
    storage.save(BOB, Memory(facts=(expired,)), 0)
    updater = _updater(tmp_path, [update_json(facts=[("Works at Acme", "context", 0.95)])])
    with caplog.at_level(logging.DEBUG, logger="deermem_middleware"):
        updater.run(CaptureJob(BOB, "t1", _turns("I work at Acme.")))
    assert _stored(tmp_path).facts[0].status == "archived"
    lines = [m for m in _records(caplog, logging.INFO) if "archived in this update" in m]
    assert len(lines) == 1 and "user 'bob' agent '__default__'" in lines[0], lines
    assert "1 fact(s)" in lines[0] and "Berlin" not in lines[0]
    assert _stored(tmp_path).trimmed is None  # archived facts stay: nothing was deleted


# -- the console and DeerFlow's gateway --------------------------------------------------------


def test_the_console_import_and_stats_report_the_facts_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from deermem_middleware.console import create_console_app
    from deermem_middleware.runtime.service import MemoryService
    from tests.console_api_cases import Api, ok, standard_auth

    service = MemoryService(memory_config(tmp_path, enabled=False, max_facts=100), storage=None)
    try:
        api = Api(create_console_app(service, auth=standard_auth()), [])
        document = {"version": "1.0", "facts": _facts(250)}
        with caplog.at_level(logging.WARNING, logger="deermem_middleware"):
            result = ok(api.post("/api/import", json={"user": "bob", "document": document}))
        assert result["added"] == 100
        assert result["overCapacity"] == [f"f{i:03d}" for i in range(150)]
        assert any("150 fact(s) over max_facts not kept" in n for n in result["capped"])
        warnings = [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]
        assert len(warnings) == 1 and "user 'bob'" in warnings[0] and "150" in warnings[0]
        (item,) = ok(api.get("/api/stats"))["scopes"]
        assert (item["user"], item["trimmed"]) == ("bob", 150)
    finally:
        service.close()


def test_the_gateway_import_logs_the_scope_and_counts_what_it_trimmed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = {"version": "1.0", "facts": _facts(250)}
    with caplog.at_level(logging.WARNING, logger="deermem_middleware"):
        incoming = gateway.imported(data, max_facts=100, now="2026-06-01T12:00:00Z", scope=BOB)
    assert len(incoming.facts) == 100
    assert incoming.trimmed is not None and incoming.trimmed.count == 150
    warnings = [m for m in _records(caplog, logging.WARNING) if "max_facts" in m]
    assert len(warnings) == 1 and "user 'bob' agent '__default__'" in warnings[0], warnings
    assert "150 fact(s)" in warnings[0]


# -- the document ------------------------------------------------------------------------------


def test_the_counter_is_optional_lenient_and_never_sent_to_deerflow() -> None:
    old = Memory.from_json_dict({"version": "1.0", "facts": []})
    assert old.trimmed is None and "trimmed" not in old.to_json_dict()  # old files unchanged
    counted = Memory.from_json_dict(
        {"trimmed": {"count": 3, "lastAt": "2026-06-01T12:00:00Z", "lastCount": 2}}
    )
    assert counted.trimmed is not None and counted.trimmed.count == 3
    assert Memory.from_json_dict(counted.to_json_dict()) == counted  # round trip
    assert "trimmed" not in to_deerflow(counted)  # DeerFlow's shape only
    for hostile in ("lots", [1], {"count": "many"}, {"count": 10**400}):
        memory = Memory.from_json_dict({"trimmed": hostile})  # a statistic: never a failure
        assert memory.trimmed is None or memory.trimmed.count <= 10**9
