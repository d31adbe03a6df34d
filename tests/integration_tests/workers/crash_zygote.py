"""A writer killed with SIGKILL at random moments, ROUNDS times, checked after every kill.

    python -m tests.integration_tests.workers.crash_zygote STORAGE ROUNDS SEED

Python with LangChain imported takes seconds to start, so this process imports everything (and
runs one update, to trigger lazy imports) once, then per round ``os.fork()`` s a child that loops
capture -> flush with a unique marker per cycle and, each time ``flush()`` returned with its update
applied, writes ``ack <marker>`` to a pipe. After a random 1-60 ms (seeded; several distributions,
so kills land at start-up, mid-extraction and mid-save) the child is SIGKILLed and reaped, the pipe
drained, and the stored document must parse strictly (JSON, revision, a valid ``Memory``), load in
a *fresh* ``JSONFileStorage`` (no cache), and hold every marker ever acknowledged.

The child builds its own ``MemoryMiddleware`` (threads do not survive ``fork``: no thread may
exist here before forking) on the JSON-file storage, with and without ``fsync`` (see ``child``).

Prints one JSON line: rounds, kills, acks, failures (with details), temp files left in the
storage folder after each round, seconds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from deermem_middleware.derived.derive import Deriver
from deermem_middleware.derived.storing import DerivingStorage
from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.memory.conversation import filter_messages
from deermem_middleware.memory.document import Memory
from deermem_middleware.retrieval.selector import FactSelector, SelectionParams
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater, UpdateOutcome
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.testing import MarkerChatModel, marker_of
from tests.integration_tests.workers.common import conversation, writer_config, writer_middleware

USER, AGENT = "alice", "coder"
SCOPE = MemoryScope(USER, AGENT)
MAX_CYCLES = 100_000  # the child is always killed long before


def child(storage: str, round_no: int, ack_fd: int, zygote: int) -> None:
    """Never returns: loops until killed; on any error writes it to the pipe and exits 3; exits
    4 if the zygote is gone (never outlives a failed run).

    Every other block of four rounds saves without ``fsync``: it only guards against power loss
    (a killed process's writes are in the page cache either way), and without it a round gets
    through more saves — more acknowledged updates to check; with it (the default) the write
    window is longer and more kills land mid-save.
    """
    try:
        mw, _ = writer_middleware(storage, AGENT, fsync=(round_no // 4) % 2 == 0)
        applied: dict[str, str] = {}

        def listen(job: CaptureJob, outcome: UpdateOutcome) -> None:
            applied[job.thread_id] = outcome.status

        mw.add_update_listener(listen)
        for cycle in range(MAX_CYCLES):
            if os.getppid() != zygote:
                os._exit(4)
            marker = f"R{round_no:03d}-C{cycle:03d}"
            thread = f"r{round_no:03d}-c{cycle:03d}"
            if not mw.capture(conversation(marker), user_id=USER, thread_id=thread):
                raise RuntimeError(f"capture of {marker} queued nothing")
            if not mw.flush(timeout=30):
                raise RuntimeError(f"flush of {marker} did not finish")
            if applied.get(thread) != "applied":
                raise RuntimeError(f"update of {marker} ended {applied.get(thread)!r}")
            os.write(ack_fd, f"ack {marker}\n".encode())
    except BaseException:
        os.write(ack_fd, f"error {traceback.format_exc()!r}\n".encode())
        os._exit(3)
    os._exit(0)


def kill_delay(rng: random.Random, round_no: int) -> float:
    """Seconds the child may run, 1-60 ms, from one of four distributions by round."""
    kind = round_no % 4
    if kind == 0:
        ms = rng.uniform(1, 60)
    elif kind == 1:
        ms = 60 ** rng.random()  # log-uniform: many kills during start-up and the first save
    elif kind == 2:
        ms = rng.uniform(40, 60)  # long enough for a few acknowledged saves
    else:
        ms = rng.choice((5, 20, 35, 50)) + rng.uniform(-4, 4)  # bands across the save cycle
    return ms / 1000


def drain(fd: int) -> list[str]:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode().splitlines()


def strict_markers(path: Path) -> set[str]:
    """The markers of the document on disk, parsed without the storage's own code paths."""
    data = json.loads(path.read_bytes().decode("utf-8"))
    revision = data.pop("revision")
    if not isinstance(revision, int) or revision < 1:
        raise ValueError(f"bad revision {revision!r}")
    data.pop("scope", None)
    return {marker_of(f.content) or f.content for f in Memory.from_json_dict(data).facts}


def check(storage: str, acked: set[str]) -> list[str]:
    """Problems with the stored document as a fresh reader sees it ([] when none)."""
    fresh = JSONFileStorage(storage)  # a new instance: nothing cached
    path = fresh.path_for(SCOPE)
    problems = []
    try:
        on_disk = strict_markers(path) if path.exists() else set()
    except Exception as exc:
        return [f"document does not parse: {type(exc).__name__}: {exc}"]
    try:
        loaded = {marker_of(f.content) or f.content for f in fresh.load(SCOPE).memory.facts}
    except Exception as exc:
        return [f"load() failed: {type(exc).__name__}: {exc}"]
    if loaded != on_disk:
        problems.append(f"load() differs from the file: {sorted(loaded ^ on_disk)}")
    if missing := sorted(acked - on_disk):
        problems.append(f"acknowledged but missing: {missing}")
    if aside := sorted(p.name for p in path.parent.glob("*corrupted*")):
        problems.append(f"documents moved aside as corrupted: {aside}")
    return problems


def temp_files(root: Path) -> tuple[int, int]:
    """(temp files next to the document, temp files elsewhere under the storage folder)."""
    document_folder = JSONFileStorage(root).path_for(SCOPE).parent
    temps = list(root.rglob("*.tmp")) if root.is_dir() else []
    beside = sum(p.parent == document_folder for p in temps)
    return beside, len(temps) - beside


def warm_up(scratch: Path) -> None:
    """One whole update here, without threads, so the lazy imports and first-call set-up it
    triggers are inherited by every child (otherwise each child spends ~1 s on them)."""
    config = writer_config(str(scratch))
    # through the layer that derives every write, as the engine writes: the screen's rules and
    # learned model load here, once, not in every child
    storage = DerivingStorage(JSONFileStorage(scratch), Deriver())
    updater = MemoryUpdater(storage, lambda: MemoryExtractor(MarkerChatModel()), config)
    job = CaptureJob(SCOPE, "warm-up", tuple(filter_messages(conversation("W0-C000"))))
    if updater.run(job).status != "applied":
        raise SystemExit("warm-up update did not apply")
    FactSelector(SelectionParams.from_config(config)).index(SCOPE, storage.load(SCOPE).memory)


def main(argv: list[str]) -> int:
    storage, rounds_text, seed_text = argv
    rounds, rng = int(rounds_text), random.Random(int(seed_text))
    with tempfile.TemporaryDirectory() as scratch:
        warm_up(Path(scratch))
    if threading.active_count() != 1:
        raise SystemExit(f"threads alive before fork: {threading.enumerate()}")
    acked: set[str] = set()
    failures: list[dict[str, Any]] = []
    temps: list[tuple[int, int]] = []
    rounds_without_ack = 0
    started = time.perf_counter()
    for round_no in range(rounds):
        read_fd, write_fd = os.pipe()
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            child(storage, round_no, write_fd, zygote)
        os.close(write_fd)
        try:
            time.sleep(kill_delay(rng, round_no))
        finally:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        lines = drain(read_fd)
        os.close(read_fd)
        new = [line.split(" ", 1)[1] for line in lines if line.startswith("ack ")]
        acked.update(new)
        rounds_without_ack += not new
        problems = [line for line in lines if not line.startswith("ack ")]
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            problems.append(f"child ended by itself (wait status {status})")
        problems.extend(check(storage, acked))
        if problems:
            failures.append({"round": round_no, "acks": len(new), "problems": problems})
        temps.append(temp_files(Path(storage)))
    report = {
        "rounds": rounds,
        "kills": rounds,
        "acks": len(acked),
        "rounds_without_ack": rounds_without_ack,
        "failures": failures,
        "document_temp_files_after_round": [t[0] for t in temps],
        "other_temp_files_after_round": [t[1] for t in temps],
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
