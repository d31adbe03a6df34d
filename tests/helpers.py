"""Fixtures shared by the tests: a test config, and config files written and loaded (the config
tests). The test doubles and prompt helpers (scripted and marker chat models, the OpenAI stub,
system_text) live in :mod:`deermem_middleware.testing`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AnyMessage, RemoveMessage
from langgraph.runtime import Runtime

from deermem_middleware import MemoryConfig
from deermem_middleware.config import ConfigError, load_memory_config
from deermem_middleware.memory.document import Fact


def memory_config(tmp_path: Path, **overrides: Any) -> MemoryConfig:
    """A config for tests: files under ``tmp_path/memory``, an hour of debounce (tests flush),
    no flush at exit, no embeddings; ``overrides`` win."""
    values: dict[str, Any] = {
        "storage_path": str(tmp_path / "memory"),
        "debounce_seconds": 3600,
        "flush_on_exit_seconds": None,
        "embeddings": "none",
    }
    values.update(overrides)
    return MemoryConfig(**values)


def dead_pid() -> int:
    """The pid of a process that has ended (a journal entry's owner that is gone)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def wait_for(
    check: Callable[[], Any],
    what: str,
    *,
    timeout: float = 120.0,
    step: float = 0.05,
    seen: Callable[[], Any] | None = None,
) -> Any:
    """Poll ``check()`` until it returns something truthy, and return that; past ``timeout``
    seconds fail the test naming ``what`` was awaited and what was seen last (``seen()``, else
    the last value of ``check()``). The timeout only bounds a hang: it is no timing assertion,
    so keep it generous."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            last = seen() if seen is not None else value
            raise AssertionError(f"waited {timeout:.0f}s for {what}; last seen: {last!r}")
        time.sleep(step)


def write(path: Path, text: str) -> Path:
    """``text`` (dedented, leading newlines dropped) written to ``path``, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """1-based line number of the first line containing ``needle``."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def error_of(path: Path, *, agent_name: str | None = None, user_id: str | None = None) -> str:
    """The message of the :class:`ConfigError` that loading ``path`` raises (fails if none)."""
    with pytest.raises(ConfigError) as info:
        load_memory_config(path, agent_name=agent_name, user_id=user_id)
    return str(info.value)


def make_fact(fact_id: str, content: str, **extra: Any) -> Fact:
    """A knowledge fact (confidence 0.9, created 2026-01-01) with ``extra`` fields on top."""
    defaults: dict[str, Any] = {
        "category": "knowledge",
        "confidence": 0.9,
        "createdAt": "2026-01-01T00:00:00Z",
    }
    return Fact(id=fact_id, content=content, **{**defaults, **extra})


@contextmanager
def postgres_store(dsn: str) -> Iterator[Any]:
    """LangGraph's ``PostgresStore`` on a pool to ``dsn``, set up (twice: it is idempotent)."""
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=8,
        open=True,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    try:
        store = PostgresStore(pool)
        store.setup()
        store.setup()
        yield store
    finally:
        pool.close()


class KeepLastTwo(AgentMiddleware[AgentState[Any], Any]):
    """Trims a thread's history to its last two messages after every model call (as a
    history-window middleware does), removing the rest from the checkpointed state."""

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return keep_last_two(state["messages"])


def keep_last_two(messages: list[AnyMessage]) -> dict[str, Any] | None:
    """The state update that keeps only the last two of ``messages``."""
    if len(messages) <= 2:
        return None
    return {"messages": [RemoveMessage(id=m.id) for m in messages[:-2] if m.id]}
