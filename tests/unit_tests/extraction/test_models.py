"""Building the extraction model from config: local-only options stay local."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from deermem_middleware.config import ConfigError, ModelConfig
from deermem_middleware.extraction.local_llm import is_local_base_url
from deermem_middleware.extraction.models import build_chat_model, resolve_model


def test_loopback_base_url_gets_llama_cpp_sampling_options() -> None:
    model = build_chat_model(ModelConfig(model="smollm2", base_url="http://127.0.0.1:8080/v1"))
    assert isinstance(model, ChatOpenAI)
    assert model.extra_body == {"repeat_penalty": 1.1}
    assert model.openai_api_base == "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    "base_url", ["https://api.openai.com/v1", "https://gateway.example.com/v1", None]
)
def test_remote_endpoints_never_get_local_options(base_url: str | None) -> None:
    model = build_chat_model(ModelConfig(model="gpt-4o-mini", base_url=base_url, api_key="sk-x"))
    assert isinstance(model, ChatOpenAI)
    assert not model.extra_body


def test_explicit_extra_body_wins() -> None:
    config = ModelConfig(base_url="http://localhost:1/v1", extra_body={"top_k": 5})
    model = build_chat_model(config)
    assert isinstance(model, ChatOpenAI) and model.extra_body == {"top_k": 5}


def test_settings_are_passed_through() -> None:
    config = ModelConfig(model="gpt-4o", api_key="sk-test", temperature=0.2, max_tokens=300)
    model = build_chat_model(config)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o"
    assert model.temperature == 0.2
    assert model.max_tokens == 300
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "sk-test"


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"memory\.model"):
        build_chat_model(ModelConfig(provider="no-such-provider", model="x"))


def test_provider_without_model_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"memory\.model\.model"):
        build_chat_model(ModelConfig(provider="anthropic"))


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://10.0.0.5:8000/v1", False),
        ("https://api.openai.com/v1", False),
        (None, False),
    ],
)
def test_is_local_base_url(url: str | None, local: bool) -> None:
    assert is_local_base_url(url) is local


def test_resolve_model_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="BaseChatModel"):
        resolve_model(42)  # type: ignore[arg-type]
    assert resolve_model(None) is None


def test_api_key_env_reaches_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key named by ``api_key_env`` is the one the extraction model sends."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MEMORY_LLM_KEY", "sk-from-env")
    model = build_chat_model(ModelConfig(model="gpt-4o-mini", api_key_env="MEMORY_LLM_KEY"))
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "sk-from-env"
