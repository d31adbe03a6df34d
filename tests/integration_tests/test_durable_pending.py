"""Pending captures survive SIGKILL: the next process on the same storage replays them, and the
facts arrive exactly once (also after a second restart)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from deermem_middleware import MemoryMiddleware
from deermem_middleware.testing import MarkerChatModel, marker_of
from tests.integration_tests.workers.common import is_dsn, open_target, writer_config

from .conftest import storage_location

ROOT = Path(__file__).resolve().parents[2]
MARKERS = ["K1-C001", "K1-C002", "K1-C003"]


def _restart(location: str) -> tuple[MemoryMiddleware, MarkerChatModel]:
    model = MarkerChatModel()
    if is_dsn(location):
        config = writer_config("/nonexistent")
        return MemoryMiddleware(config, model=model, storage=open_target(location)), model
    return MemoryMiddleware(writer_config(location), model=model), model


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_pending_captures_survive_sigkill_exactly_once(tmp_path: Path, backend: str) -> None:
    location = storage_location(backend, tmp_path)
    env = {**os.environ, "DEERMEM_EMBEDDINGS": "none", "DEERMEM_TEST_PREFIX": uuid.uuid4().hex}
    os.environ["DEERMEM_TEST_PREFIX"] = env["DEERMEM_TEST_PREFIX"]
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration_tests.workers.pending_then_killed",
            location,
            *MARKERS,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line.startswith("captured"), writer.stderr.read() if writer.stderr else line
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == -signal.SIGKILL

    restarted, model = _restart(location)  # replays the journal at construction
    assert restarted.flush(timeout=60)
    facts = restarted.get_memory("alice").facts
    assert sorted(marker_of(f.content) for f in facts) == MARKERS
    assert len(model.calls) == len(MARKERS)
    assert restarted.service._journal is not None and restarted.service.pending_entries() == []
    restarted.close()
    restarted.service._storage.close()

    again, model = _restart(location)  # nothing left to replay: nothing applied twice
    assert again.recover() == 0
    assert again.flush(timeout=10)
    assert len(again.get_memory("alice").facts) == len(MARKERS)
    assert model.calls == []
    again.close()
    again.service._storage.close()
