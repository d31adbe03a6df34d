"""DeerFlow's ``memory.backend_config`` read as our config: keys come from the environment.

DeerFlow's ``GET /api/memory/config`` and ``/api/memory/status`` return ``backend_config`` as it
is to every signed-in user, and DeerFlow resolves ``$VAR`` before passing it, so a key written
there — literally or as ``$VAR`` — is refused at start with one line naming the key.
"""

from __future__ import annotations

from typing import Any

import pytest

from deermem_middleware.config import ConfigError
from deermem_middleware.deerflow.backend_config import (
    agent_config_from_backend_config,
    memory_config_from_backend_config,
    refuse_written_secrets,
)

KEY = "sk-proj-Zq81x0secretsecret"


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ({"model": {"model": "gpt-4o-mini", "api_key": KEY}}, "model.api_key"),
        ({"embeddings": {"provider": "openai", "api_key": KEY}}, "embeddings.api_key"),
        (
            {"model": {"use": "langchain_openai:ChatOpenAI", "options": {"openai_api_key": KEY}}},
            "model.options.openai_api_key",
        ),
        ({"agents": {"coder": {"model": {"api_key": KEY}}}}, "agents.coder.model.api_key"),
        ({"model": {"client_secret": KEY}}, "model.client_secret"),
        ({"model": {"ApiKey": KEY}}, "model.ApiKey"),
        ({"model": {"api_key_env": KEY}}, "model.api_key_env"),
        (
            {"storage": {"backend": "postgres", "dsn": f"postgresql://u:{KEY}@db/m"}},
            "storage.dsn",
        ),
        ({"storage": {"backend": "postgres", "dsn": f"host=db password={KEY}"}}, "storage.dsn"),
    ],
)
def test_a_written_key_is_refused_in_one_line_naming_it(block: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as raised:
        memory_config_from_backend_config(block)
    message = str(raised.value)
    assert message.startswith(f"memory.backend_config.{where}: ")
    assert "\n" not in message
    assert KEY not in message
    assert "/api/memory/config" in message and "_env" in message


def test_a_dollar_var_resolved_by_deerflow_is_refused_with_the_same_hint() -> None:
    """``api_key: $OPENAI_API_KEY`` in DeerFlow's config.yaml reaches us as the key itself."""
    with pytest.raises(ConfigError, match=r"model\.api_key: .*use api_key_env: NAME"):
        memory_config_from_backend_config({"model": {"api_key": KEY}})


@pytest.mark.parametrize(
    "block",
    [
        {"model": {"provider": None, "model": None, "api_key": None}},
        {"model": {"model": "m", "api_key": ""}},
        {"max_tokens": 3, "token_counting": "char", "guaranteed_token_budget": 100},
        {"storage": {"backend": "postgres", "dsn": "postgresql://deermem@db:5432/memory"}},
    ],
)
def test_no_key_nothing_refused(block: dict[str, Any]) -> None:
    refuse_written_secrets(block)


def test_api_key_env_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_LLM_KEY", KEY)
    monkeypatch.setenv("EMBED_KEY", KEY)
    config = memory_config_from_backend_config(
        {
            "model": {"model": "gpt-4o-mini", "api_key_env": "MEMORY_LLM_KEY"},
            "embeddings": {"provider": "openai", "api_key_env": "EMBED_KEY"},
        }
    )
    assert config.model is not None and config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == KEY
    assert not isinstance(config.embeddings, str) and config.embeddings.api_key is not None
    assert config.embeddings.api_key.get_secret_value() == KEY


def test_an_agents_own_model_may_name_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODER_KEY", KEY)
    block = {"agents": {"coder": {"model": {"model": "m", "api_key_env": "CODER_KEY"}}}}
    config = agent_config_from_backend_config(block, "coder")
    assert config.model is not None and config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == KEY


def test_an_unset_variable_is_one_line_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_LLM_KEY", raising=False)
    with pytest.raises(ConfigError) as raised:
        memory_config_from_backend_config(
            {"model": {"model": "m", "api_key_env": "MEMORY_LLM_KEY"}}
        )
    assert "memory.backend_config.model" in str(raised.value)
    assert "MEMORY_LLM_KEY is not set" in str(raised.value)


def test_host_hooks_are_not_read_as_settings() -> None:
    refuse_written_secrets({"callbacks": [object()], "host_llm_factory": lambda: None})
