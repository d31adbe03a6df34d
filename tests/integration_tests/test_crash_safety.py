"""A memory writer SIGKILLed at random moments, 200 times: nothing acknowledged is ever lost.

``workers/crash_zygote.py`` imports everything once and forks a fresh writer per round (Python with
LangChain takes seconds to start); each child loops capture -> flush and acknowledges every
applied update on a pipe until it is killed 1-60 ms after the fork — at start-up, mid-extraction
or mid-save. After every kill a fresh reader must find a valid document holding every marker ever
acknowledged. One run of the zygote serves both tests of this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 200
SEED = 20250301
MAX_STALE_TEMP_FILES = 2
"""A killed child can leave at most one half-written file per file it writes at once (the document
and its journal entry); a storage that cleans up after crashed writers stays at or below that."""


@pytest.fixture(scope="module")
def crash_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    storage = tmp_path_factory.mktemp("crash") / "memory"
    env = {**os.environ, "DEERMEM_EMBEDDINGS": "none"}
    zygote = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration_tests.workers.crash_zygote",
            str(storage),
            str(ROUNDS),
            str(SEED),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: children die with it on failure
    )
    try:
        out, err = zygote.communicate(timeout=300)
    finally:
        # the zygote and any child it left: they all share its process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(zygote.pid, signal.SIGKILL)
        if zygote.returncode is None:
            zygote.communicate()
    assert zygote.returncode == 0, f"zygote exited {zygote.returncode}:\n{err[-4000:]}"
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["stderr_tail"] = err[-2000:]
    yield report


def test_acknowledged_updates_survive_sigkill(crash_report: dict[str, Any]) -> None:
    """200 kills; after each one the document parses and holds every acknowledged marker."""
    report = crash_report
    print(
        f"\nrounds {report['rounds']}, kills {report['kills']}, acknowledged updates "
        f"{report['acks']} ({report['rounds_without_ack']} rounds killed before their first ack), "
        f"kills that left a half-written document {max(report['document_temp_files_after_round'])}"
        f", failures {len(report['failures'])}, zygote {report['seconds']}s"
    )
    assert report["rounds"] == ROUNDS
    assert report["failures"] == []
    assert report["acks"] > 0


def test_killed_writers_do_not_pile_up_temp_files(crash_report: dict[str, Any]) -> None:
    """Half-written temp files of killed writers are cleaned up, not left to grow with every
    crash (after each round no writer is alive: every temp file is an orphan)."""
    beside = crash_report["document_temp_files_after_round"]
    other = crash_report["other_temp_files_after_round"]
    print(
        f"\ntemp files next to the document: max {max(beside)}, final {beside[-1]}; "
        f"elsewhere under storage_path (journal): max {max(other)}, final {other[-1]}"
    )
    worst = max(a + b for a, b in zip(beside, other, strict=True))
    assert worst <= MAX_STALE_TEMP_FILES, (
        f"up to {worst} orphaned temp files after a round (final: {beside[-1]} beside the "
        f"document, {other[-1]} in the journal); they grow with every killed write"
    )
