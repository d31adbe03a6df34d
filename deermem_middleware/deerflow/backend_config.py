"""What DeerFlow hands its memory backend: ``backend_config`` and the host hooks.

DeerFlow's factory calls ``from_config(backend_config, mode=..., **host_hooks)``;
:class:`~deermem_middleware.deerflow.manager.DeermemMemoryManager` reads both with this module:
the config as our :class:`MemoryConfig` (by the config loader's own rules), the hooks as
:class:`HostHooks`, and the conversation as the messages memory may see. DeerFlow is never
imported here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import ValidationError

from deermem_middleware.config import ConfigError, MemoryConfig, memory_config_from_mapping
from deermem_middleware.config.secrets import ENV_NAME_PATTERN

__all__ = [
    "HOST_HOOKS",
    "HostHooks",
    "agent_config_from_backend_config",
    "config_error_of",
    "host_chat_model",
    "memory_config_from_backend_config",
    "refuse_written_secrets",
    "visible_messages",
]

logger = logging.getLogger(__name__)

HOST_HOOKS: Final = frozenset(
    {
        "callbacks",
        "should_keep_hidden_message",
        "trace_context_manager",
        "host_llm_factory",
        "extraction_callback",
    }
)
"""What DeerFlow's factory passes to ``from_config`` besides the config. Used:
``host_llm_factory`` (the extraction model when the config names none, built on first need) and
``should_keep_hidden_message`` (which ``hide_from_ui`` messages are still the user's words).
Accepted and not used: ``callbacks`` (kept on the model's field), ``trace_context_manager``,
``extraction_callback``. A hook set in ``backend_config`` wins over the factory's."""

WHERE: Final = "memory.backend_config"

SECRET_KEY_PATTERN: Final = re.compile(
    r"(?:^|_)(?:api_?key|secret(?:_key)?|password|passwd|access_token|auth_token|token)\Z",
    re.IGNORECASE,
)
"""Key names that hold a credential (``api_key``, ``openai_api_key``, ``client_secret``,
``password``, ``token``; not ``max_tokens`` or ``token_counting``)."""
_DSN_PASSWORD = re.compile(r"://[^/@\s]*:[^/@\s]*@|(?:^|\s)password\s*=", re.IGNORECASE)
"""A connection string that carries a password (``postgresql://user:pw@host``,
``... password=pw``)."""
_SHOWN = (
    "DeerFlow shows memory.backend_config to every signed-in user (GET /api/memory/config "
    "and /api/memory/status), and a $VAR there arrives as its value"
)


def _secret_problem(key: str, value: Any) -> str | None:
    """Why ``key: value`` may not be written in ``backend_config``, or None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if key.lower().endswith("_env"):
        if isinstance(value, str) and ENV_NAME_PATTERN.match(value.strip()):
            return None
        return (
            "must name an environment variable (e.g. OPENAI_API_KEY), not hold its value: "
            "write the name without '$'"
        )
    if SECRET_KEY_PATTERN.search(key) and not isinstance(value, Mapping | list):
        return f"a key may not be written here: set it in the environment and use {key}_env: NAME"
    if key.lower() == "dsn" and isinstance(value, str) and _DSN_PASSWORD.search(value):
        return "a DSN with a password may not be written here: use dsn_env: NAME"
    return None


def refuse_written_secrets(block: Mapping[str, Any] | None, where: str = WHERE) -> None:
    """:class:`ConfigError` (one line, naming the key, never its value) when ``block`` —
    DeerFlow's ``memory.backend_config`` — holds a credential written as a value, at any depth
    (``model.api_key``, ``embeddings.api_key``, ``model.options.openai_api_key``,
    ``agents.<name>.model.api_key``, a ``storage.dsn`` with a password), or an ``*_env`` key that
    holds a value instead of a variable's name.

    DeerFlow's gateway echoes ``backend_config`` as it is to every signed-in user, and resolves
    ``$VAR`` before passing it: ``api_key: $OPENAI_API_KEY`` arrives as the key itself. Keys
    come from the environment: ``api_key_env: NAME`` (``dsn_env`` for a DSN), or the provider's
    own variable (``OPENAI_API_KEY``) with nothing written.
    """

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if path == where and key in HOST_HOOKS:
                    continue
                here = f"{path}.{key}"
                problem = _secret_problem(str(key), item)
                if problem is not None:
                    raise ConfigError(f"{here}: {problem} ({_SHOWN})")
                walk(item, here)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}")

    walk(block or {}, where)


def memory_config_from_backend_config(backend_config: Mapping[str, Any] | None) -> MemoryConfig:
    """Our :class:`MemoryConfig` from DeerFlow's ``memory.backend_config``
    (:func:`~deermem_middleware.config.memory_config_from_mapping`, DeerFlow's rules).

    - ``storage_path`` (what DeerFlow's factory injects: by default DeerFlow's whole data folder)
      is read by DeerFlow's rules
      (:func:`deermem_middleware.formats.deerflow_paths.storage_root`), and
      our files go to its subfolder ``deermem_middleware`` — the one the config loader uses for
      DeerFlow's ``config.yaml`` too, so the ``deermem`` command sees the same documents — never
      beside DeerFlow's own ``users/<uid>/`` files (its memory, its users' custom agents).
    - Our other keys are taken as they are; a null for a key that cannot be null is not set.
    - DeerFlow's own keys that mean nothing here (``eviction_*``, ``staleness_*``, ... and
      ``model_name``, which DeerFlow migrates to ``model.model``) are ignored (INFO), host hooks
      silently, any other key with a WARNING naming it: DeerFlow passes the block verbatim, and
      refusing to start would take the whole host down for a typo.

    - A key written as a value (``api_key: sk-...``, or ``api_key: $OPENAI_API_KEY``, which
      DeerFlow resolves before passing the block) is refused
      (:func:`refuse_written_secrets`): DeerFlow shows the block to every signed-in user.
      ``api_key_env: NAME`` names the variable instead.

    A wrong value raises :class:`~deermem_middleware.config.ConfigError` naming
    ``memory.backend_config.<key>``.
    """
    refuse_written_secrets(backend_config)
    block = {k: v for k, v in (backend_config or {}).items() if k not in HOST_HOOKS}
    return memory_config_from_mapping(block, where=WHERE, deerflow=True, strict=False)


def config_error_of(error: ValidationError) -> Exception:
    """The :class:`ConfigError` a model's validation wrapped, else ``error`` itself.

    DeerFlow's ``MemoryManager`` is a pydantic model: a ``ConfigError`` raised while the
    manager reads ``backend_config`` comes out as a ``ValidationError`` of several lines that
    repeats the input — ``backend_config`` itself. What a host prints at start (DeerFlow's
    gateway, #4637) should be the one line that names the key."""
    for detail in error.errors():
        wrapped = (detail.get("ctx") or {}).get("error")
        if isinstance(wrapped, ConfigError):
            return wrapped
    return error


def agent_config_from_backend_config(
    backend_config: Mapping[str, Any] | None, agent_name: str
) -> MemoryConfig:
    """The configuration of ``agent_name``: ``backend_config`` with its ``agents.<agent_name>``
    block laid over it key by key (as ``memory.agents.<name>`` in a config file), under that
    agent's name. ``ConfigError`` when ``agents`` is not a mapping of mappings."""
    block = {k: v for k, v in (backend_config or {}).items() if k != "agents"}
    agents = (backend_config or {}).get("agents") or {}
    own = agents.get(agent_name) if isinstance(agents, Mapping) else None
    if not isinstance(agents, Mapping) or not isinstance(own, Mapping | None):
        raise ConfigError(f"{WHERE}.agents must map agent names to settings")
    block.update(own or {})
    block["agent_name"] = agent_name
    return memory_config_from_backend_config(block)


@dataclass(frozen=True)
class HostHooks:
    """The host hooks this package uses (see :data:`HOST_HOOKS`)."""

    llm_factory: Callable[[], Any] | None = None
    keep_hidden: Callable[[Any], bool] | None = None

    @classmethod
    def resolve(
        cls, backend_config: Mapping[str, Any], host_hooks: Mapping[str, Any] | None = None
    ) -> HostHooks:
        """The hooks set in ``backend_config``, else the factory's ``host_hooks``."""

        def hook(name: str) -> Any:
            value = backend_config.get(name)
            return value if value is not None else (host_hooks or {}).get(name)

        return cls(hook("host_llm_factory"), hook("should_keep_hidden_message"))


def host_chat_model(factory: Callable[[], Any] | None) -> BaseChatModel | None:
    """The host's default chat model from ``host_llm_factory``; None (logged) when there is no
    factory, it fails, or it builds something that is not a chat model."""
    if factory is None:
        logger.warning(
            "memory: no extraction model (backend_config.model is empty and the host gave "
            "no host_llm_factory); captures wait in the journal until one is configured"
        )
        return None
    try:
        model = factory()
    except Exception:
        logger.exception("memory: the host's default chat model could not be built")
        return None
    if isinstance(model, BaseChatModel):
        return model
    logger.warning(
        "memory: the host's default chat model is %r, not a chat model; captures wait "
        "in the journal until an extraction model is configured",
        type(model).__name__,
    )
    return None


def visible_messages(
    messages: Sequence[Any], keep_hidden: Callable[[Any], bool] | None = None
) -> list[BaseMessage]:
    """Messages as LangChain messages, without DeerFlow's ``hide_from_ui`` ones (framework
    reminders, image payloads) unless ``keep_hidden`` (the host's
    ``should_keep_hidden_message``) says they are the user's words; what is not a message is
    skipped."""
    out: list[BaseMessage] = []
    for item in messages:
        try:
            message = item if isinstance(item, BaseMessage) else convert_to_messages([item])[0]
        except Exception:
            logger.debug("memory: skipping a message that is not one: %r", type(item))
            continue
        extra = message.additional_kwargs
        if isinstance(extra, Mapping) and extra.get("hide_from_ui"):
            try:
                kept = keep_hidden is not None and bool(keep_hidden(extra))
            except Exception:
                logger.exception("memory: should_keep_hidden_message failed; message dropped")
                kept = False
            if not kept:
                continue
        out.append(message)
    return out
