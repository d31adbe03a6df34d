"""DeerFlow's folder rules, as pure functions (DeerFlow itself is never imported).

- **Project root**: ``$DEER_FLOW_PROJECT_ROOT``, else the current directory.
- **Data folder** ("home", DeerFlow's ``runtime_home`` / ``base_dir``): ``$DEER_FLOW_HOME``,
  else ``<project root>/.deer-flow``.
- **config.yaml**: ``$DEER_FLOW_CONFIG_PATH`` (an error when it names no file), else
  ``<project root>/config.yaml``, else — DeerFlow run from its source tree — ``backend/config.yaml``
  or the repository root's ``config.yaml`` next to its installed ``deerflow`` package.
- **Memory root** (``memory.storage_path``): empty or absent → the data folder; relative →
  under the data folder (DeerFlow's memory factory, not the current directory); a path ending
  in ``.json`` (v2.0.0's ``memory.json`` was a file) → its folder. This package keeps its own
  files in the subfolder :data:`DEERMEM_FOLDER` of that root, apart from DeerFlow's
  (``users/<uid>/memory.json``, ``users/<uid>/agents/``).
- **Per-agent config.yaml**: ``<home>/users/<user_id>/agents/<name>/config.yaml``, else the
  legacy shared ``<home>/agents/<name>/config.yaml``; folder names are lower-cased; agent names
  match ``^[A-Za-z0-9-]+$`` and user ids ``^[A-Za-z0-9_-]+$``; the default user is
  ``"default"`` (DeerFlow without authentication).

Every function takes the environment and the current directory as parameters (``None``: the
process's own), so the rules are testable without touching either.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "AGENT_NAME_PATTERN",
    "CONFIG_PATH_ENV_VAR",
    "DATA_FOLDER_NAME",
    "DEERMEM_FOLDER",
    "DEFAULT_USER_ID",
    "HOME_ENV_VAR",
    "PROJECT_ROOT_ENV_VAR",
    "USER_ID_PATTERN",
    "agent_config_file",
    "deerflow_home",
    "find_config_path",
    "installed_deerflow_dir",
    "is_agent_name",
    "legacy_agent_dir",
    "project_root",
    "source_tree_config_candidates",
    "storage_root",
    "user_agent_dir",
    "validate_user_id",
]

HOME_ENV_VAR = "DEER_FLOW_HOME"
CONFIG_PATH_ENV_VAR = "DEER_FLOW_CONFIG_PATH"
PROJECT_ROOT_ENV_VAR = "DEER_FLOW_PROJECT_ROOT"
DATA_FOLDER_NAME = ".deer-flow"
DEERMEM_FOLDER = "deermem_middleware"
"""Our folder inside DeerFlow's memory root: our documents ``users/<user>/<agent>.json`` and
the pending-capture journal, apart from DeerFlow's own files under ``users/``."""
DEFAULT_USER_ID = "default"
"""The user DeerFlow runs as when authentication is off."""
AGENT_NAME_PATTERN = re.compile(r"[A-Za-z0-9-]+")
"""DeerFlow's custom-agent names (used with ``fullmatch``; no ``_``, unlike ours)."""
USER_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
"""DeerFlow's user ids as they appear in folder names (used with ``fullmatch``)."""


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _cwd(cwd: str | os.PathLike[str] | None) -> Path:
    return Path.cwd() if cwd is None else Path(cwd)


def project_root(
    *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None
) -> Path:
    """``$DEER_FLOW_PROJECT_ROOT``, else the current directory (resolved, as DeerFlow does)."""
    explicit = _env(env).get(PROJECT_ROOT_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser().resolve()
    return _cwd(cwd).resolve()


def deerflow_home(
    *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None
) -> Path:
    """DeerFlow's data folder: ``$DEER_FLOW_HOME``, else ``<project root>/.deer-flow``."""
    explicit = _env(env).get(HOME_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser().resolve()
    return project_root(env=env, cwd=cwd) / DATA_FOLDER_NAME


def storage_root(
    value: str | None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Path:
    """The memory folder a DeerFlow ``storage_path`` value means (see the module docstring).

    ``~`` is expanded (DeerFlow would make a folder literally named ``~`` under its data folder).
    """
    home = deerflow_home(env=env, cwd=cwd)
    text = (value or "").strip()
    if not text:
        return home
    path = Path(text).expanduser()
    if path.suffix.lower() == ".json":
        path = path.parent
    if not path.is_absolute():
        path = home / path
    return Path(os.path.normpath(path))


def is_agent_name(name: object) -> bool:
    """Whether DeerFlow accepts ``name`` as a custom agent's name."""
    return isinstance(name, str) and AGENT_NAME_PATTERN.fullmatch(name) is not None


def validate_user_id(user_id: str) -> str:
    """``user_id`` when it is safe in DeerFlow's folder names, else :class:`ValueError`."""
    if not isinstance(user_id, str) or USER_ID_PATTERN.fullmatch(user_id) is None:
        raise ValueError(
            f"user id must match {USER_ID_PATTERN.pattern} (DeerFlow's rule), got {user_id!r}"
        )
    return user_id


def user_agent_dir(home: str | os.PathLike[str], user_id: str, agent_name: str) -> Path:
    """``<home>/users/<user_id>/agents/<name, lower-cased>`` (DeerFlow's per-user layout)."""
    return Path(home) / "users" / validate_user_id(user_id) / "agents" / agent_name.lower()


def legacy_agent_dir(home: str | os.PathLike[str], agent_name: str) -> Path:
    """``<home>/agents/<name, lower-cased>`` (DeerFlow's shared layout before user isolation)."""
    return Path(home) / "agents" / agent_name.lower()


def agent_config_file(
    agent_name: str,
    *,
    user_id: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The ``config.yaml`` DeerFlow reads for ``agent_name``, or None when it has none.

    The per-user folder wins when it holds a ``config.yaml``, else the legacy shared folder
    (DeerFlow's ``resolve_agent_dir``). A name DeerFlow would refuse has no file; a user id it
    would not put in a folder has no per-user one. ``home``: DeerFlow's data folder (None:
    :func:`deerflow_home` of ``env`` and ``cwd``).
    """
    if not is_agent_name(agent_name):
        return None
    root = Path(home) if home is not None else deerflow_home(env=env, cwd=cwd)
    folders = [legacy_agent_dir(root, agent_name)]
    with contextlib.suppress(ValueError):
        folders.insert(0, user_agent_dir(root, user_id or DEFAULT_USER_ID, agent_name))
    for folder in folders:
        candidate = folder / "config.yaml"
        if candidate.is_file():
            return candidate
    return None


def installed_deerflow_dir() -> Path | None:
    """The folder of an installed ``deerflow`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("deerflow")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    return Path(spec.origin).parent if spec.origin else None


def source_tree_config_candidates(package_dir: str | os.PathLike[str]) -> tuple[Path, ...]:
    """Where DeerFlow run from its source tree keeps ``config.yaml``, given the folder of its
    ``deerflow`` package (``<repo>/backend/packages/harness/deerflow``): ``backend/`` first,
    then the repository root."""
    parents = Path(package_dir).resolve().parents
    if len(parents) < 4:
        return ()
    backend = parents[2]
    return (backend / "config.yaml", backend.parent / "config.yaml")


def find_config_path(
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    package_dir: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The ``config.yaml`` DeerFlow would read, or None when there is none.

    ``$DEER_FLOW_CONFIG_PATH`` naming no file raises :class:`FileNotFoundError` (as in
    DeerFlow). ``package_dir``: the folder of DeerFlow's ``deerflow`` package, for its
    source-tree locations (None: none are tried).
    """
    explicit = _env(env).get(CONFIG_PATH_ENV_VAR)
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_absolute():
            path = _cwd(cwd) / path
        if not path.is_file():
            raise FileNotFoundError(f"{CONFIG_PATH_ENV_VAR}={explicit}: no such file")
        return path
    local = project_root(env=env, cwd=cwd) / "config.yaml"
    if local.is_file():
        return local
    if package_dir is not None:
        for candidate in source_tree_config_candidates(package_dir):
            if candidate.is_file():
                return candidate
    return None
