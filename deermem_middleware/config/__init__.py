"""Configuration: :class:`MemoryConfig` (:mod:`.models`), and loading it from DeerFlow-style
YAML with file, line and key in every error (:mod:`.loading`)."""

from deermem_middleware.config.loading import (
    CONFIG_ENV_VAR,
    default_config_path,
    load_memory_config,
)
from deermem_middleware.config.models import (
    DEFAULT_MAX_FACTS,
    DEFAULT_STORAGE_PATH,
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    ModelConfig,
    StorageConfig,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_MAX_FACTS",
    "DEFAULT_STORAGE_PATH",
    "ConfigError",
    "EmbeddingsConfig",
    "MemoryConfig",
    "ModelConfig",
    "StorageConfig",
    "default_config_path",
    "load_memory_config",
]
