"""One agent-server replica: a real ``create_agent`` agent with ``MemoryMiddleware`` on a shared
storage and a shared PostgreSQL checkpointer, driven by JSON lines on stdin.

    python -m tests.integration_tests.workers.replica CONFIG_JSON

``CONFIG_JSON``: ``{"dsn": ..., "prefix": ..., "debounce": s, "lease": s, "slow": s}`` (``slow``:
seconds each extraction call takes, to catch a replica in the middle of one). The replica is
stateless, as a server behind a load balancer is: every turn is ``agent.invoke`` with the new user
message on its thread, the checkpointer supplies the conversation so far, and the middleware
captures it after the turn. Commands (one JSON object per line, one reply line each):

- ``{"op": "turn", "thread": t, "user": u, "text": ...}`` → ``{"ok": true, "capture_ms": ...}``
- ``{"op": "stats"}`` → extraction calls, pending updates, the coordinator's counts
- ``{"op": "close"}`` → a graceful shutdown (bounded flush, hand-over), then exit
- ``{"op": "setup", "dsn": ..., "backend": "postgres" | "sqlite", "at": t}`` (with
  ``CONFIG_JSON`` ``{"setup_only": true}``): open the memory storage at ``dsn`` (a DSN or a
  SQLite file) — tables created — at wall-clock time ``at``; reply ok or the error (the test
  of replicas starting at the same moment on a fresh database).

Prints ``{"ready": pid}`` once built. Extraction is :class:`MarkerChatModel` (one fact per
marker; the calls are what is counted).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from deermem_middleware.testing import MarkerChatModel, RecordingAgentModel, prompt_markers


class SlowMarkerModel(MarkerChatModel):
    """A marker model whose every call takes ``delay`` seconds (a real model takes seconds)."""

    delay: float = 0.0

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self.delay:
            time.sleep(self.delay)
        return super()._generate(messages, *args, **kwargs)


def reply(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def memory_config(settings: dict[str, Any], location: str, backend: str = "postgres") -> Any:
    """The replicas' config: ``location`` is a DSN, or the SQLite file (``backend: sqlite``)."""
    from deermem_middleware import MemoryConfig
    from deermem_middleware.config import StorageConfig

    prefix = settings.get("prefix", "deermem")
    if backend == "postgres":
        storage = StorageConfig(backend="postgres", dsn=location, prefix=prefix, pool_max_size=4)
    else:
        storage = StorageConfig(backend="sqlite", path=location, prefix=prefix)
    values: dict[str, Any] = {
        "storage": storage,
        "debounce_seconds": settings.get("debounce", 2.0),
        "max_wait_seconds": settings.get("max_wait"),
        "replica_lease_seconds": settings.get("lease", 3.0),
        "embeddings": "none",
        "max_facts": 10_000,
        "flush_on_exit_seconds": None,
    }
    if "replica_lease_seconds" not in MemoryConfig.model_fields:  # a version before leases
        del values["replica_lease_seconds"]
    return MemoryConfig(**values)


def setup_loop(settings: dict[str, Any]) -> int:
    from deermem_middleware import MemoryMiddleware

    reply(ready=os.getpid())
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] != "setup":
            break
        config = memory_config(settings, command["dsn"], command.get("backend", "postgres"))
        while time.time() < command["at"]:
            time.sleep(0.0005)
        try:
            middleware = MemoryMiddleware(config, model=MarkerChatModel())
        except Exception as exc:
            reply(ok=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0])
            continue
        middleware.close(timeout=0)
        reply(ok=True)
    return 0


def answer(messages: list[BaseMessage]) -> str:
    human = [m for m in messages if m.type == "human"]
    markers = prompt_markers([HumanMessage(f"<conversation>{human[-1].content}</conversation>")])
    return f"Understood, I will remember that your marker is {', '.join(markers) or 'unknown'}."


def main(argv: list[str]) -> int:
    settings = json.loads(argv[0])
    if settings.get("setup_only"):
        return setup_loop(settings)
    from langchain.agents import create_agent
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    from deermem_middleware import MemoryMiddleware

    dsn = settings["dsn"]
    model = SlowMarkerModel(delay=settings.get("slow", 0.0))
    memory = MemoryMiddleware(memory_config(settings, dsn), model=model)
    conn = Connection.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    agent = create_agent(
        RecordingAgentModel(answers=[answer]),
        [],
        middleware=[memory],
        checkpointer=PostgresSaver(conn),
    )
    captures: list[float] = []
    original = memory.service.capture

    def timed_capture(*args: Any, **kwargs: Any) -> bool:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            captures.append((time.perf_counter() - started) * 1000)

    memory.service.capture = timed_capture  # type: ignore[method-assign]
    reply(ready=os.getpid())
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "turn":
            agent.invoke(
                {"messages": [HumanMessage(command["text"])]},
                {"configurable": {"thread_id": command["thread"], "user_id": command["user"]}},
            )
            reply(ok=True, capture_ms=captures[-1] if captures else None)
        elif op == "stats":
            replicas = memory.service._replicas  # None: a storage no other process sees
            reply(
                calls=len(model.calls),
                markers=[m for call in model.calls for m in call.conversation],
                pending=memory.service._scheduler.pending(),
                coordinator=replicas.stats.snapshot() if replicas is not None else {},
                captures_ms=captures,
            )
        elif op == "close":
            memory.close(timeout=settings.get("close_timeout", 10.0))
            reply(ok=True)
            break
        else:
            reply(ok=False, error=f"unknown op {op!r}")
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
