"""Configuration: :class:`MemoryConfig` (:mod:`.models`), loading it from DeerFlow-style YAML
with file, line and key in every error (:mod:`.loading`), what DeerFlow's own files hold
(:mod:`.deerflow_compat`), and chat models named by class path (:mod:`.model_class`)."""

from deermem_middleware.config.loading import (
    CONFIG_ENV_VAR,
    DEERFLOW_CONFIG_ENV_VAR,
    default_config_path,
    load_memory_config,
    memory_config_from_mapping,
)
from deermem_middleware.config.model_class import build_class_model
from deermem_middleware.config.models import (
    DEFAULT_MAX_FACTS,
    DEFAULT_STORAGE_PATH,
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    ModelConfig,
    RecallRuleConfig,
    StorageConfig,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "DEERFLOW_CONFIG_ENV_VAR",
    "DEFAULT_MAX_FACTS",
    "DEFAULT_STORAGE_PATH",
    "ConfigError",
    "EmbeddingsConfig",
    "MemoryConfig",
    "ModelConfig",
    "RecallRuleConfig",
    "StorageConfig",
    "build_class_model",
    "default_config_path",
    "load_memory_config",
    "memory_config_from_mapping",
]
