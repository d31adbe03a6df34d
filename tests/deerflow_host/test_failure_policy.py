"""``memory.backend_config.failure_policy.read`` through DeerFlow's own prompt loader.

DeerFlow's host loads the memory context with ``_get_memory_context``
(``agents/lead_agent/prompt.py``): it catches every error, logs it and injects nothing — unless
the error is DeerFlow's ``MemoryManagerError`` and ``backend_config.failure_policy.read`` is
``fail_closed``; then it re-raises and the turn fails. Our backend raises that error on a failed
read under ``fail_closed`` and answers "" (logged) under ``fail_open``, DeerFlow's default. The
outage is real: after a first read succeeds, our storage folder in DeerFlow's data folder is
replaced by a file.
"""

from __future__ import annotations

import logging
import shutil

import pytest

from tests.deerflow_host.conftest import DeerFlowHost, deerflow_module

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
USER = "maya"
FACT = "Maya keeps her notes in plain Markdown files"


def broken_storage(host: DeerFlowHost, read: str | None) -> None:
    """DeerFlow with our backend (and ``failure_policy.read`` when given), a fact DeerFlow's
    loader injects, then our storage folder replaced by a file."""
    backend_config: dict[str, object] = {"embeddings": "none", "debounce_seconds": 3600}
    if read is not None:
        backend_config["failure_policy"] = {"read": read}
    host.write_config({"manager_class": MANAGER_CLASS, "backend_config": backend_config})
    host.memory_manager()
    with host.gateway() as gateway:
        response = gateway.post(
            "/api/memory/facts",
            json={"content": FACT, "category": "context", "confidence": 0.9},
            headers=host.as_user(USER),
        )
        assert response.status_code == 200, response.text
    assert FACT in load_context()  # the storage answers: the fact reaches the prompt
    shutil.rmtree(host.ours)
    host.ours.write_text("not a folder any more", encoding="utf-8")


def load_context() -> str:
    """DeerFlow's prompt loader, as its ``DynamicContextMiddleware`` calls it."""
    prompt = deerflow_module("deerflow.agents.lead_agent.prompt")
    return str(prompt._get_memory_context(None, user_id=USER))


def test_fail_closed_raises_deerflows_memory_error_through_its_loader(
    deerflow_host: DeerFlowHost,
) -> None:
    broken_storage(deerflow_host, "fail_closed")
    error = deerflow_module("deerflow.agents.memory").MemoryManagerError
    with pytest.raises(error, match=USER):
        load_context()


@pytest.mark.parametrize("read", ["fail_open", None], ids=["fail_open", "default"])
def test_fail_open_injects_nothing_and_logs_the_failure(
    deerflow_host: DeerFlowHost, caplog: pytest.LogCaptureFixture, read: str | None
) -> None:
    broken_storage(deerflow_host, read)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert load_context() == ""
    ours = [r for r in caplog.records if r.name.startswith("deermem_middleware")]
    assert any(r.levelno >= logging.WARNING for r in ours), caplog.text
