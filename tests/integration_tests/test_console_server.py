"""``deermem console`` for real: a subprocess on loopback, its printed login link, its tokens."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from deermem_middleware.console.operators import add_operator
from tests.helpers import write

pytestmark = pytest.mark.slow


@contextmanager
def _console(*args: str) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """The running command, its base URL and its login link (read from what it prints)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "deermem_middleware.cli", "console", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
        assert first.startswith("memory console on http://"), (first, process.stderr.read())
        base = first.split(" on ", 1)[1].split(" ", 1)[0]
        assert "one-time login link" in second
        link = second.rsplit(": ", 1)[1].strip()
        assert link.startswith(f"{base}login?token=")
        yield base, link, process
    finally:
        process.terminate()
        process.wait(timeout=10)


def _config(tmp_path: Path) -> Path:
    return write(tmp_path / "config.yaml", f"memory:\n  storage_path: {tmp_path / 'memory'}\n")


def test_the_printed_link_logs_in_once(tmp_path: Path) -> None:
    with _console("--config", str(_config(tmp_path)), "--login-as", "sam") as (base, link, _):
        with httpx.Client(follow_redirects=True) as client:
            assert client.get(f"{base}api/users").status_code == 401
            page = client.get(base)
            assert page.status_code == 200 and 'name="token"' in page.text  # the login page
            assert "Content-Security-Policy" in page.headers
            answer = client.get(link)  # follows the redirect to the page
            assert answer.status_code == 200
            assert "deermem_console" in client.cookies
            session = client.get(f"{base}api/session").json()
            assert (session["operator"], session["role"]) == ("sam", "edit")
            assert session["csrf"]
        with httpx.Client() as other:  # the link is spent
            assert other.get(link).status_code == 401
            assert "deermem_console" not in other.cookies


def test_operators_tokens_work_and_a_read_only_link_cannot_change(tmp_path: Path) -> None:
    operators = tmp_path / "operators.yaml"
    token, _ = add_operator(operators, "rita", "read", ["alice"])
    args = ("--config", str(_config(tmp_path)), "--operators", str(operators))
    with _console(*args, "--login-as", "rita") as (base, link, _):
        bearer = {"Authorization": f"Bearer {token}"}
        answer = httpx.get(f"{base}api/session", headers=bearer)
        assert answer.json()["users"] == ["alice"]
        assert httpx.get(f"{base}api/users", headers={"Authorization": "Bearer nope"}).is_error
        refused = httpx.post(
            f"{base}api/import",
            headers=bearer,
            json={"user": "alice", "document": {"facts": []}},
        )
        assert refused.status_code == 403 and "read role" in refused.json()["error"]
        with httpx.Client(follow_redirects=True) as client:
            client.get(link)
            assert client.get(f"{base}api/session").json()["role"] == "read"


def test_allow_remote_serves_beyond_loopback_with_a_warning(tmp_path: Path) -> None:
    args = ("--config", str(_config(tmp_path)), "--host", "0.0.0.0", "--allow-remote")
    with _console(*args) as (base, _, process):
        assert base.startswith("http://0.0.0.0:")
        port = base.rsplit(":", 1)[1].rstrip("/")
        assert httpx.get(f"http://127.0.0.1:{port}/api/users").status_code == 401
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert "warning: serving the memory console on 0.0.0.0" in err


def test_the_listening_socket_names_tcp_so_replies_are_not_delayed() -> None:
    """asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP: without it each
    reply waited ~40 ms for the client's delayed ACK (benchmarks/console_api.py measured 48 ms
    per request, against 3 ms with it)."""
    import socket

    from deermem_middleware.cli.console import _listen

    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
