"""DeerFlow #4637: the gateway builds the memory backend before it serves, and stops on failure.

The patched gateway's ``lifespan`` is driven as the pull request's own tests drive it
(``test_gateway_lifespan_shutdown.py``: the LangGraph runtime, skills projection, channels and
OIDC replaced by no-ops), but with DeerFlow's real ``config.yaml`` loading and its real
``get_memory_manager()`` building our backend. A bad ``backend_config`` must stop the start with
our one-line error naming the key (never a secret); a good one must start.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock, MagicMock, patch

import pytest

from deermem_middleware.config import ConfigError
from tests.deerflow_host.conftest import DeerFlowHost, deerflow_module

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
KEY = f"sk-e2e-{uuid.uuid4().hex}"


@contextlib.asynccontextmanager
async def _no_langgraph_runtime(_app: Any, _config: Any) -> AsyncIterator[None]:
    yield


def start_gateway(host: DeerFlowHost, backend_config: dict[str, Any]) -> AsyncMock:
    """DeerFlow's ``config.yaml`` with our backend and ``backend_config``; the patched gateway's
    lifespan run through (start, then shutdown). Returns the channel service's start, which the
    gateway awaits only once it is ready to serve."""
    from fastapi import FastAPI

    host.write_config(
        {
            "manager_class": MANAGER_CLASS,
            "shutdown_flush_timeout_seconds": 5,
            "backend_config": {"embeddings": "none", **backend_config},
        }
    )
    host.stop()  # the gateway builds the manager itself
    gateway_app = deerflow_module("app.gateway.app")
    source = Path(gateway_app.__file__).read_text(encoding="utf-8")
    assert "Failed to initialize configured memory manager" in source, (
        f"DeerFlow's gateway at {gateway_app.__file__} is not the copy with #4637 applied"
    )
    service = MagicMock()
    service.get_status.return_value = {}
    start_channels = AsyncMock(return_value=service)

    async def run() -> None:
        async with gateway_app.lifespan(FastAPI()):
            pass

    with (
        patch.object(gateway_app, "get_gateway_config", return_value=MagicMock(host="x", port=0)),
        patch.object(gateway_app, "langgraph_runtime", _no_langgraph_runtime),
        patch("deerflow.skills.projection.ensure_public_skill_projection"),
        patch.object(gateway_app.auth, "close_oidc_service", AsyncMock()),
        patch("app.channels.service.start_channel_service", start_channels),
        patch("app.channels.service.stop_channel_service", AsyncMock()),
    ):
        asyncio.run(run())
    return start_channels


@pytest.mark.parametrize(
    ("backend_config", "key"),
    [
        ({"max_facts": 0}, "max_facts"),
        ({"selection": "bm25"}, "selection"),
        ({"model": {"model": "gpt-4o-mini", "api_key": KEY}}, "model.api_key"),
        ({"model": {"model": "m", "api_key_env": "DEERMEM_E2E_UNSET_KEY"}}, "model"),
    ],
)
def test_a_bad_backend_config_stops_the_gateway_with_our_one_line_error(
    deerflow_host: DeerFlowHost,
    monkeypatch: pytest.MonkeyPatch,
    backend_config: dict[str, Any],
    key: str,
) -> None:
    monkeypatch.delenv("DEERMEM_E2E_UNSET_KEY", raising=False)
    with pytest.raises(RuntimeError) as raised:
        start_gateway(deerflow_host, backend_config)
    reported = str(raised.value)
    prefix = "Failed to initialize configured memory manager during Gateway startup: "
    assert reported.startswith(prefix), reported
    ours = raised.value.__cause__
    assert isinstance(ours, ConfigError), repr(ours)
    assert reported == prefix + str(ours)  # what the gateway reports is our error, whole
    assert "\n" not in reported
    assert f"memory.backend_config.{key}: " in reported
    assert KEY not in reported


def test_a_good_backend_config_starts_the_gateway(deerflow_host: DeerFlowHost) -> None:
    from deermem_middleware.deerflow import DeermemMemoryManager

    start_channels = start_gateway(deerflow_host, {"debounce_seconds": 0.5, "max_facts": 500})
    start_channels.assert_awaited_once()
    manager = deerflow_module("deerflow.agents.memory").get_memory_manager()
    assert isinstance(manager, DeermemMemoryManager)
    assert manager.config.max_facts == 500
