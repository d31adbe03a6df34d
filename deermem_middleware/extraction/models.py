"""Building the extraction chat model from configuration.

``provider: openai`` (the default) is ``langchain_openai.ChatOpenAI`` and, with ``base_url``, any
OpenAI-compatible server. Other providers go through ``init_chat_model`` ("anthropic", "ollama",
... — their integration package must be installed).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.language_models import BaseChatModel

from deermem_middleware.config import ConfigError, ModelConfig
from deermem_middleware.extraction.local_llm import LOCAL_SAMPLING, is_local_base_url

__all__ = ["DEFAULT_OPENAI_MODEL", "build_chat_model", "resolve_model"]

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


def build_chat_model(config: ModelConfig, *, resources: list[Any] | None = None) -> BaseChatModel:
    """A chat model for ``config``; raises :class:`ConfigError` with the key at fault.

    ``provider: local`` starts a llama.cpp server; it is appended to ``resources`` (the caller
    stops it when done; it is also stopped at interpreter exit).
    """
    if config.use:  # a ``package.module:Class`` path (DeerFlow's ``models[].use``)
        from deermem_middleware.config import build_class_model

        return build_class_model(config)
    provider = config.provider.strip().lower()
    api_key = config.api_key.get_secret_value() if config.api_key is not None else None
    options = _common_options(config)
    if provider == "local":
        from deermem_middleware.extraction.local_llm import LocalLLMError, LocalLLMServer

        server = LocalLLMServer(gguf=config.gguf)
        try:
            server.start()
        except LocalLLMError as exc:
            raise ConfigError(f"memory.model (provider: local): {exc}") from exc
        if resources is not None:
            resources.append(server)
        if config.extra_body:
            options["extra_body"] = dict(config.extra_body)
        model: BaseChatModel = server.chat_model(**options)
        return model
    if config.base_url:
        options["base_url"] = config.base_url
    if api_key:
        options["api_key"] = api_key
    if provider in ("openai", "openai-compatible", "openai_compatible"):
        from langchain_openai import ChatOpenAI

        options["model"] = config.model or DEFAULT_OPENAI_MODEL
        options["max_retries"] = config.max_retries
        if config.timeout is not None:
            options["timeout"] = config.timeout
        if not api_key and config.base_url:
            options["api_key"] = "not-needed"  # local OpenAI-compatible servers ignore it
        if config.extra_body:
            options["extra_body"] = dict(config.extra_body)
        elif is_local_base_url(config.base_url):
            options["extra_body"] = dict(LOCAL_SAMPLING)  # llama.cpp-only options, loopback only
        try:
            return ChatOpenAI(**options)
        except Exception as exc:  # missing OPENAI_API_KEY and the like
            raise ConfigError(f"memory.model: cannot build ChatOpenAI: {exc}") from exc
    if not config.model:
        raise ConfigError(f"memory.model.model is required for provider {config.provider!r}")
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(config.model, model_provider=provider, **options)
    except Exception as exc:
        raise ConfigError(
            f"memory.model: cannot build a {config.provider!r} chat model ({exc}); is its "
            "integration package installed?"
        ) from exc


def _common_options(config: ModelConfig) -> dict[str, Any]:
    """The options every provider takes: temperature, and max_tokens when set."""
    options: dict[str, Any] = {"temperature": config.temperature}
    if config.max_tokens is not None:
        options["max_tokens"] = config.max_tokens
    return options


def resolve_model(model: BaseChatModel | str | None) -> BaseChatModel | None:
    """A model given to the middleware as an object or as ``"provider:model"`` text."""
    if model is None or isinstance(model, BaseChatModel):
        return model
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    raise TypeError(
        f"model must be a BaseChatModel or a 'provider:model' string, got {type(model).__name__}"
    )
