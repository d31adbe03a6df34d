"""The configuration models: keys read from the environment (``api_key_env``, ``dsn_env``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deermem_middleware.config import (
    ConfigError,
    EmbeddingsConfig,
    ModelConfig,
    StorageConfig,
    memory_config_from_mapping,
)

KEY = "sk-test-0123456789abcdef"


def test_model_api_key_env_reads_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORY_LLM_KEY", KEY)
    config = ModelConfig(model="gpt-4o-mini", api_key_env="MEMORY_LLM_KEY")
    assert config.api_key is not None and config.api_key.get_secret_value() == KEY
    assert config.api_key_env == "MEMORY_LLM_KEY"
    assert KEY not in repr(config) and KEY not in str(config.model_dump())


def test_embeddings_api_key_env_reads_the_key_and_keeps_it_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMBED_KEY", KEY)
    config = EmbeddingsConfig(api_key_env="EMBED_KEY")
    assert config.api_key is not None and config.api_key.get_secret_value() == KEY
    assert KEY not in repr(config)
    # a key written here (our own config files may) is kept secret too
    assert KEY not in repr(EmbeddingsConfig(api_key=KEY))


def test_storage_dsn_env_reads_the_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = "postgresql://deermem:pw@db:5432/memory"
    monkeypatch.setenv("DATABASE_URL", dsn)
    config = StorageConfig(backend="postgres", dsn_env="DATABASE_URL")
    assert config.dsn == dsn


@pytest.mark.parametrize("model", [ModelConfig, EmbeddingsConfig])
def test_an_unset_variable_is_an_error_naming_it(
    model: type[ModelConfig | EmbeddingsConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(
        ValidationError, match="api_key_env: the environment variable NO_SUCH_KEY_VAR is not set"
    ):
        model(api_key_env="NO_SUCH_KEY_VAR")
    monkeypatch.setenv("NO_SUCH_KEY_VAR", "  ")
    with pytest.raises(ValidationError, match="NO_SUCH_KEY_VAR is not set"):
        model(api_key_env="NO_SUCH_KEY_VAR")


@pytest.mark.parametrize("value", [KEY + "-x", "$OPENAI_API_KEY", "sk-proj abc"])
def test_an_env_key_holding_a_value_is_refused_without_showing_it(value: str) -> None:
    """DeerFlow replaces ``$VAR`` with its value before we see it: ``api_key_env: $KEY``
    arrives as the key itself, and the error must not print it."""
    for block in ({"model": {"api_key_env": value}}, {"embeddings": {"api_key_env": value}}):
        with pytest.raises(ConfigError) as raised:
            memory_config_from_mapping(block, deerflow=False)
        message = str(raised.value)
        assert "api_key_env must name an environment variable" in message
        assert value not in message


def test_a_key_of_letters_and_digits_in_an_env_key_is_not_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It passes for a variable's name; the variable is not set, and the error keeps it out."""
    key = "a1b2c3d4e5f6a7b8c9d0"
    monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError) as raised:
        memory_config_from_mapping({"model": {"api_key_env": key}}, deerflow=False)
    assert "the environment variable named there is not set" in str(raised.value)
    assert key not in str(raised.value)


def test_api_key_and_api_key_env_together_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_LLM_KEY", KEY)
    with pytest.raises(ValidationError, match="give api_key or api_key_env, not both"):
        ModelConfig(api_key="sk-other", api_key_env="MEMORY_LLM_KEY")
