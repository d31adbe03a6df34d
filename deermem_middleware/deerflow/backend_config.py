"""What DeerFlow hands its memory backend: ``backend_config`` and the host hooks.

DeerFlow's factory calls ``from_config(backend_config, mode=..., **host_hooks)``;
:class:`~deermem_middleware.deerflow.manager.DeermemMemoryManager` reads both with this module:
the config as our :class:`MemoryConfig` (by the config loader's own rules), the hooks as
:class:`HostHooks`, and the conversation as the messages memory may see. DeerFlow is never
imported here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, convert_to_messages

from deermem_middleware.config import ConfigError, MemoryConfig, memory_config_from_mapping

__all__ = [
    "HOST_HOOKS",
    "HostHooks",
    "agent_config_from_backend_config",
    "host_chat_model",
    "memory_config_from_backend_config",
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

    A wrong value raises :class:`~deermem_middleware.config.ConfigError` naming
    ``memory.backend_config.<key>``.
    """
    block = {k: v for k, v in (backend_config or {}).items() if k not in HOST_HOOKS}
    return memory_config_from_mapping(block, where=WHERE, deerflow=True, strict=False)


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
