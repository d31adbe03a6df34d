"""What DeerFlow's ``config.yaml`` holds that this package reads differently or not at all.

- :data:`DEERFLOW_HOST_KEYS`, :data:`DEERFLOW_BACKEND_KEYS`: DeerFlow's own ``memory:`` keys
  that mean nothing here. They are accepted and ignored (the loader lists them in one INFO
  log); every other unknown key stays an error. Taken from DeerFlow's shared memory config
  (``memory_config.py``: host fields and the legacy flat fields it migrates), the ``memory:``
  block of its ``config.example.yaml`` (HEAD and v2.0.0) and its DeerMem backend config.
- :func:`is_deerflow_config`: whether a parsed file is DeerFlow's own ``config.yaml``.
- :func:`model_from_entry`: a top-level ``models:`` entry (DeerFlow's model profile: ``use``
  class path plus constructor settings) as the ``memory.model`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deermem_middleware.config.models import MODEL_CONSTRUCTOR_FIELDS

__all__ = [
    "DEERFLOW_BACKEND_KEYS",
    "DEERFLOW_HOST_KEYS",
    "DEERFLOW_MODEL_META_KEYS",
    "OPENAI_CLASS_PATHS",
    "EntryModel",
    "is_deerflow_config",
    "is_own_manager_class",
    "model_from_entry",
    "thinking_off_settings",
]

DEERFLOW_HOST_KEYS = frozenset(
    {
        "manager_class",
        "mode",
        "shutdown_flush_timeout_seconds",
        "session_injection_enabled",
        "turn_injection_enabled",
    }
)
"""Host-level ``memory:`` keys of DeerFlow (besides ``enabled``, ``injection_enabled`` and
``backend_config``, which are read): the backend selector, middleware/tool mode, the gateway's
shutdown drain budget, and (#4732) whether DeerFlow injects memory once per thread and before
every turn. Any other key DeerFlow adds at that level is accepted too (the loader lists it in its
INFO line); these are only the ones known to be DeerFlow's."""

DEERFLOW_BACKEND_KEYS = frozenset(
    {
        # storage
        "storage_class",
        "strict_user_scope",
        "manifest_filename",
        "file_lock_timeout_seconds",
        "retrieval_adapter",
        # write-side near-duplicate gate
        "fact_dedup_enabled",
        "fact_dedup_similarity_threshold",
        # capacity eviction
        "fact_eviction_policy",
        "fact_eviction_shadow_enabled",
        "eviction_confidence_weight",
        "eviction_confirmation_weight",
        "eviction_access_weight",
        "eviction_confirmation_half_life_days",
        "eviction_access_half_life_days",
        "eviction_correction_reserved_fraction",
        "eviction_correction_reserved_max",
        "eviction_audit_max_entries",
        # staleness review
        "staleness_review_enabled",
        "staleness_age_days",
        "staleness_min_candidates",
        "staleness_max_removals_per_cycle",
        "staleness_protected_categories",
        "staleness_max_lifetime_multiplier",
        "staleness_max_extension_days",
        # consolidation
        "consolidation_enabled",
        "consolidation_min_facts",
        "consolidation_max_groups_per_cycle",
        "consolidation_max_sources",
        # prompts, patterns, hooks, caches
        "patterns_dir",
        "prompts_dir",
        "extraction_callback",
        "watermark_max_keys",
        # the host's read policy (read by the DeerFlow backend, deerflow/policy.py)
        "failure_policy",
    }
)
"""DeerMem's (DeerFlow's default memory backend) knobs that have no counterpart here, flat
under ``memory:`` (pre-``backend_config`` form) or under ``memory.backend_config``. The knobs
both share (``storage_path``, ``debounce_seconds``, ``max_facts``, ``model``, ...) are read."""

DEERFLOW_MODEL_META_KEYS = frozenset(
    {
        "name",
        "display_name",
        "description",
        "use",
        "supports_thinking",
        "supports_reasoning_effort",
        "supports_vision",
        "supports_stream_usage",
        "when_thinking_enabled",
        "when_thinking_disabled",
        "thinking",
        "context_window",
    }
)
"""Keys of a ``models:`` entry that describe the model to DeerFlow and are never constructor
arguments (DeerFlow's model factory leaves them out too)."""

OPENAI_CLASS_PATHS = frozenset({"langchain_openai:ChatOpenAI", "langchain_openai.ChatOpenAI"})
"""``use`` values built as ``provider: openai`` (our reference path), not by class path."""

_OWN_MANAGER_PREFIX = "deermem_middleware"


def is_deerflow_config(data: Any) -> bool:
    """Whether ``data`` (a parsed ``config.yaml``) is DeerFlow's own application config.

    True when it has DeerFlow's top-level ``config_version`` or ``sandbox`` (required by
    DeerFlow), or DeerFlow-only keys in its ``memory:`` block (``manager_class``, ``mode``,
    ``shutdown_flush_timeout_seconds``).
    """
    if not isinstance(data, Mapping):
        return False
    if "config_version" in data or "sandbox" in data:
        return True
    memory = data.get("memory")
    return isinstance(memory, Mapping) and any(key in memory for key in DEERFLOW_HOST_KEYS)


def is_own_manager_class(value: Any) -> bool:
    """Whether ``memory.manager_class`` selects a backend whose ``backend_config`` we read:
    DeerFlow's default ``deermem`` (same knobs) or this package's own manager."""
    text = str(value).strip()
    return text == "deermem" or text.startswith(_OWN_MANAGER_PREFIX)


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = _deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def thinking_off_settings(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The settings DeerFlow adds to a model profile when thinking is off (memory extraction
    runs without thinking): ``when_thinking_disabled`` when given, else the "disabled" form of
    whatever ``when_thinking_enabled``/``thinking`` switch on."""
    disabled = entry.get("when_thinking_disabled")
    if disabled is not None:
        return _mapping(disabled)
    enabled = _mapping(entry.get("when_thinking_enabled"))
    shortcut = entry.get("thinking")
    if shortcut is not None:
        enabled["thinking"] = {**_mapping(enabled.get("thinking")), **_mapping(shortcut)}
    if entry.get("when_thinking_enabled") is None and shortcut is None:
        return {}
    extra_body = _mapping(enabled.get("extra_body"))
    if _mapping(extra_body.get("thinking")).get("type"):
        return {"extra_body": {"thinking": {"type": "disabled"}}, "reasoning_effort": "minimal"}
    template = _mapping(extra_body.get("chat_template_kwargs"))
    switches = {name: False for name in ("thinking", "enable_thinking") if name in template}
    if switches:
        return {"extra_body": {"chat_template_kwargs": switches}}
    if _mapping(enabled.get("thinking")).get("type"):
        return {"thinking": {"type": "disabled"}}
    return {}


@dataclass
class EntryModel:
    """A ``models:`` entry translated for ``memory.model``."""

    model: dict[str, Any]
    """The ``memory.model`` mapping (``provider: openai`` or ``use`` + ``options``)."""
    unused: list[str] = field(default_factory=list)
    """Settings of the entry that the extraction model does not take (``provider: openai``
    path only; a ``use`` class gets them all)."""


def model_from_entry(entry: Mapping[str, Any]) -> EntryModel:
    """``entry`` (one item of the top-level ``models:`` list) as a ``memory.model`` mapping.

    Like DeerFlow's model factory: null settings are left out, the thinking-off settings are
    merged in, ``reasoning_effort`` is kept only when ``supports_reasoning_effort``. Then
    ``api_base`` is ``base_url``; ``langchain_openai:ChatOpenAI`` (or no ``use``) becomes
    ``provider: openai`` (``request_timeout`` is its ``timeout``); any other ``use`` keeps its
    class path, and the settings that are not :class:`ModelConfig` fields go to ``options``,
    passed to that class as they are.
    """
    settings = {
        key: value
        for key, value in entry.items()
        if key not in DEERFLOW_MODEL_META_KEYS and value is not None
    }
    settings = _deep_merge(settings, thinking_off_settings(entry))
    if not entry.get("supports_reasoning_effort"):
        settings.pop("reasoning_effort", None)
    if "api_base" in settings and "base_url" not in settings:
        settings["base_url"] = settings.pop("api_base")
    use = str(entry.get("use") or "langchain_openai:ChatOpenAI").strip()
    model: dict[str, Any] = {"model": entry.get("model") or entry.get("name")}
    openai = use in OPENAI_CLASS_PATHS
    if openai:
        model["provider"] = "openai"
        if "request_timeout" in settings and "timeout" not in settings:
            settings["timeout"] = settings.pop("request_timeout")
    else:
        model["use"] = use
    for name in MODEL_CONSTRUCTOR_FIELDS:
        if name in settings:
            model[name] = settings.pop(name)
    if openai:
        return EntryModel(model, unused=sorted(settings))
    if settings:
        model["options"] = settings
    return EntryModel(model)
