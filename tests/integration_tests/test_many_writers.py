"""Four OS processes writing one user's memory at once: no update may be lost.

Each process runs ``workers/many_writers.py``: 100 capture -> flush cycles against the same user,
agent and JSON-file ``storage_path``, every cycle with a unique marker that a deterministic
extraction model turns into one fact. The processes pass a start barrier together, so their
saves really interleave; the revision compare-and-set (plus the ``flock``) must keep all 400
facts. The same run with a plain read-modify-write that ignores revisions shows the loss the
protection prevents (informational: how many survive depends on timing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.memory.document import Memory
from deermem_middleware.storage import MemoryScope
from deermem_middleware.testing import marker_of
from tests.integration_tests.workers.common import open_target

from .conftest import storage_location

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
CYCLES = 100
USER, AGENT = "alice", "coder"
EXPECTED = {f"P{p}-C{c:03d}" for p in range(PROCESSES) for c in range(CYCLES)}


@contextmanager
def _started(procs: list[subprocess.Popen[str]]) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _run_writers(
    storage: str, mode: str, tmp_path: Path, processes: int = PROCESSES, cycles: int = CYCLES
) -> list[dict[str, Any]]:
    """Start the writers, open the barrier once all are ready, return their JSON reports."""
    go = tmp_path / f"go-{mode}"
    env = {
        **os.environ,
        "DEERMEM_EMBEDDINGS": "none",
        "DEERMEM_TEST_PREFIX": f"t{uuid.uuid4().hex[:12]}",
    }
    os.environ["DEERMEM_TEST_PREFIX"] = env["DEERMEM_TEST_PREFIX"]  # for reading back
    procs: list[subprocess.Popen[str]] = []
    with _started(procs):
        for number in range(processes):
            args = [storage, USER, AGENT, str(number), str(cycles), mode, str(go)]
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.integration_tests.workers.many_writers", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        deadline = time.monotonic() + 240
        ready = [Path(f"{go}.ready-{p}") for p in range(processes)]
        while not all(r.exists() for r in ready):
            exited = [p for p in procs if p.poll() is not None]
            assert not exited, f"a writer exited before the barrier: {exited[0].communicate()}"
            assert time.monotonic() < deadline, "writers never reached the start barrier"
            time.sleep(0.01)
        go.touch()
        outputs = [proc.communicate(timeout=600) for proc in procs]
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, f"writer exited {proc.returncode}:\n{err[-4000:]}"
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _stored_memory(storage: str) -> Memory:
    target = open_target(storage)
    try:
        return target.load(MemoryScope(USER, AGENT)).memory
    finally:
        target.close()


def _stored_markers(storage: str) -> list[str]:
    memory = _stored_memory(storage)
    return [marker_of(f.content) or f"<unexpected fact {f.content!r}>" for f in memory.facts]


@pytest.mark.parametrize(
    ("backend", "mode"), [("file", "threads"), ("file", "turns"), ("postgres", "threads")]
)
def test_four_processes_lose_no_update(tmp_path: Path, backend: str, mode: str) -> None:
    """4 x 100 concurrent capture -> flush cycles end with exactly the 400 facts, one per marker."""
    storage = storage_location(backend, tmp_path)
    reports = _run_writers(storage, mode, tmp_path)

    conflicts = sum(r["conflicts"] for r in reports)
    print(
        f"\n[{backend}/{mode}] revision conflicts: {conflicts} "
        f"(per process {[r['conflicts'] for r in reports]}); "
        f"seconds per process {[r['seconds'] for r in reports]}; "
        f"statuses {[r['statuses'] for r in reports]}"
    )
    markers = _stored_markers(storage)
    print(
        f"[{backend}/{mode}] protected run: {len(set(markers) & EXPECTED)}/{len(EXPECTED)} "
        "facts stored"
    )
    problems = {
        r["proc"]: {k: r[k] for k in ("not_applied", "flush_timeouts", "drained")}
        for r in reports
        if r["not_applied"] or r["flush_timeouts"] or not r["drained"]
    }
    # 400 facts, each marker exactly once
    assert sorted(markers) == sorted(EXPECTED), f"missing {sorted(EXPECTED - set(markers))}: " + (
        f"updates not applied when flush() returned, by process: {problems}"
    )
    assert problems == {}, (
        f"flush() returned with updates not applied (applied later or never): {problems}"
    )
    for report in reports:
        assert report["odd_prompts"] == 0, report  # each extraction saw exactly its own marker
    memory = _stored_memory(storage)
    expected_sources = {
        f"P{p}-C{c:03d}": f"p{p}-c{c:03d}" if mode == "threads" else f"p{p}"
        for p in range(PROCESSES)
        for c in range(CYCLES)
    }
    assert {marker_of(f.content): f.source for f in memory.facts} == expected_sources


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_unprotected_read_modify_write_loses_updates(tmp_path: Path, backend: str) -> None:
    """The same run with saves that ignore revisions: how many of the 400 facts survive (printed;
    the number depends on timing, so it is not asserted). On PostgreSQL: the store's own
    last-writer-wins ``put``."""
    storage = storage_location(backend, tmp_path)
    reports = _run_writers(storage, "unprotected", tmp_path)
    markers = set(_stored_markers(storage))
    survived = len(markers & EXPECTED)
    print(
        f"\n[{backend}/unprotected] {survived}/{len(EXPECTED)} facts survived "
        f"({len(EXPECTED) - survived} lost); seconds per process {[r['seconds'] for r in reports]}"
    )
    assert markers <= EXPECTED


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_two_workers_sharing_a_thread_store_each_fact_once(tmp_path: Path, backend: str) -> None:
    """Two processes capture the same growing conversation of one thread (as when a load balancer
    sends a thread's turns to either worker): the thread's watermark, stored with the memory and
    advanced with compare-and-set, makes every fact appear exactly once."""
    storage = storage_location(backend, tmp_path)
    cycles = 40
    reports = _run_writers(storage, "shared", tmp_path, processes=2, cycles=cycles)
    markers = _stored_markers(storage)
    expected = [f"S0-C{c:03d}" for c in range(cycles)]
    extracted = [m for r in reports for m in r["extracted"]]
    repeats = len(extracted) - len(set(extracted))
    print(
        f"\n[{backend}/shared] {len(set(markers))}/{cycles} facts, "
        f"{len(extracted)} turn(s) extracted in all, {repeats} extracted by both workers "
        f"(concurrent captures of the same turn), statuses {[r['statuses'] for r in reports]}"
    )
    assert sorted(markers) == expected  # each fact once: no duplicates, none missing
    assert set(extracted) == set(expected)
