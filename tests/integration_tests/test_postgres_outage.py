"""A real PostgreSQL stopped under a running agent: turns go on, the outage's updates are stored.

A database outage once cost each agent turn about a minute (the memory read and the journal
write each waited psycopg_pool's 30 s for a connection). Here a ``create_agent`` agent with
``MemoryMiddleware`` on PostgreSQL runs turns before, during and after an outage of its own
server — ``pg_ctl stop -m immediate``, as a crash or a failover looks to the client — with
scripted models (the agent's, and a marker-following extraction model). Asserted: every turn
completes, no memory is injected while the server is down, and once it is back a flush stores
the facts of the outage turns. Each turn's duration is printed, never asserted.

Two outages: the server *stopped* (connections refused: the pool fails fast) and the server
*frozen* (``SIGSTOP``: connections stay open and nobody answers, as in a network partition —
only the hot-path timeout bounds a turn then). Turns are paced so that the outage outlasts the
guard's probe interval: the printed table shows the turns that probe (bounded by
``storage_timeout_seconds``) and those that skip the storage at once.

The test starts its own throwaway server (``.ci/postgres.sh`` with a data folder and a free
port of its own), so a server on the default port — another test run's — is left alone. It
needs the PostgreSQL server binaries: without them it skips, unless
``DEERMEM_REQUIRE_POSTGRES=1`` (CI), which makes that a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.testing import MarkerChatModel, RecordingAgentModel, marker_of, system_text

from .conftest import REQUIRE_POSTGRES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "postgres.sh"
OUTAGE_TURNS = 10
OUTAGE_PACE_SECONDS = 1.0
"""Pause between outage turns (a person types): ten turns outlast the probe interval (5 s)."""
NORMAL_TURNS = 4
FLUSH_SECONDS = 60.0


def _server_bin() -> Path:
    """The folder of ``pg_ctl`` (skip, or fail under DEERMEM_REQUIRE_POSTGRES=1, without)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        found = [p for p in [shutil.which("pg_ctl")] if p]
    if not found:
        message = (
            "PostgreSQL server binaries (pg_ctl) not found; `.ci/postgres.sh start` installs them"
        )
        if REQUIRE_POSTGRES:
            pytest.fail(f"DEERMEM_REQUIRE_POSTGRES=1 but {message}")
        pytest.skip(message)
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """A throwaway server: started by ``.ci/postgres.sh``, stopped and restarted here."""

    bin: Path
    data: Path
    port: int
    dsn: str = ""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DEERMEM_PGDATA": str(self.data), "DEERMEM_PGPORT": str(self.port)}

    def _pg_ctl(self, *args: str) -> None:
        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), *args]
        if os.geteuid() == 0:  # the server refuses to run as root (as .ci/postgres.sh does)
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        done = subprocess.run(
            ["bash", str(SCRIPT), "start"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        line = next(x for x in done.stdout.splitlines() if "DEERMEM_TEST_DSN=" in x)
        self.dsn = line.split("DEERMEM_TEST_DSN=", 1)[1].strip()

    def kill(self) -> None:
        """Stop at once, as a crash does: clients see their connections drop."""
        self._pg_ctl("-m", "immediate", "stop")

    def _processes(self) -> list[int]:
        """The postmaster and its children (the backends holding our connections)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, timeout=10
        ).stdout.split()
        return [postmaster, *map(int, children)]

    def freeze(self) -> None:
        """Stop answering without closing anything, as a partitioned network looks."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):  # a backend that just ended
                os.kill(pid, sig)

    def restart(self) -> None:
        """Start the same data folder again (``.ci/postgres.sh start`` would wipe it)."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.data} -c fsync=off -c max_connections=200"
        )
        self._pg_ctl("-l", str(self.data / "server.log"), "-w", "-o", options, "start")

    def remove(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.thaw()  # a frozen server cannot stop
        finally:
            self._stop()

    def _stop(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPT), "stop"], env=self.env, capture_output=True, timeout=120
        )


@pytest.fixture
def server() -> Iterator[Server]:
    binaries = _server_bin()
    parent = Path(tempfile.mkdtemp(prefix="deermem-pg-outage-"))
    parent.chmod(0o755)  # the server runs as the postgres user
    pg = Server(binaries, parent / "data", _free_port())
    try:
        pg.start()
        yield pg
    finally:
        try:
            pg.remove()  # stopped and its data folder removed, whatever the test did to it
        finally:
            shutil.rmtree(parent, ignore_errors=True)


@dataclass
class Turn:
    phase: str
    marker: str
    seconds: float
    injected: bool


@pytest.mark.parametrize("outage", ["stopped", "frozen"])
def test_agent_turns_survive_a_postgres_outage_and_its_updates_are_stored(
    server: Server, outage: str
) -> None:
    config = MemoryConfig(
        storage={
            "backend": "postgres",
            "dsn": server.dsn,
            "prefix": f"outage{uuid.uuid4().hex[:8]}",
        },  # type: ignore[arg-type]
        debounce_seconds=0.05,
        max_wait_seconds=1.0,
        retry_base_seconds=0.1,  # storage retries after 0.5 s, doubling up to 2 s
        retry_max_seconds=2.0,
        flush_on_exit_seconds=None,
        embeddings="none",
    )  # storage_timeout_seconds: the default
    extraction = MarkerChatModel()
    mw = MemoryMiddleware(config, model=extraction)
    model = RecordingAgentModel()
    agent = create_agent(model, [], middleware=[mw], checkpointer=InMemorySaver())
    turns: list[Turn] = []

    def turn(phase: str, marker: str) -> Turn:
        config: Any = {"configurable": {"thread_id": f"{phase}-{marker}", "user_id": "alice"}}
        started = time.perf_counter()
        result = agent.invoke({"messages": [HumanMessage(f"Note {marker} for me.")]}, config)
        seconds = time.perf_counter() - started
        assert result["messages"][-1].type == "ai"  # the turn completed with an answer
        done = Turn(phase, marker, seconds, "<memory>" in system_text(model.seen[-1]))
        turns.append(done)
        return done

    try:
        for i in range(NORMAL_TURNS):
            turn("before", f"B1-C{i:03d}")
            assert mw.flush(timeout=FLUSH_SECONDS)
        assert turns[-1].injected  # the earlier turns' facts were there

        server.kill() if outage == "stopped" else server.freeze()
        during: list[Turn] = []
        for i in range(OUTAGE_TURNS):
            time.sleep(OUTAGE_PACE_SECONDS if i else 0.0)
            during.append(turn("outage", f"O1-C{i:03d}"))
        assert not any(t.injected for t in during)

        server.restart() if outage == "stopped" else server.thaw()
        assert mw.flush(timeout=FLUSH_SECONDS)
        stored = {marker_of(f.content) for f in mw.get_memory("alice").facts}
        assert {t.marker for t in during} <= stored
        assert turn("after", "A1-C000").injected
    finally:
        if outage == "frozen":
            server.thaw()  # before closing: the pool's connections must be able to end
        _report(outage, turns)
        mw.close(timeout=10)


def _report(outage: str, turns: list[Turn]) -> None:
    print(f"\nturn durations around a PostgreSQL outage, server {outage} (scripted models):")
    print(f"  {'phase':<8} {'marker':<9} {'seconds':>8}  memory injected")
    for t in turns:
        print(f"  {t.phase:<8} {t.marker:<9} {t.seconds:>8.3f}  {'yes' if t.injected else 'no'}")
    for phase in ("before", "outage", "after"):
        seconds = [t.seconds for t in turns if t.phase == phase]
        if seconds:
            print(
                f"  {phase}: median {statistics.median(seconds):.3f}s, "
                f"max {max(seconds):.3f}s over {len(seconds)} turn(s)"
            )
