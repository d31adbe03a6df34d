"""A DeerFlow custom agent's own memory switch, read from its ``config.yaml``.

DeerFlow keeps each custom agent in ``<home>/users/<uid>/agents/<name>/config.yaml`` (per user;
``<home>/agents/<name>/`` is the read-only legacy layout it falls back to), where ``<home>`` is
its data folder (``$DEER_FLOW_HOME``, else ``<project root>/.deer-flow``). Two keys there switch
memory off for that agent, whatever the deployment's ``memory:`` block says:

- ``memory: {enabled: false}`` — DeerFlow pull request #4184 (``AgentConfig.memory``);
- ``memory_enabled: false`` — the same feature as DeerFlow merged it later (#5167).

Either one is enough. The switch is narrow, as in DeerFlow: an agent may turn memory off, never
on (``enabled: true`` leaves the deployment's setting as it is). DeerFlow folds it into the
app config when it builds the lead agent, so a host that has the pull request never calls its
backend for that agent; a host without it (or a code path that reaches the backend directly: a
summarisation flush, a channel, a tool) does, and :class:`AgentSwitch` is how the backend
honours the file all the same: no capture, an empty context.

The backend asks on every ``add``/``get_context``, so the answer is cheap: a ``stat`` of the
(at most two) candidate files, and the file is parsed again only when its modification time or
size changed. A file that cannot be read or parsed, or a switch that is not a yes/no, leaves
memory as the deployment has it and is logged once per version of the file — DeerFlow itself
refuses to load such an agent, so nothing runs for it there; a stray edit must not take the
host down here either.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import TypeAdapter, ValidationError

from deermem_middleware.formats import deerflow_paths

__all__ = ["AgentSwitch", "memory_switched_off"]

logger = logging.getLogger(__name__)

_BOOL: Final = TypeAdapter(bool)
"""DeerFlow reads its agent configs with pydantic: ``"false"``, ``"no"``, ``0`` mean false."""


class SwitchFormatError(ValueError):
    """An agent config whose memory switch cannot be read (the message says where)."""


def _flag(value: Any, key: str) -> bool:
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        raise SwitchFormatError(f"{key} must be true or false, got {value!r}") from None


def memory_switched_off(data: Any) -> bool:
    """Whether an agent's parsed ``config.yaml`` switches memory off (see the module
    docstring); :class:`SwitchFormatError` when the file or a switch in it is malformed.
    An empty file (None) switches nothing."""
    if data is None:
        return False
    if not isinstance(data, Mapping):
        raise SwitchFormatError("the top level must be a mapping")
    off = False
    block = data.get("memory")
    if isinstance(block, Mapping):
        if "enabled" in block and block["enabled"] is not None:
            off = not _flag(block["enabled"], "memory.enabled")
    elif block is not None:
        raise SwitchFormatError(f"memory must be a mapping, got {type(block).__name__}")
    flat = data.get("memory_enabled")
    if flat is not None:
        off = off or not _flag(flat, "memory_enabled")
    return off


@dataclass(frozen=True)
class _Seen:
    """A file as last parsed: its ``stat`` identity and the answer."""

    mtime_ns: int
    size: int
    off: bool


class AgentSwitch:
    """Whether a DeerFlow custom agent switched memory off for a user (see the module).

    Args:
        home: DeerFlow's data folder; None: DeerFlow's own rule
            (:func:`~deermem_middleware.formats.deerflow_paths.deerflow_home`), resolved on first
            use.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self._home = Path(home) if home is not None else None
        self._seen: dict[Path, _Seen] = {}
        self._warned: set[tuple[Path, int, int]] = set()
        self._lock = threading.Lock()

    @property
    def home(self) -> Path:
        if self._home is None:
            self._home = deerflow_paths.deerflow_home()
        return self._home

    def config_file(self, agent_name: str, user_id: str) -> Path | None:
        """The ``config.yaml`` DeerFlow reads for this agent and user (per-user folder first,
        then the legacy shared one), or None when there is none."""
        return deerflow_paths.agent_config_file(agent_name, user_id=user_id, home=self.home)

    def off(self, agent_name: str | None, user_id: str | None) -> bool:
        """True when ``agent_name``'s own config switches memory off for ``user_id`` (None:
        DeerFlow's default user); False for no agent, no file, or a file that cannot be read
        (logged)."""
        if not agent_name:
            return False
        path = self.config_file(agent_name, user_id or deerflow_paths.DEFAULT_USER_ID)
        if path is None:
            return False
        try:
            info = path.stat()
        except OSError:
            return False  # removed meanwhile
        with self._lock:
            seen = self._seen.get(path)
        if seen is not None and (seen.mtime_ns, seen.size) == (info.st_mtime_ns, info.st_size):
            return seen.off
        off = self._read(path, info.st_mtime_ns, info.st_size)
        with self._lock:
            self._seen[path] = _Seen(info.st_mtime_ns, info.st_size, off)
        return off

    def _read(self, path: Path, mtime_ns: int, size: int) -> bool:
        try:
            text = path.read_text(encoding="utf-8")
            return memory_switched_off(yaml.safe_load(text))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, SwitchFormatError) as exc:
            key = (path, mtime_ns, size)
            with self._lock:
                first = key not in self._warned
                self._warned.add(key)
            if first:
                logger.warning(
                    "memory: agent config %s cannot be read for its memory switch (%s); "
                    "memory follows the deployment's setting for this agent",
                    path,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                )
            return False
