"""The local llama.cpp server helper: started, reachable, and never left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from deermem_middleware.extraction.local_llm import LocalLLMServer
from tests.integration_tests.conftest import require_local_llm


def _alive(pid: int) -> bool:
    """True while a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_server_answers_health_and_stops_on_exit() -> None:
    require_local_llm()
    with LocalLLMServer() as server:
        pid = server.pid
        assert pid is not None and _alive(pid)
        assert server.base_url.startswith("http://127.0.0.1:")
        health = server.base_url.removesuffix("/v1") + "/health"
        with urllib.request.urlopen(health, timeout=5) as response:
            assert response.status == 200
    assert not _alive(pid)


def test_server_stops_after_an_exception_inside_the_context() -> None:
    require_local_llm()
    pid = None
    with pytest.raises(RuntimeError, match="boom"), LocalLLMServer() as server:
        pid = server.pid
        raise RuntimeError("boom")
    assert pid is not None and not _alive(pid)


@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_server_dies_with_its_parent(how: str) -> None:
    """Ctrl-C (SIGINT) runs the context exit; SIGKILL of the parent is covered by the kernel's
    parent-death signal. Either way no llama-server is left behind."""
    require_local_llm()
    script = textwrap.dedent(
        """
        import signal, sys, time
        # a background job of a non-interactive shell starts with SIGINT ignored: undo that,
        # or Ctrl-C could never reach this child when the tests run under `cmd &` or nohup
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from deermem_middleware.extraction.local_llm import LocalLLMServer
        with LocalLLMServer() as server:
            print(server.pid, flush=True)
            time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        server_pid = int(child.stdout.readline())
        assert _alive(server_pid)
        child.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
        child.wait(timeout=30)
        assert _wait_gone(server_pid), f"llama-server {server_pid} outlived its parent ({how})"
    finally:
        if child.poll() is None:
            child.kill()


def test_a_port_taken_before_the_server_binds_it_is_left_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process can bind the free port between its pick and llama-server's own bind
    (llama-server then exits: "couldn't bind"): the start picks another port."""
    require_local_llm()
    from deermem_middleware.extraction import local_llm

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = [busy]
        real = local_llm._free_port
        monkeypatch.setattr(local_llm, "_free_port", lambda: picks.pop() if picks else real())
        with LocalLLMServer() as server:
            assert server.port != busy
            health = server.base_url.removesuffix("/v1") + "/health"
            with urllib.request.urlopen(health, timeout=5) as response:
                assert response.status == 200


def test_missing_gguf_is_a_clear_error(tmp_path: object) -> None:
    require_local_llm()
    from deermem_middleware.extraction.local_llm import LocalLLMError

    with pytest.raises(LocalLLMError, match="not found"):
        LocalLLMServer(gguf=os.path.join(str(tmp_path), "nope.gguf")).start()
