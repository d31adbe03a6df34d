"""Loading :class:`MemoryConfig` from DeerFlow-style YAML.

A DeerFlow ``config.yaml`` carries a ``memory:`` block, either flat (``memory: {enabled,
debounce_seconds, model_name, ...}``) or with its backend knobs nested under
``memory.backend_config``; both load. On top of DeerFlow, memory can be switched per agent *by
name*: ``memory.agents.<name>: {...}`` in the same file, or a ``memory:`` block in
``agents/<name>/config.yaml`` next to it (the later source wins key by key).

Every mistake is reported with the file, the line and the key: unknown keys (a typo must not be
silently ignored), wrong types, and ``$VAR``/``${VAR}`` references to unset environment variables.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from deermem_middleware.config.models import (
    AGENT_NAME_PATTERN,
    ConfigError,
    MemoryConfig,
)

__all__ = ["CONFIG_ENV_VAR", "default_config_path", "load_memory_config"]

logger = logging.getLogger(__name__)

CONFIG_ENV_VAR = "DEERMEM_CONFIG"
MAX_YAML_NODES = 100_000
"""Most YAML nodes a config may expand to once aliases are followed: a real config has a few
hundred; a "billion laughs" document (aliases of aliases) has billions and kept the loader busy
for minutes."""
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|^\$([A-Za-z_][A-Za-z0-9_]*)$")


def default_config_path() -> Path | None:
    """``$DEERMEM_CONFIG`` if set, else ``./config.yaml`` if it exists, else None."""
    env = os.environ.get(CONFIG_ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV_VAR}={env}: no such file")
        return path
    local = Path("config.yaml")
    return local if local.is_file() else None


# ------------------------------------------------------------------------------------------------
# YAML with line numbers
# ------------------------------------------------------------------------------------------------

Key = tuple[str | int, ...]


@dataclass
class _YamlDoc:
    path: Path
    data: Any
    lines: dict[Key, int]

    def where(self, key: Key) -> str:
        probe = key
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        return f"{self.path}:{line}" if line else str(self.path)


def _read_yaml(path: Path) -> _YamlDoc:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_expansion(node, path)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    lines: dict[Key, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return _YamlDoc(path, data, lines)


def _check_expansion(root: yaml.Node, path: Path) -> None:
    """Refuse documents whose aliases expand past :data:`MAX_YAML_NODES` nodes, or refer to
    themselves: both would make every later walk of the data (line numbers, ``$VAR``
    resolution, validation) take forever. Counted on the node graph, each shared node once."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in busy:
            line = node.start_mark.line + 1
            raise ConfigError(f"{path}:{line}: invalid YAML: an alias refers to itself")
        busy.add(id(node))
        total = 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                total += size(key_node) + size(value_node)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item)
        busy.discard(id(node))
        sizes[id(node)] = total
        if total > MAX_YAML_NODES:
            line = node.start_mark.line + 1
            raise ConfigError(
                f"{path}:{line}: invalid YAML: aliases expand to more than {MAX_YAML_NODES:,} "
                "nodes (a config never needs that many; is this an alias bomb?)"
            )
        return total

    size(root)


def _collect_lines(node: yaml.Node, key: Key, lines: dict[Key, int]) -> None:
    lines.setdefault(key, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*key, key_node.value)
                lines[child] = key_node.start_mark.line + 1
                _collect_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*key, index)
            lines[child] = item.start_mark.line + 1
            _collect_lines(item, child, lines)


def _dotted(key: Key) -> str:
    return ".".join(str(part) for part in key)


def _resolve_env(value: Any, doc: _YamlDoc, key: Key) -> Any:
    """Replace ``$VAR`` (whole value) and ``${VAR}`` (anywhere) from the environment, loudly."""
    if isinstance(value, str) and "$" in value:

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in os.environ:
                raise ConfigError(
                    f"{doc.where(key)}: {_dotted(key)}: environment variable ${name} is not set"
                )
            return os.environ[name]

        return _ENV_REF.sub(lookup, value)
    if isinstance(value, dict):
        return {k: _resolve_env(v, doc, (*key, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_env(v, doc, (*key, i)) for i, v in enumerate(value)]
    return value


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------


@dataclass
class _Origin:
    doc: _YamlDoc
    key: Key


_LAYOUT_KEYS = frozenset({"backend", "backend_config", "agents"})


def _memory_block(doc: _YamlDoc, base: Key) -> dict[str, Any]:
    block = doc.data
    for part in base:
        block = block.get(part) if isinstance(block, dict) else None
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ConfigError(
            f"{doc.where(base)}: {_dotted(base)} must be a mapping, got {type(block).__name__}"
        )
    return block


def _flatten_into(
    merged: dict[str, Any], origins: dict[str, _Origin], doc: _YamlDoc, base: Key
) -> dict[str, Any]:
    """Merge one ``memory:`` block (flat or ``backend_config`` form) into ``merged``."""
    block = _memory_block(doc, base)
    for key, value in block.items():
        if key in _LAYOUT_KEYS:
            continue
        merged[key] = _resolve_env(value, doc, (*base, key))
        origins[key] = _Origin(doc, (*base, key))
    backend = block.get("backend")
    if backend is not None and backend not in ("file", "json", "memory"):
        raise ConfigError(
            f"{doc.where((*base, 'backend'))}: {_dotted((*base, 'backend'))}: unsupported backend "
            f"{backend!r} (supported: file, memory)"
        )
    if backend is not None:
        merged["__backend__"] = backend
    nested = block.get("backend_config")
    if nested is not None:
        if not isinstance(nested, dict):
            raise ConfigError(
                f"{doc.where((*base, 'backend_config'))}: {_dotted((*base, 'backend_config'))} "
                "must be a mapping"
            )
        for key, value in nested.items():
            path = (*base, "backend_config", key)
            if key in merged and key in block and merged[key] != value:
                logger.warning(
                    "%s: %s overrides %s", doc.where(path), _dotted(path), _dotted((*base, key))
                )
            merged[key] = _resolve_env(value, doc, path)
            origins[key] = _Origin(doc, path)
    return block


def _resolve_model_name(
    merged: dict[str, Any], origins: dict[str, _Origin], main: _YamlDoc
) -> None:
    """DeerFlow's ``model_name`` points into the top-level ``models:`` list: inline that entry."""
    name = merged.get("model_name")
    if name is None or merged.get("model") is not None:
        return
    models = main.data.get("models") if isinstance(main.data, dict) else None
    origin = origins["model_name"]
    if not isinstance(models, list):
        raise ConfigError(
            f"{origin.doc.where(origin.key)}: {_dotted(origin.key)}: {name!r} refers to the "
            "top-level 'models:' list, which this file does not have"
        )
    for index, entry in enumerate(models):
        if isinstance(entry, dict) and entry.get("name") == name:
            entry = _resolve_env(entry, main, ("models", index))
            use = str(entry.get("use", "langchain_openai:ChatOpenAI"))
            provider = "openai" if "openai" in use.lower() else use.split(":")[0].split(".")[0]
            model: dict[str, Any] = {"provider": provider, "model": entry.get("model", name)}
            for field in ("api_key", "base_url", "temperature", "max_tokens", "timeout"):
                if entry.get(field) is not None:
                    model[field] = entry[field]
            merged["model"] = model
            origins["model"] = _Origin(main, ("models", index))
            return
    raise ConfigError(
        f"{origin.doc.where(origin.key)}: {_dotted(origin.key)}: no model named {name!r} in the "
        "top-level 'models:' list"
    )


def load_memory_config(
    path: str | os.PathLike[str], *, agent_name: str | None = None
) -> MemoryConfig:
    """Load the memory config for ``agent_name`` (None: the default agent) from ``path``.

    Sources, later wins key by key: the ``memory:`` block of ``path`` → ``memory.agents.<name>``
    in the same file → the ``memory:`` block of ``agents/<name>/config.yaml`` beside ``path``.
    """
    main = _read_yaml(Path(path).expanduser().resolve())
    if main.data is None:
        main.data = {}
    if not isinstance(main.data, dict):
        raise ConfigError(f"{main.path}: top level must be a mapping")
    if agent_name is not None and not AGENT_NAME_PATTERN.match(agent_name):
        raise ConfigError(f"agent name must match {AGENT_NAME_PATTERN.pattern}, got {agent_name!r}")

    merged: dict[str, Any] = {}
    origins: dict[str, _Origin] = {}
    block = _flatten_into(merged, origins, main, ("memory",))
    agents = block.get("agents")
    if agents is not None and not isinstance(agents, dict):
        raise ConfigError(f"{main.where(('memory', 'agents'))}: memory.agents must be a mapping")
    if agent_name is not None:
        if agents and agent_name in agents:
            _flatten_into(merged, origins, main, ("memory", "agents", agent_name))
        agent_file = main.path.parent / "agents" / agent_name / "config.yaml"
        if agent_file.is_file():
            agent_doc = _read_yaml(agent_file)
            if agent_doc.data is not None and not isinstance(agent_doc.data, dict):
                raise ConfigError(f"{agent_file}: top level must be a mapping")
            if agent_doc.data:
                _flatten_into(merged, origins, agent_doc, ("memory",))
    merged.pop("__backend__", None)
    _resolve_model_name(merged, origins, main)
    storage = merged.get("storage_path")
    blank = not isinstance(storage, str) or not storage.strip()  # the default: see the model
    if not blank and not os.path.isabs(os.path.expanduser(str(storage))):
        merged["storage_path"] = str(origins["storage_path"].doc.path.parent / str(storage))
    backend = merged.get("storage")
    if isinstance(backend, dict) and isinstance(backend.get("path"), str):
        db_path = backend["path"]
        if db_path and not os.path.isabs(os.path.expanduser(db_path)):
            folder = origins["storage"].doc.path.parent
            merged["storage"] = {**backend, "path": str(folder / db_path)}
    if agent_name is not None:
        merged["agent_name"] = agent_name
    return _validate(merged, origins)


def _validate(merged: Mapping[str, Any], origins: Mapping[str, _Origin]) -> MemoryConfig:
    try:
        return MemoryConfig.model_validate(dict(merged))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = error["loc"]
            head = str(loc[0]) if loc else ""
            origin = origins.get(head)
            if origin is None:
                where, key = "memory config", _dotted(tuple(loc))
            else:
                full = (*origin.key, *loc[1:])
                where, key = origin.doc.where(full), _dotted(full)
            if error["type"] == "extra_forbidden":
                message = "unknown key (check the spelling; see the config reference)"
            else:
                message = error["msg"]
                if "input" in error and not isinstance(error["input"], dict | list):
                    message += f", got {error['input']!r}"
            problems.append(f"{where}: {key}: {message}")
        raise ConfigError("invalid memory config:\n  " + "\n  ".join(problems)) from None
