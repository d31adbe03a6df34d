"""Building a chat model from a class path (``ModelConfig.use``, DeerFlow's ``models[].use``).

The class is imported only here, when the model is built — so a config naming a class of a
package that is not installed (``deerflow.models.patched_deepseek:PatchedChatDeepSeek`` outside
DeerFlow) still loads, and the error, when the model is needed, names the file, line and key.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from deermem_middleware.config.models import (
    CLASS_PATH_PATTERN,
    MODEL_CONSTRUCTOR_FIELDS,
    ConfigError,
    ModelConfig,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["build_class_model", "class_model_kwargs", "import_class_path"]

logger = logging.getLogger(__name__)


def import_class_path(path: str) -> Any:
    """The object ``package.module:Name`` names; :class:`ImportError` when it cannot be had."""
    text = path.strip()
    if not CLASS_PATH_PATTERN.fullmatch(text):
        raise ImportError(f"expected 'package.module:ClassName', got {path!r}")
    module_name, _, attribute = text.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attribute!r}") from None


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def class_model_kwargs(config: ModelConfig) -> dict[str, Any]:
    """The constructor arguments for ``config.use``: ``options``, then the fields set
    explicitly (defaults of this package, such as ``max_tokens: 1500``, are not imposed on a
    class that may not take them)."""
    kwargs = {key: _plain(value) for key, value in config.options.items()}
    for name in MODEL_CONSTRUCTOR_FIELDS:
        if name in config.model_fields_set:
            value = getattr(config, name)
            if value is not None:
                kwargs[name] = _plain(value)
    return kwargs


def build_class_model(config: ModelConfig) -> BaseChatModel:
    """Import ``config.use`` and build it; :class:`ConfigError` naming ``config.use_where``."""
    from langchain_core.language_models import BaseChatModel

    if not config.use:
        raise ConfigError(f"{config.use_where}: no class path to build")
    try:
        factory = import_class_path(config.use)
    except Exception as exc:  # ImportError, or whatever the module raises on import
        raise ConfigError(
            f"{config.use_where}: cannot import {config.use!r} "
            f"({type(exc).__name__}: {exc}); is its package installed?"
        ) from exc
    if not callable(factory):
        raise ConfigError(f"{config.use_where}: {config.use!r} is not a class")
    try:
        model = factory(**class_model_kwargs(config))
    except Exception as exc:
        raise ConfigError(
            f"{config.use_where}: cannot build {config.use!r} ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(model, BaseChatModel):
        raise ConfigError(
            f"{config.use_where}: {config.use!r} built a {type(model).__name__}, "
            "not a LangChain chat model"
        )
    logger.debug("memory model built from %s (%s)", config.use, config.use_where)
    return model
