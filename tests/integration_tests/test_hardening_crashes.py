"""Pending work under real crashes: a restarted container's pid 1, a full disk, SIGKILL mid-write.

Real processes and real signals. The pid-namespace and tmpfs tests need root (CI runs as root);
elsewhere they skip with the reason.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryMiddleware
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.testing import MarkerChatModel, marker_of
from tests.helpers import wait_for
from tests.integration_tests.test_local_server import _alive
from tests.integration_tests.workers.common import writer_config

ROOT = Path(__file__).resolve().parents[2]
SCOPE = MemoryScope("alice", "__default__")
ENV = {**os.environ, "DEERMEM_EMBEDDINGS": "none"}


def _needs_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (CI runs as root)")


def _in_new_pid_namespace(*argv: str) -> list[str]:
    """``argv`` as pid 1 of a new pid namespace, killed with its parent."""
    _needs_root("a pid namespace")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    return [unshare, "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", *argv]


def test_a_restart_with_the_same_pid_replays_its_predecessors_captures(tmp_path: Path) -> None:
    """Docker and Kubernetes restart an entrypoint as pid 1 again, on the same host name."""
    storage = str(tmp_path / "memory")
    writer = subprocess.Popen(
        _in_new_pid_namespace(
            sys.executable,
            "-m",
            "tests.integration_tests.workers.pending_then_killed",
            storage,
            "P1-C001",
        ),
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line.strip() == "captured pid=1", writer.stderr.read() if writer.stderr else line
        children = Path(f"/proc/{writer.pid}/task/{writer.pid}/children").read_text().split()
        writer.send_signal(signal.SIGKILL)  # unshare dies; --kill-child takes pid 1 with it
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    # the kernel kills pid 1 after unshare is gone, not before wait() returns: the restart
    # below must not meet the predecessor still alive
    wait_for(
        lambda: not any(_alive(int(pid)) for pid in children),
        f"the namespace's pid 1 (pids {children} here) to die with unshare",
        timeout=60,
    )
    [entry] = FileJournal(Path(storage) / "pending").entries()
    assert entry.pid == 1

    replay = subprocess.run(
        _in_new_pid_namespace(
            sys.executable, "-m", "tests.integration_tests.workers.replay_report", storage
        ),
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout.strip().splitlines()[-1])
    assert report["pid"] == 1  # the same pid as the process that journaled it
    assert [marker_of(f) for f in report["facts"]] == ["P1-C001"]
    assert report["flushed"] is True
    assert FileJournal(Path(storage) / "pending").entries() == []


@contextlib.contextmanager
def _tiny_tmpfs(folder: Path, size: str = "2m") -> Iterator[Path]:
    _needs_root("mounting a tmpfs")
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(disk: Path) -> None:
    """Write until the disk is full, to the last byte."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)


def _conversation(marker: str, padding: int = 0) -> list[Any]:
    return [
        HumanMessage(f"Please keep this in mind: my marker for today is {marker}." + "x" * padding),
        AIMessage(f"Understood, I will remember that your marker is {marker}."),
    ]


def test_a_full_disk_while_rejournaling_keeps_the_previous_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _tiny_tmpfs(tmp_path / "disk") as disk:
        config = writer_config(str(disk / "memory"), debounce_seconds=3600, max_wait_seconds=None)
        middleware = MemoryMiddleware(config, model=MarkerChatModel())
        first = _conversation("D1-C001")
        assert middleware.capture(first, user_id="alice", thread_id="t1")
        _fill(disk)
        second = [*first, *_conversation("D1-C002", padding=20_000)]
        with caplog.at_level(logging.ERROR):
            queued = middleware.capture(second, user_id="alice", thread_id="t1")
        assert queued  # the capture still waits in memory; only its journal entry failed
        assert "journaling the capture of thread 't1' failed" in caplog.text
        [entry] = FileJournal(disk / "memory" / "pending").entries()
        assert "D1-C001" in entry.turns[0].text and len(entry.turns) == 2  # the old one, whole
        assert not [p for p in (disk / "memory" / "pending").rglob("*.tmp")]
        (disk / "filler").unlink()
        assert middleware.flush(timeout=30)  # disk back: the newest capture is stored
        facts = sorted(marker_of(f.content) for f in middleware.get_memory("alice").facts)
        assert facts == ["D1-C001", "D1-C002"]
        middleware.close()


@pytest.mark.slow
def test_sigkill_during_megabyte_journal_writes_never_tears_an_entry(tmp_path: Path) -> None:
    rounds = 50
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration_tests.workers.journal_kill",
            str(tmp_path / "pending"),
            str(rounds),
            "20261201",
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"\njournal kills: {report}")
    assert report["failures"] == []
    assert sum(report["complete"].values()) == rounds
    assert report["kills_mid_write"] > 0  # the kills did land in the middle of writes
