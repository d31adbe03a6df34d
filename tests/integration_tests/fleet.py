"""Driving several replica processes (:mod:`.workers.replica`) on one storage, as a load balancer
does: the replicas tests and ``benchmarks/replicas.py`` share it."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def turn_text(marker: str) -> str:
    return f"Please keep this in mind: my marker for today is {marker}."


@dataclass
class Replica:
    """One replica process and its command pipe."""

    process: subprocess.Popen[str]
    name: str
    _lines: queue.Queue[str] = field(default_factory=queue.Queue, repr=False)

    def __post_init__(self) -> None:
        def pump() -> None:  # its replies, read as they come: receive() waits for one, bounded
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self._lines.put(line)
            self._lines.put("")

        threading.Thread(target=pump, name=f"replica-{self.name}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 120.0) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"replica {self.name} (pid {self.pid}) sent no reply within {timeout:.0f}s"
            ) from None
        if not line:
            self.process.wait(timeout=30)
            err = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"replica {self.name} (pid {self.pid}) ended: {err[-3000:]}")
        return dict(json.loads(line))

    def ask(self, **command: Any) -> dict[str, Any]:
        self.send(**command)
        return self.receive()

    def signal(self, number: int) -> None:
        os.kill(self.pid, number)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def start_replicas(count: int, settings: dict[str, Any]) -> list[Replica]:
    """``count`` replica processes started together; returns once each said it is ready."""
    env = {**os.environ, "DEERMEM_EMBEDDINGS": "none", "PYTHONUNBUFFERED": "1"}
    replicas = []
    for number in range(count):
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration_tests.workers.replica", json.dumps(settings)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        replicas.append(Replica(process, f"r{number}"))
    try:
        for replica in replicas:
            assert "ready" in replica.receive(timeout=300)
    except BaseException:
        for replica in replicas:
            replica.stop()
        raise
    return replicas


@contextmanager
def fleet(count: int, settings: dict[str, Any]) -> Iterator[list[Replica]]:
    replicas = start_replicas(count, settings)
    try:
        yield replicas
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                with suppress(ProcessLookupError):
                    replica.signal(signal.SIGCONT)
            replica.stop()


@dataclass
class Traffic:
    """Threads of a conversation, each turn carrying its own marker."""

    threads: int
    turns: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def thread(self, number: int) -> str:
        return f"{self.tag}-t{number:03d}"

    def user(self, number: int) -> str:
        return f"{self.tag}-u{number % 5}"

    def marker(self, number: int, turn: int) -> str:
        return f"M{number}-C{turn:03d}"

    def users(self) -> list[str]:
        return sorted({self.user(n) for n in range(self.threads)})

    def markers(self) -> list[str]:
        return sorted(self.marker(n, k) for n in range(self.threads) for k in range(self.turns))

    def play(self, replicas: Sequence[Replica], route: Callable[[int, int], int]) -> list[float]:
        """Every turn of every thread, round by round (a thread's turns in order, the threads
        of a round in parallel on their replicas); ``route(thread, turn)`` picks the replica.
        Returns the capture times (ms) the replicas reported."""
        captures: list[float] = []
        for turn in range(self.turns):
            sent: list[Replica] = []
            for number in range(self.threads):
                replica = replicas[route(number, turn)]
                replica.send(
                    op="turn",
                    thread=self.thread(number),
                    user=self.user(number),
                    text=turn_text(self.marker(number, turn)),
                )
                sent.append(replica)
            for replica in sent:
                answer = replica.receive()
                assert answer.get("ok"), answer
                if answer.get("capture_ms") is not None:
                    captures.append(float(answer["capture_ms"]))
        return captures


def round_robin(replica_count: int) -> Callable[[int, int], int]:
    """Each turn of a thread on the next replica (no sticky sessions)."""
    return lambda number, turn: (number + turn) % replica_count


def sticky(replica_count: int) -> Callable[[int, int], int]:
    """Every turn of a thread on the same replica (sticky sessions)."""
    return lambda number, turn: number % replica_count


def stored_markers(storage: Any, users: Sequence[str]) -> Counter[str]:
    """How many times each marker is among the users' stored facts."""
    from deermem_middleware.storage import MemoryScope
    from deermem_middleware.testing import marker_of

    found: Counter[str] = Counter()
    for user in users:
        for fact in storage.load(MemoryScope(user)).memory.facts:
            marker = marker_of(fact.content)
            if marker is not None:
                found[marker] += 1
    return found


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.1) -> float | None:
    """Seconds until ``check()`` held (None: not within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(step)
    return None


def open_memory(dsn: str, prefix: str) -> Any:
    """The test's own view of the replicas' storage."""
    from deermem_middleware import MemoryConfig
    from deermem_middleware.config import StorageConfig
    from deermem_middleware.storage.factory import open_storage

    storage = StorageConfig(backend="postgres", dsn=dsn, prefix=prefix, pool_max_size=2)
    return open_storage(MemoryConfig(storage=storage, embeddings="none"))


def setup_checkpointer(dsn: str) -> None:
    """The shared checkpointer's tables, created once before the replicas start (LangGraph's
    saver migrates without a lock of its own; that is the host's business)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()


def everything_stored(
    storage: Any, traffic: Traffic, replicas: Sequence[Replica] = ()
) -> Callable[[], bool]:
    """A check: every marker of ``traffic`` stored, no pending entry left, no replica with work
    in progress (dead or stopped replicas are not asked)."""

    def check() -> bool:
        if set(stored_markers(storage, traffic.users())) != set(traffic.markers()):
            return False
        if storage.journal().entries():
            return False
        return all(r.ask(op="stats")["pending"] == 0 for r in replicas)

    return check
