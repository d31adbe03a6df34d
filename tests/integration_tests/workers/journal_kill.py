"""SIGKILL a journal writer at random points of 1 MB entry writes, ROUNDS times.

    python -m tests.integration_tests.workers.journal_kill ROOT ROUNDS SEED

Per round this process forks a child that replaces one thread's journal entry in a loop,
alternating two 1 MB captures (A and B), with ``fsync`` in every other round (so part of each
cycle is a slow write to the disk); after a random delay of up to three write cycles (seeded,
calibrated at start) the child is SIGKILLed and reaped, and a fresh ``FileJournal`` must read
exactly one entry that is A or B whole. Before the first round the entry is A (so every round
has a previous entry to keep). Counts the kills that left a half-written temp file: proof that
kills landed in the middle of writes.

Prints one JSON line: rounds, complete (A/B counts), failures, kills_mid_write, seconds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.file_journal import FileJournal

SCOPE = MemoryScope("alice", "__default__")
SIZE = 1_000_000


def capture(label: str) -> tuple[Turn, ...]:
    body = (label * (SIZE // 2))[: SIZE // 2]
    return (Turn("user", body, f"u-{label}"), Turn("assistant", body, f"a-{label}"))


def main(argv: list[str]) -> int:
    root, rounds, seed = Path(argv[0]), int(argv[1]), int(argv[2])
    rng = random.Random(seed)
    captures = {"A": capture("A"), "B": capture("B")}
    calibrate = FileJournal(root, fsync=True)
    began = time.perf_counter()
    for _ in range(4):
        calibrate.put(SCOPE, "t", captures["A"])
    cycle = (time.perf_counter() - began) / 4
    seen = {"A": 0, "B": 0}
    failures: list[str] = []
    mid_write = 0
    started = time.monotonic()
    for number in range(rounds):
        pid = os.fork()
        if pid == 0:  # the writer: never returns
            journal = FileJournal(root, fsync=number % 2 == 0)
            label = "B"
            while True:
                journal.put(SCOPE, "t", captures[label])
                label = "A" if label == "B" else "B"
        time.sleep(rng.uniform(0.0, 3 * cycle))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        folder = FileJournal(root).path_for(SCOPE, "t").parent
        if any(p.name.endswith(".tmp") for p in folder.iterdir()):
            mid_write += 1
        entries = FileJournal(root).entries()  # a fresh reader, as a restarted process
        if len(entries) != 1:
            failures.append(f"round {number}: {len(entries)} entries")
            continue
        turns = entries[0].turns
        kind = next((k for k, v in captures.items() if v == turns), None)
        if kind is None:
            failures.append(f"round {number}: an entry that is neither A nor B")
            continue
        seen[kind] += 1
    report = {
        "rounds": rounds,
        "complete": seen,
        "failures": failures,
        "kills_mid_write": mid_write,
        "cycle_ms": round(1000 * cycle, 2),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
