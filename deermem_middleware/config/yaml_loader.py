"""Where :meth:`MemoryConfig.from_yaml <deermem_middleware.config.models.MemoryConfig.from_yaml>`
finds the YAML loader.

The loader (:mod:`~deermem_middleware.config.loading`) builds :class:`MemoryConfig` objects, so
the models cannot import it without an import cycle; the loader registers itself here when it is
imported instead. Importing anything under ``deermem_middleware.config`` runs the package's
``__init__``, which imports the loader, so it is always registered before ``from_yaml`` can run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from deermem_middleware.config.models import MemoryConfig

__all__ = ["YamlLoader", "register_yaml_loader", "yaml_loader"]


class YamlLoader(Protocol):
    def __call__(
        self,
        path: str | os.PathLike[str],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> MemoryConfig: ...


_LOADER: list[YamlLoader] = []


def register_yaml_loader(loader: YamlLoader) -> None:
    """Make ``loader`` the one :meth:`MemoryConfig.from_yaml` calls (the last one wins)."""
    _LOADER[:] = [loader]


def yaml_loader() -> YamlLoader:
    """The registered loader; a ``RuntimeError`` if none is (the config package not imported)."""
    if not _LOADER:
        raise RuntimeError("no YAML loader registered: import deermem_middleware.config")
    return _LOADER[0]
