"""Helpers for the console's browser tests: Debian's Chromium under Playwright, a real
``deermem console`` subprocess over a seeded JSON-file storage, the ``deermem`` CLI as the
independent witness of every change, and the screenshots.

Without Playwright or ``/usr/bin/chromium`` the tests skip with the reason — unless
``DEERMEM_REQUIRE_BROWSER=1`` (set by CI), which turns the skip into a failure. Playwright's own
browser download (``playwright install``) is never used: the system Chromium is.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware.config import load_memory_config
from deermem_middleware.memory.document import Memory
from deermem_middleware.runtime.service import MemoryService

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# This machine has no internet: without these Chromium floods refused connections (updates,
# sync, QUIC probes) and --no-sandbox is needed as root in a container.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REQUIRE_BROWSER = os.environ.get("DEERMEM_REQUIRE_BROWSER") == "1"
STARTUP_SECONDS = 60.0
CLI_SECONDS = 60.0


def require_browser() -> None:
    """Skip (or, under DEERMEM_REQUIRE_BROWSER=1, fail) without Playwright or Chromium."""
    problem = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        problem = f"playwright is not installed ({exc})"
    if problem is None and not CHROMIUM.exists():
        problem = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if problem is None:
        return
    if REQUIRE_BROWSER:
        pytest.fail(f"DEERMEM_REQUIRE_BROWSER=1 but {problem}")
    pytest.skip(problem)


def artifacts_dir() -> Path:
    """Where screenshots go: ``$DEERMEM_ARTIFACTS``, else ``artifacts/console`` in the repo."""
    folder = Path(os.environ.get("DEERMEM_ARTIFACTS") or REPO / "artifacts" / "console")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(page: Any, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# -- the deermem command --------------------------------------------------------------------------


def deermem_command() -> list[str]:
    """The installed ``deermem`` script next to this Python, else the module."""
    script = Path(sys.executable).with_name("deermem")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "deermem_middleware.cli"]


def cli(*args: str) -> str:
    """``deermem ARGS``' stdout; fails the test with stderr when it exits non-zero."""
    done = subprocess.run(
        [*deermem_command(), *args],
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, f"deermem {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


def stored(config: Path, user: str, agent: str | None = None) -> dict[str, Any]:
    """The document ``deermem show --json --all`` prints (every status, with revision)."""
    args = ["show", "--config", str(config), "--user", user, "--json", "--all"]
    if agent is not None:
        args += ["--agent", agent]
    data: dict[str, Any] = json.loads(cli(*args))
    return data


def stored_facts(config: Path, user: str, agent: str | None = None) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in stored(config, user, agent)["facts"]}


# -- seeding --------------------------------------------------------------------------------------


def section(summary: str, at: str = "2026-03-01T09:00:00Z") -> dict[str, str]:
    return {"summary": summary, "updatedAt": at}


def fact(fact_id: str, content: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": fact_id,
        "content": content,
        "category": "context",
        "confidence": 0.8,
        "createdAt": "2026-02-01T10:00:00Z",
        "updatedAt": "2026-02-01T10:00:00Z",
        "sourceKind": "stated",
    }
    data.update(fields)
    return data


def document(facts: list[dict[str, Any]], **sections: dict[str, str]) -> dict[str, Any]:
    user = {
        k: v for k, v in sections.items() if k in ("workContext", "personalContext", "topOfMind")
    }
    history = {k: v for k, v in sections.items() if k not in user}
    return {"lastUpdated": "2026-03-01T09:00:00Z", "user": user, "history": history, "facts": facts}


def _replaced_by(data: dict[str, Any]) -> Callable[[Memory], Memory]:
    new = Memory.from_json_dict(data)
    return lambda _old: new


def seed(config: Path, documents: dict[tuple[str, str | None], dict[str, Any]]) -> None:
    """Store each ``(user, agent)``'s document, through the storage the config names."""
    memory_config = load_memory_config(config)
    service = MemoryService(memory_config.model_copy(update={"enabled": False}))
    try:
        for (user, agent), data in documents.items():
            service._storage.update(service.scope(user, agent), _replaced_by(data))
    finally:
        service.close(timeout=5.0)


# -- the console ----------------------------------------------------------------------------------


@dataclass
class RunningConsole:
    base: str
    """``http://127.0.0.1:PORT/``"""
    link: str
    """The one-time login link it printed."""
    process: subprocess.Popen[str]
    log: Path


@contextmanager
def console_process(config: Path, *args: str, log: Path) -> Iterator[RunningConsole]:
    """``deermem console --config CONFIG --port 0 ARGS`` until the block ends; its URL and
    login link read from the lines it prints."""
    command = [*deermem_command(), "console", "--config", str(config), "--port", "0", *args]
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:  # drain stdout so the process never blocks on a full pipe
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            base = link = None
            while link is None:
                try:
                    line = lines.get(timeout=STARTUP_SECONDS)
                except queue.Empty:
                    line = None
                if line is None:
                    raise AssertionError(
                        f"`deermem console` printed no login link:\n{log.read_text()}"
                    )
                if line.startswith("memory console on "):
                    base = line.split(" on ", 1)[1].split()[0]
                elif "one-time login link" in line:
                    link = line.rsplit(" ", 1)[1].strip()
            assert base and link.startswith(f"{base}login?token="), (base, link)
            yield RunningConsole(base, link, process, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    import time

    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
