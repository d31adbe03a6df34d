"""The command line on bad storage settings and odd leftovers: one clear line, no traceback, and
receipts that count only what was really there."""

from __future__ import annotations

from pathlib import Path

import pytest

from deermem_middleware.cli import main
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.json_file import encode_name


def _config(tmp_path: Path, memory: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"memory:\n  embeddings: none\n{memory}", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "verb", [["show", "--user", "bob"], ["stats"], ["export", "--user", "bob"]]
)
def test_a_sqlite_path_in_a_missing_folder_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    config = _config(tmp_path, "  storage: {backend: sqlite, path: no/such/folder/memory.db}\n")
    code = main([*verb, "--config", str(config)])
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err and "OperationalError" not in err
    assert "storage.path" in err and "does not exist" in err
    assert "no/such/folder" in err
    assert not (tmp_path / "no").exists()  # nothing created on the way


def test_the_forget_receipt_counts_only_pending_captures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreadable journal entry is set aside when read (``.<name>.unreadable-<time>``); the
    folder it stays in is removed by ``forget``, but it is not a pending capture."""
    config = _config(tmp_path, "  storage_path: mem\n")
    journal = FileJournal(tmp_path / "mem" / "pending")
    scope = MemoryScope("bob", "__default__")
    journal.put(scope, "thread-1", (Turn("user", "I keep bees", "fp-1"),))
    folder = tmp_path / "mem" / "pending" / encode_name("bob") / encode_name("__default__")
    (folder / "thread-2.json").write_text("{not json", encoding="utf-8")
    assert [e.thread_id for e in journal.entries()] == ["thread-1"]  # sets thread-2 aside
    assert any(".unreadable-" in p.name for p in folder.iterdir())

    assert main(["forget", "--user", "bob", "--yes", "--config", str(config)]) == 0
    receipt = capsys.readouterr().out
    assert "pending captures of agent '__default__': 1" in receipt
    assert "1 pending capture(s)" in receipt
    assert not folder.exists()
