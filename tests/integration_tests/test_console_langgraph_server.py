"""The console as a LangGraph server's custom app (``http.app`` in ``langgraph.json``), for real:
``langgraph dev`` (the in-memory LangGraph API server) serves an agent with our middleware and
the console beside it, in one process, on one engine.

The dev server also runs a blocking-call detector on its event loop: the agent's async capture
must not block it (it did: the journal write's ``os.mkdir`` was refused and the capture went
unjournaled), so the server log is checked for memory errors too.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from deermem_middleware.storage.file_journal import FileJournal
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

STARTUP_SECONDS = 180.0
"""Only a bound on a hang: the server starts in seconds, more on a busy machine."""
API_LINE = re.compile(r"API: (http://127\.0\.0\.1:\d+)")
"""The line of ``langgraph dev``'s banner that names the address it serves (colours removed)."""
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
TOKEN = "console-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MEMORY = (
    'MemoryConfig(storage_path=os.environ["MEM_PATH"], debounce_seconds=3600, embeddings="none")'
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _project(root: Path) -> None:
    (root / "graph.py").write_text(
        textwrap.dedent(
            f"""
            import os
            from langchain.agents import create_agent
            from deermem_middleware import MemoryConfig, MemoryMiddleware
            from deermem_middleware.testing import RecordingAgentModel

            graph = create_agent(RecordingAgentModel(), [], middleware=[MemoryMiddleware({MEMORY})])
            """
        )
    )
    (root / "console_app.py").write_text(
        textwrap.dedent(
            f"""
            import os
            from deermem_middleware import MemoryConfig
            from deermem_middleware.console import create_console_app
            from deermem_middleware.runtime.service import MemoryService

            engine = MemoryService.acquire({MEMORY})  # the agent's engine: the same config
            tokens = {{os.environ["CONSOLE_TOKEN"]: ("sam", "edit")}}
            app = create_console_app(engine, tokens=tokens)
            """
        )
    )
    (root / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {"agent": "./graph.py:graph"},
                "http": {"app": "./console_app.py:app"},
            }
        )
    )


def _run(base: str, text: str) -> None:
    answer = httpx.post(
        f"{base}/runs/wait",
        json={
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": text}]},
            "config": {"configurable": {"user_id": "alice"}},
        },
        timeout=60,
    )
    assert answer.status_code == 200, answer.text


def _start(root: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``langgraph dev`` in ``root``, once it answers ``/ok``; its base URL. The URL is read from
    what the server prints: when another process took the free port first, ``langgraph dev``
    serves on another one ("Port N is already in use, using port M instead")."""
    langgraph = Path(sys.executable).with_name("langgraph")
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(_free_port())],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def printed_url() -> str | None:
        found = API_LINE.search(COLOUR.sub("", log.read_text(errors="replace")))
        if found is None and server.poll() is not None:
            raise AssertionError(f"`langgraph dev` exited {server.returncode}:\n{log.read_text()}")
        return found.group(1) if found else None

    def answers() -> bool:
        assert server.poll() is None, f"`langgraph dev` exited:\n{log.read_text()[-3000:]}"
        try:
            return httpx.get(f"{base}/ok", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        what = "`langgraph dev` to print its API address"
        base = wait_for(printed_url, what, timeout=STARTUP_SECONDS, seen=log.read_text)
        what = f"`langgraph dev` to answer {base}/ok"
        wait_for(answers, what, timeout=STARTUP_SECONDS, step=0.5, seen=log.read_text)
    except BaseException:
        _stop(server)
        raise
    return server, base


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=30)


def test_the_console_runs_as_a_langgraph_servers_custom_app(tmp_path: Path) -> None:
    pytest.importorskip("langgraph_api", reason="the dev extra installs langgraph-cli[inmem]")
    _project(tmp_path)
    log = tmp_path / "server.log"
    env = {
        **os.environ,
        "MEM_PATH": str(tmp_path / "memory"),
        "CONSOLE_TOKEN": TOKEN,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_NO_TELEMETRY": "1",
        "PYTHONUNBUFFERED": "1",  # its log written as it goes, not lost in a buffer at the stop
    }
    server, base = _start(tmp_path, env, log)
    try:
        # the custom app is mounted: without it the server answers 404 here, not the
        # console's own 401 (its "Loaded custom app" log line is not always flushed by the
        # time the server is stopped, so the log is not what this asserts)
        assert httpx.get(f"{base}/api/users").status_code == 401
        fact = {"id": "fact_go", "content": "Writes backend services in Go", "confidence": 0.9}
        seeded = httpx.post(
            f"{base}/api/import",
            headers=AUTH,
            json={"user": "alice", "document": {"facts": [fact]}},
        )
        assert seeded.status_code == 200, seeded.text

        _run(base, "Which language should the worker use?")
        (record,) = httpx.get(f"{base}/api/ledger", headers=AUTH).json()["records"]
        assert record["user"] == "alice"
        assert [f["content"] for f in record["facts"]] == ["Writes backend services in Go"]

        facts = httpx.get(f"{base}/api/facts", params={"user": "alice"}, headers=AUTH).json()
        edited = httpx.patch(
            f"{base}/api/facts/fact_go",
            headers=AUTH,
            json={
                "user": "alice",
                "version": facts["facts"][0]["version"],
                "content": "Writes backend services in Rust",
            },
        )
        assert edited.status_code == 200, edited.text
        _run(base, "Which language should the worker use?")
        latest = httpx.get(f"{base}/api/ledger", headers=AUTH).json()["records"][0]
        assert [f["content"] for f in latest["facts"]] == ["Writes backend services in Rust"]

        # both captures journaled on the server's event loop (where its blocking-call detector
        # refused the journal's os.mkdir once): the journal itself is the witness, not the log
        entries = FileJournal(tmp_path / "memory" / "pending").entries()
        assert len(entries) == 2 and {e.scope.user_id for e in entries} == {"alice"}, entries
    finally:
        _stop(server)
    text = log.read_text()
    assert "journaling the capture" not in text and "BlockingError" not in text, text[-3000:]
