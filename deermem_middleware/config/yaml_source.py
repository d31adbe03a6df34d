"""YAML config files with line numbers, read once per version of the file.

Every error about a config names the file, the line and the key, so the files are composed (for
the line of every key) as well as loaded. Both use libyaml when PyYAML has it, and a parsed file
is cached by its identity, size and modification time: hosts build the middleware per request,
and DeerFlow's 2,600-line example took 255 ms a construction to parse with the pure-Python
loader (0.4 ms from the cache; ``benchmarks/deerflow_host.py``).
"""

from __future__ import annotations

import copy
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deermem_middleware.config.models import ConfigError

__all__ = ["MAX_YAML_NODES", "Key", "YamlDoc", "at", "dotted", "read_yaml", "resolve_env"]

MAX_YAML_NODES = 100_000
"""Most YAML nodes a config may expand to once aliases are followed: a real config has a few
hundred; a "billion laughs" document (aliases of aliases) has billions and kept the loader busy
for minutes."""
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|^\$([A-Za-z_][A-Za-z0-9_]*)$")


Key = tuple[str | int, ...]


@dataclass
class YamlDoc:
    path: Path
    data: Any
    lines: dict[Key, int]
    in_file: bool = True
    """False for a mapping given in code (:func:`memory_config_from_mapping`): no file, no
    lines, no ``$VAR`` references resolved; messages name the key alone."""

    def where(self, key: Key) -> str:
        if not self.in_file:
            return ""
        probe = key
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        return f"{self.path}:{line}" if line else str(self.path)


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it: DeerFlow's 2,600-line ``config.example.yaml``
parses in 18 ms instead of 440 ms (composed for line numbers, then loaded)."""

_PARSED: dict[tuple[str, int, int, int], YamlDoc] = {}
_PARSED_LOCK = threading.Lock()
_PARSED_MAX = 64


def read_yaml(path: Path) -> YamlDoc:
    """The parsed file, from a cache keyed by the file's identity, size and modification time.

    Hosts build middleware per request (DeerFlow builds ``extensions.middlewares`` for every
    agent), and each construction reads the config: without the cache, every request parsed
    DeerFlow's example file again (255 ms a construction). A changed file is read again.
    """
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from exc
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _PARSED_LOCK:
        cached = _PARSED.get(key)
    if cached is None:
        cached = _parse_yaml(path)
        with _PARSED_LOCK:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[key] = cached
    # callers may rewrite the data they get: each gets its own copy
    return YamlDoc(cached.path, copy.deepcopy(cached.data), cached.lines)


def _parse_yaml(path: Path) -> YamlDoc:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from exc
    try:
        node = yaml.compose(text, Loader=_LOADER)
        if node is not None:
            _check_expansion(node, path)
        data = yaml.load(text, Loader=_LOADER)
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
    return YamlDoc(path, data, lines)


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


def dotted(key: Key) -> str:
    return ".".join(str(part) for part in key)


def at(doc: YamlDoc, key: Key) -> str:
    """Where ``key`` is, for a message: ``file:line: dotted.key``, or the key of a mapping."""
    where = doc.where(key)
    return f"{where}: {dotted(key)}" if where else dotted(key)


def resolve_env(value: Any, doc: YamlDoc, key: Key) -> Any:
    """Replace ``$VAR`` (whole value) and ``${VAR}`` (anywhere) from the environment, loudly."""
    if isinstance(value, str) and "$" in value:

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in os.environ:
                raise ConfigError(
                    f"{doc.where(key)}: {dotted(key)}: environment variable ${name} is not set"
                )
            return os.environ[name]

        return _ENV_REF.sub(lookup, value)
    if isinstance(value, dict):
        return {k: resolve_env(v, doc, (*key, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, doc, (*key, i)) for i, v in enumerate(value)]
    return value
