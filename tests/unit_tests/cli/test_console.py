"""``deermem console`` before it serves: the loopback rule and ``--add-operator``."""

from __future__ import annotations

from pathlib import Path

import pytest

from deermem_middleware.cli import main
from deermem_middleware.cli.console import _is_loopback
from deermem_middleware.console.auth import token_digest
from deermem_middleware.console.operators import load_operators
from tests.helpers import write


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.5.0.9", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("example.com", False),
    ],
)
def test_only_loopback_addresses_count_as_local(host: str, loopback: bool) -> None:
    assert _is_loopback(host) is loopback


def test_a_non_loopback_host_needs_allow_remote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "config.yaml", f"memory:\n  storage_path: {tmp_path / 'm'}\n")
    status = main(["console", "--config", str(config), "--host", "0.0.0.0", "--port", "0"])
    err = capsys.readouterr().err
    assert status == 2
    assert "--host 0.0.0.0 is not a loopback address" in err
    assert "--allow-remote" in err
    assert not (tmp_path / "m").exists()  # refused before anything was opened


def test_add_operator_writes_a_digest_and_shows_the_token_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ops" / "operators.yaml"
    argv = ["console", "--operators", str(path), "--add-operator", "rita", "--role", "read"]
    assert main([*argv, "--users", "alice", "team-a/*"]) == 0
    out = capsys.readouterr().out
    token = out.rsplit("token (shown once; the file keeps only its SHA-256): ", 1)[1].strip()
    assert token not in path.read_text(encoding="utf-8")
    ((digest, operator),) = load_operators(path)
    assert digest == token_digest(token)
    assert (operator.name, operator.role) == ("rita", "read")
    assert operator.can_see("alice") and operator.can_see("team-a/bo")
    assert not operator.can_see("bob")
    assert path.stat().st_mode & 0o077 == 0  # only its owner reads the file
    # a second operator is appended; a taken name is refused
    assert main(["console", "--operators", str(path), "--add-operator", "sam"]) == 0
    assert [o.name for _, o in load_operators(path)] == ["rita", "sam"]
    capsys.readouterr()
    assert main(["console", "--operators", str(path), "--add-operator", "sam"]) == 2
    assert "an operator named 'sam' exists" in capsys.readouterr().err


def test_add_operator_needs_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console", "--add-operator", "rita"]) == 2
    assert "--add-operator needs --operators FILE" in capsys.readouterr().err


def test_a_bad_operators_file_names_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path / "operators.yaml",
        """
        operators:
          - name: sam
            role: admin
            token_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
        """,
    )
    config = write(tmp_path / "config.yaml", f"memory:\n  storage_path: {tmp_path / 'm'}\n")
    status = main(["console", "--config", str(config), "--operators", str(path), "--port", "0"])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{path}:3: operators.0.role: must be one of read, edit, got 'admin'" in err
