"""End to end on DeerFlow itself: no key of ours is ever shown by DeerFlow's memory API.

DeerFlow's ``GET /api/memory/config`` and ``GET /api/memory/status`` return
``memory.backend_config`` as it is to every signed-in user, and DeerFlow replaces ``$VAR`` in its
``config.yaml`` with the variable's value before anything reads it. So keys come from the
environment: ``api_key_env: NAME`` (our ``model:`` and ``embeddings:``, an agent's own model), or
the provider's own variable (``OPENAI_API_KEY``) with nothing written. A key written in
``backend_config`` — literally or as ``$VAR`` — stops our backend at start with one line that
names the key and never shows it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from deermem_middleware.config import ConfigError
from tests.deerflow_host.conftest import DeerFlowHost

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
USER = "maya"
LLM_KEY = f"sk-e2e-llm-{uuid.uuid4().hex}"
EMBED_KEY = f"sk-e2e-embed-{uuid.uuid4().hex}"
OPENAI_KEY = f"sk-e2e-openai-{uuid.uuid4().hex}"
SECRETS = (LLM_KEY, EMBED_KEY, OPENAI_KEY)


def backend_configs(host: DeerFlowHost) -> dict[str, dict[str, Any]]:
    """Every way this suite configures a key for our backend under DeerFlow."""
    model = {"model": host.llm.alias, "base_url": host.llm.base_url}
    embeddings = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"}
    return {
        "api_key_env": {
            "embeddings": {**embeddings, "api_key_env": "DEERMEM_E2E_EMBED_KEY"},
            "model": {**model, "api_key_env": "DEERMEM_E2E_LLM_KEY"},
        },
        "the provider's own variable": {"embeddings": embeddings, "model": dict(model)},
        "an agent's own model": {
            "embeddings": "none",
            "agents": {"coder": {"model": {**model, "api_key_env": "DEERMEM_E2E_LLM_KEY"}}},
        },
        "DeerFlow's default model": {"embeddings": "none"},
    }


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEERMEM_E2E_LLM_KEY", LLM_KEY)
    monkeypatch.setenv("DEERMEM_E2E_EMBED_KEY", EMBED_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


def configure(host: DeerFlowHost, backend_config: dict[str, Any]) -> None:
    host.write_config(
        {
            "manager_class": MANAGER_CLASS,
            "shutdown_flush_timeout_seconds": 5,
            "backend_config": {"debounce_seconds": 0.5, **backend_config},
        }
    )


def test_deerflows_memory_config_and_status_show_no_key(
    deerflow_host: DeerFlowHost, keys: None
) -> None:
    host = deerflow_host
    for name, backend_config in backend_configs(host).items():
        configure(host, backend_config)
        manager = host.memory_manager()  # our backend starts with the key from the environment
        if "api_key_env" in name:
            model = manager.config.model
            assert model is not None and model.api_key is not None
            assert model.api_key.get_secret_value() == LLM_KEY
        with host.gateway() as gateway:
            for route in ("/api/memory/config", "/api/memory/status"):
                response = gateway.get(route, headers=host.as_user(USER))
                assert response.status_code == 200, (name, route, response.text)
                shown = response.text
                assert [key for key in SECRETS if key in shown] == [], (name, route)
                if name == "api_key_env":  # what is shown is the variable's name
                    assert "DEERMEM_E2E_LLM_KEY" in shown and "DEERMEM_E2E_EMBED_KEY" in shown
        host.stop()


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ({"model": {"model": "m", "api_key": "$DEERMEM_E2E_LLM_KEY"}}, "model.api_key"),
        ({"model": {"model": "m", "api_key": LLM_KEY}}, "model.api_key"),
        (
            {"embeddings": {"provider": "openai", "api_key": "$DEERMEM_E2E_EMBED_KEY"}},
            "embeddings.api_key",
        ),
        ({"model": {"model": "m", "api_key_env": "$DEERMEM_E2E_LLM_KEY"}}, "model.api_key_env"),
    ],
)
def test_a_key_written_in_backend_config_stops_our_backend_with_one_line(
    deerflow_host: DeerFlowHost, keys: None, written: dict[str, Any], key: str
) -> None:
    """DeerFlow resolves ``$VAR`` first: ``api_key: $VAR`` reaches us as the key itself."""
    host = deerflow_host
    configure(host, written)
    with pytest.raises(ConfigError) as raised:
        host.memory_manager()
    message = str(raised.value)
    assert message.startswith(f"memory.backend_config.{key}: "), message
    assert "\n" not in message
    assert [secret for secret in SECRETS if secret in message] == []
    assert "_env" in message and "/api/memory/config" in message
