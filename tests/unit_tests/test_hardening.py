"""Hardening: each test reproduces one defect adversarial probing found (and failed before its fix).

The crash-level proofs (real processes, signals, pid namespaces, a full tmpfs) are in
``tests/integration_tests/test_hardening_crashes.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.config import ConfigError, load_memory_config
from deermem_middleware.retry import CircuitBreaker

from ..helpers import OpenAIStub, update_json


def _config(tmp_path: Path, **kw: Any) -> MemoryConfig:
    defaults: dict[str, Any] = {
        "storage_path": str(tmp_path / "memory"),
        "debounce_seconds": 0,
        "flush_on_exit_seconds": None,
        "embeddings": "none",
    }
    defaults.update(kw)
    return MemoryConfig(**defaults)


# -- 3. a long outage ------------------------------------------------------------------------------


def test_the_back_off_never_overflows_however_long_the_outage() -> None:
    breaker = CircuitBreaker(base_seconds=2.0, max_seconds=300.0, threshold=3, jitter=lambda: 1.0)
    delays = [breaker.record_failure() for _ in range(5000)]  # 1,025 used to raise
    assert max(delays) == 300 and delays[-1] == 300
    assert breaker.is_open


def test_a_two_day_outage_keeps_the_work_pending_until_the_endpoint_is_back(
    tmp_path: Path,
) -> None:
    ok = update_json(facts=[("User writes Go at a payments company", "knowledge", 0.9)])
    down = True

    def reply(body: dict[str, Any]) -> Any:
        import httpx

        if down:
            return httpx.Response(503, json={"error": {"message": "down", "type": "server"}})
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "stub",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ok},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    stub = OpenAIStub([reply])
    config = _config(tmp_path, retry_base_seconds=0.01, retry_max_seconds=0.05)
    mw = MemoryMiddleware(config, model=stub.model(timeout=5))
    # two days of a dead endpoint at a 2 s base and a 300 s cap: well over 1,025 failures
    mw.breaker.failures = 2 * 86_400 // 300 * 3
    mw.capture(
        [HumanMessage("I write Go at a payments company."), AIMessage("Nice.")],
        user_id="alice",
        thread_id="t1",
    )
    deadline = time.monotonic() + 5
    while len(stub.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(stub.requests) >= 3  # it kept probing
    assert mw.flush(timeout=0.2) is False  # still down: not "done"
    assert mw.scheduler.pending() == 1
    assert len(mw.journal.entries()) == 1  # type: ignore[union-attr]
    down = False
    deadline = time.monotonic() + 10
    while not mw.get_memory("alice").facts and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [f.content for f in mw.get_memory("alice").facts] == [
        "User writes Go at a payments company"
    ]
    assert mw.flush(timeout=5) is True
    mw.close()


# -- 10. config ------------------------------------------------------------------------------------

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path: Path, where: str) -> None:
    text = (
        BILLION_LAUGHS + "memory:\n  enabled: true\n"
        if where == "outside"
        else "memory:\n  enabled: true\n  agents:\n"
        + "".join(f"    {line}\n" for line in BILLION_LAUGHS.splitlines())
    )
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"config\.yaml:\d+: invalid YAML: aliases expand"):
        load_memory_config(path)
    assert time.monotonic() - started < 2


def test_self_referencing_and_deeply_nested_yaml_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("memory: &m\n  agents: *m\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="an alias refers to itself"):
        load_memory_config(path)
    path.write_text("memory: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_memory_config(path)


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "defaults: &d {top_k: 7}\nmemory:\n  agents:\n    coder: *d\n", encoding="utf-8"
    )
    assert load_memory_config(path, agent_name="coder").top_k == 7


@pytest.mark.parametrize("value", ['""', '"   "', "${EMPTY_DIR}"])
def test_a_blank_storage_path_is_the_default_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EMPTY_DIR", "")
    path = tmp_path / "config.yaml"
    path.write_text(f"memory:\n  storage_path: {value}\n", encoding="utf-8")
    assert load_memory_config(path).storage_path == "~/.deermem"
    assert MemoryConfig(storage_path="").storage_path == "~/.deermem"


@pytest.mark.parametrize("name", ["coder\n", "coder\nevil", "co der", ""])
def test_agent_names_with_newlines_or_spaces_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("memory: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="agent name must match"):
        load_memory_config(path, agent_name=name)
    with pytest.raises(ValueError, match="agent name must match"):
        MemoryConfig(agent_name=name)
