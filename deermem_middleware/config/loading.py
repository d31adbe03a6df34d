"""Loading :class:`MemoryConfig` from DeerFlow-style YAML.

A DeerFlow ``config.yaml`` carries a ``memory:`` block, either flat (``memory: {enabled,
debounce_seconds, model_name, ...}``) or with its backend knobs nested under
``memory.backend_config``; both load. On top of DeerFlow, memory can be switched per agent *by
name*: ``memory.agents.<name>: {...}`` in the same file, a ``memory:`` block in
``agents/<name>/config.yaml`` next to it, or one in the agent's own ``config.yaml`` in DeerFlow's
data folder (the later source wins key by key).

DeerFlow's real ``config.yaml`` loads unchanged: DeerFlow's own memory keys that mean nothing
here (``manager_class``, ``mode``, ``eviction_*``, ``staleness_*``, ... — see
:mod:`deermem_middleware.config.deerflow_compat`) are accepted and listed in one INFO log; a
null value for a key that cannot be null (``temperature:`` left empty) counts as not set; and
``storage_path`` keeps DeerFlow's meanings (:mod:`deermem_middleware.formats.deerflow_paths`).

Every other mistake is reported with the file, the line and the key: unknown keys (a typo must
not be silently ignored), wrong types, and ``$VAR``/``${VAR}`` references to unset environment
variables.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, get_args

from pydantic import BaseModel, ValidationError

from deermem_middleware.config.deerflow_compat import (
    DEERFLOW_BACKEND_KEYS,
    DEERFLOW_HOST_KEYS,
    is_deerflow_config,
    is_own_manager_class,
    model_from_entry,
)
from deermem_middleware.config.embeddings import UNION_TAGS
from deermem_middleware.config.models import (
    AGENT_NAME_PATTERN,
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    ModelConfig,
    StorageConfig,
)
from deermem_middleware.config.yaml_loader import register_yaml_loader
from deermem_middleware.config.yaml_source import (
    Key,
    YamlDoc,
    at,
    dotted,
    read_yaml,
    resolve_env,
)
from deermem_middleware.formats import deerflow_paths

__all__ = [
    "CONFIG_ENV_VAR",
    "DEERFLOW_CONFIG_ENV_VAR",
    "default_config_path",
    "load_memory_config",
    "memory_config_from_mapping",
]

logger = logging.getLogger(__name__)

CONFIG_ENV_VAR = "DEERMEM_CONFIG"
DEERFLOW_CONFIG_ENV_VAR = deerflow_paths.CONFIG_PATH_ENV_VAR


def default_config_path() -> Path | None:
    """The config file to read when none is given, or None.

    In order: ``$DEERMEM_CONFIG``; ``$DEER_FLOW_CONFIG_PATH`` (DeerFlow's variable); then
    DeerFlow's own discovery: ``config.yaml`` in the project root (``$DEER_FLOW_PROJECT_ROOT``,
    else the current directory), then — DeerFlow installed from its source tree — its
    ``backend/config.yaml`` or repository-root ``config.yaml``. A variable naming no file is an
    error, never a silent fallback.
    """
    env = os.environ.get(CONFIG_ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV_VAR}={env}: no such file")
        return path
    try:
        return deerflow_paths.find_config_path(package_dir=deerflow_paths.installed_deerflow_dir())
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------


@dataclass
class _Origin:
    doc: YamlDoc
    key: Key


@dataclass
class _Merge:
    """The sources merged so far: values, where each came from, DeerFlow keys passed over."""

    main: Path
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, _Origin] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def ignore(self, doc: YamlDoc, key: Key, note: str = "") -> None:
        where = "" if doc.path == self.main else f" (in {doc.path})"
        self.ignored.append(f"{dotted(key)}{note}{where}")


_LAYOUT_KEYS = frozenset({"backend", "backend_config", "agents"})


def _nullable(model: type[BaseModel], name: str) -> bool:
    """Whether ``name`` may be null in ``model`` (unknown names: yes, so they stay errors)."""
    info = model.model_fields.get(name)
    if info is None:
        return True
    annotation = info.annotation
    return annotation is None or annotation is Any or type(None) in get_args(annotation)


def _memory_block(doc: YamlDoc, base: Key) -> dict[str, Any]:
    block = doc.data
    for part in base:
        block = block.get(part) if isinstance(block, dict) else None
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ConfigError(
            f"{doc.where(base)}: {dotted(base)} must be a mapping, got {type(block).__name__}"
        )
    return block


def _take(merge: _Merge, doc: YamlDoc, key: str, value: Any, path: Key) -> None:
    """One key of a block: a null for a key that cannot be null counts as not set; anything
    else (unknown keys too, for the error) is kept, ``$VAR`` references resolved."""
    if value is None and not _nullable(MemoryConfig, key):
        return
    merge.values[key] = resolve_env(value, doc, path) if doc.in_file else value
    merge.origins[key] = _Origin(doc, path)


def _flatten_into(merge: _Merge, doc: YamlDoc, base: Key, *, host: bool = False) -> dict[str, Any]:
    """Merge one ``memory:`` block (flat or ``backend_config`` form) into ``merge``.

    ``host``: the block is the ``memory:`` of DeerFlow's own ``config.yaml``, whose level is
    DeerFlow's: a key there that is not ours is a host setting — one we list
    (:data:`DEERFLOW_HOST_KEYS`) or one DeerFlow added since (#4732 added two) — and is ignored
    (in the loader's one INFO line), never an error that would stop the host. Our keys under
    ``backend_config`` stay strict."""
    block = _memory_block(doc, base)
    for key, value in block.items():
        if key in _LAYOUT_KEYS:
            continue
        if key in DEERFLOW_HOST_KEYS or key in DEERFLOW_BACKEND_KEYS:
            merge.ignore(doc, (*base, key))
            continue
        if host and key not in MemoryConfig.model_fields:
            merge.ignore(doc, (*base, key), " (not a setting of ours: a DeerFlow host setting?)")
            _warn_if_misspelt(doc, (*base, key))
            continue
        _take(merge, doc, key, value, (*base, key))
    backend = block.get("backend")
    if backend is not None and backend not in ("file", "json", "memory"):
        raise ConfigError(
            f"{at(doc, (*base, 'backend'))}: unsupported backend "
            f"{backend!r} (supported: file, memory)"
        )
    nested = block.get("backend_config")
    manager = block.get("manager_class")
    if nested is not None and manager is not None and not is_own_manager_class(manager):
        merge.ignore(doc, (*base, "backend_config"), f" (the config of manager_class {manager!r})")
        return block
    if nested is not None:
        if not isinstance(nested, dict):
            raise ConfigError(f"{at(doc, (*base, 'backend_config'))} must be a mapping")
        for key, value in nested.items():
            path = (*base, "backend_config", key)
            if key in DEERFLOW_BACKEND_KEYS:
                merge.ignore(doc, path)
                continue
            if key in merge.values and key in block and merge.values[key] != value:
                logger.warning("%s overrides %s", at(doc, path), dotted((*base, key)))
            _take(merge, doc, key, value, path)
    return block


def _warn_if_misspelt(doc: YamlDoc, key: Key) -> None:
    """A WARNING when an ignored host-level key reads like one of ours misspelt
    (``max_factz``): ignored like any host setting, but said where the user will look."""
    name = str(key[-1])
    close = difflib.get_close_matches(name, list(MemoryConfig.model_fields), n=1, cutoff=0.88)
    if close:
        logger.warning(
            "%s: not a setting of ours (did you mean %s?); ignored as a DeerFlow host setting",
            at(doc, key),
            close[0],
        )


def _resolve_model_name(merge: _Merge, main: YamlDoc) -> None:
    """DeerFlow's ``model_name`` points into the top-level ``models:`` list: inline that entry."""
    name = merge.values.get("model_name")
    if name is None or merge.values.get("model") is not None:
        return
    models = main.data.get("models") if isinstance(main.data, dict) else None
    origin = merge.origins["model_name"]
    if not isinstance(models, list):
        raise ConfigError(
            f"{at(origin.doc, origin.key)}: {name!r} refers to the "
            "top-level 'models:' list, which this file does not have"
        )
    for index, entry in enumerate(models):
        if isinstance(entry, dict) and entry.get("name") == name:
            entry = resolve_env(entry, main, ("models", index))
            translated = model_from_entry(entry)
            merge.values["model"] = translated.model
            merge.origins["model"] = _Origin(main, ("models", index))
            for key in translated.unused:
                merge.ignore(main, ("models", index, key))
            return
    raise ConfigError(
        f"{at(origin.doc, origin.key)}: no model named {name!r} in the top-level 'models:' list"
    )


def _without_nulls(value: Any, model: type[BaseModel]) -> Any:
    """A nested mapping without the nulls of keys that cannot be null (they mean "default")."""
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if v is not None or _nullable(model, str(k))}


def _read_agent_doc(path: Path) -> YamlDoc | None:
    doc = read_yaml(path)
    if doc.data is not None and not isinstance(doc.data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return doc if doc.data else None


AGENT_MEMORY_SWITCH: Final = "memory_enabled"
"""DeerFlow's top-level key of an agent's own ``config.yaml`` (its #5167) switching that agent's
memory off; its #4184 spelt it ``memory: {enabled: false}``, which the block merge reads."""


def _agent_memory_switch(merge: _Merge, doc: YamlDoc) -> None:
    """``memory_enabled: false`` in an agent's own file: memory off for that agent (a file can
    switch it off, never on: ``true`` leaves the deployment's setting)."""
    value = doc.data.get(AGENT_MEMORY_SWITCH) if isinstance(doc.data, dict) else None
    if value is None or value is True:
        return
    if value is not False:
        raise ConfigError(
            f"{doc.where((AGENT_MEMORY_SWITCH,))}: {AGENT_MEMORY_SWITCH} must be true or false, "
            f"got {value!r}"
        )
    _take(merge, doc, "enabled", False, (AGENT_MEMORY_SWITCH,))


def _agent_files(main: YamlDoc, agent_name: str, user_id: str | None) -> list[Path]:
    """The agent's own config files, in merge order: ``agents/<name>/config.yaml`` beside the
    main file, then the one DeerFlow reads for it (per-user layout, else legacy)."""
    found: list[Path] = []
    beside = main.path.parent / "agents" / agent_name / "config.yaml"
    if beside.is_file():
        found.append(beside.resolve())
    deerflow_file = deerflow_paths.agent_config_file(agent_name, user_id=user_id)
    if deerflow_file is not None and deerflow_file.resolve() not in found:
        found.append(deerflow_file.resolve())
    return found


def _storage_paths(merge: _Merge, deerflow: bool) -> None:
    """``storage_path`` (and a sqlite ``storage.path``) made absolute.

    DeerFlow's file: DeerFlow's rules (empty or absent → its data folder; relative → under it;
    ``*.json`` → its folder), and our files in our subfolder of that root (the one DeerFlow's
    manager adapter uses too, so both adapters share the documents). Otherwise relative paths
    resolve against the YAML file that set them, ``*.json`` means its folder too, and a blank
    value is the default (see the model).
    """
    values = merge.values
    storage = values.get("storage_path")
    if deerflow and (storage is None or isinstance(storage, str)):
        root = deerflow_paths.storage_root(storage)
        values["storage_path"] = str(root / deerflow_paths.DEERMEM_FOLDER)
        values.setdefault("deerflow_memory_folder", str(root))
    elif isinstance(storage, str) and storage.strip():
        text = storage
        if text.lower().endswith(".json"):
            text = os.path.dirname(text) or "."
            logger.debug("memory storage_path %r names a file: using its folder", storage)
        if not os.path.isabs(os.path.expanduser(text)):
            text = str(merge.origins["storage_path"].doc.path.parent / text)
        values["storage_path"] = os.path.normpath(text) if text != storage else text
    backend = values.get("storage")
    if isinstance(backend, dict) and isinstance(backend.get("path"), str):
        db_path = backend["path"]
        if db_path and not os.path.isabs(os.path.expanduser(db_path)):
            folder = merge.origins["storage"].doc.path.parent
            values["storage"] = {**backend, "path": str(folder / db_path)}


def load_memory_config(
    path: str | os.PathLike[str],
    *,
    agent_name: str | None = None,
    user_id: str | None = None,
) -> MemoryConfig:
    """Load the memory config for ``agent_name`` (None: the default agent) from ``path``.

    Sources, later wins key by key: the ``memory:`` block of ``path`` → ``memory.agents.<name>``
    in the same file → the ``memory:`` block of ``agents/<name>/config.yaml`` beside ``path`` →
    the ``memory:`` block of the agent's ``config.yaml`` in DeerFlow's data folder
    (``users/<user_id>/agents/<name>/``, else the legacy ``agents/<name>/``). ``user_id``
    (default ``"default"``, DeerFlow's user without authentication) only picks that folder.
    """
    main = read_yaml(Path(path).expanduser().resolve())
    if main.data is None:
        main.data = {}
    if not isinstance(main.data, dict):
        raise ConfigError(f"{main.path}: top level must be a mapping")
    if agent_name is not None and not AGENT_NAME_PATTERN.match(agent_name):
        raise ConfigError(f"agent name must match {AGENT_NAME_PATTERN.pattern}, got {agent_name!r}")
    if user_id is not None:
        try:
            deerflow_paths.validate_user_id(user_id)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    merge = _Merge(main.path)
    block = _flatten_into(merge, main, ("memory",), host=is_deerflow_config(main.data))
    agents = block.get("agents")
    if agents is not None and not isinstance(agents, dict):
        raise ConfigError(f"{main.where(('memory', 'agents'))}: memory.agents must be a mapping")
    if agent_name is not None:
        if agents and agent_name in agents:
            _flatten_into(merge, main, ("memory", "agents", agent_name))
        for agent_file in _agent_files(main, agent_name, user_id):
            agent_doc = _read_agent_doc(agent_file)
            if agent_doc is not None:
                _flatten_into(merge, agent_doc, ("memory",))
                _agent_memory_switch(merge, agent_doc)
    _settle(merge, main, deerflow=is_deerflow_config(main.data))
    if agent_name is not None:
        merge.values["agent_name"] = agent_name
    if merge.ignored:
        logger.info(
            "%s: ignoring DeerFlow memory settings this package does not use: %s",
            main.path,
            ", ".join(merge.ignored),
        )
    return _config(merge)


def memory_config_from_mapping(
    block: Mapping[str, Any],
    *,
    where: str = "backend_config",
    deerflow: bool = True,
    strict: bool = True,
) -> MemoryConfig:
    """A :class:`MemoryConfig` from a ``memory:`` block given as a mapping (DeerFlow's
    ``memory.backend_config``, a dict built in code), read by the loader's rules.

    Flat or with ``backend_config`` nested; DeerFlow's own keys that mean nothing here are
    ignored (one INFO line); a null for a key that cannot be null is not set; ``model`` with
    every field empty is no model. ``deerflow``: the block is DeerFlow's, so ``storage_path``
    keeps DeerFlow's meaning (:func:`deerflow_paths.storage_root`; our files go to its
    ``deermem_middleware`` subfolder) and ``model_name`` — which DeerFlow moves to
    ``model.model`` itself — is ignored; otherwise a relative ``storage_path`` stays relative.
    Unlike a file, ``$VAR`` references are not resolved (the caller's values are final).

    An unknown key is an error, or with ``strict=False`` left out with a WARNING naming it
    (a host passing its block verbatim need not stop for a typo). A wrong value raises
    :class:`ConfigError` naming ``where`` and the key (``backend_config.max_facts: ...``).
    """
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(block).__name__}")
    base: Key = tuple(where.split(".")) if where else ()
    data: Any = _plain(block)
    for part in reversed(base):
        data = {part: data}
    doc = YamlDoc(Path(), data, {}, in_file=False)
    merge = _Merge(doc.path)
    _flatten_into(merge, doc, base)
    if deerflow and "model_name" in merge.values:
        merge.ignore(doc, merge.origins.pop("model_name").key)
        del merge.values["model_name"]
    _settle(merge, doc, deerflow=deerflow)
    if merge.ignored:
        logger.info(
            "ignoring DeerFlow memory settings this package does not use: %s",
            ", ".join(merge.ignored),
        )
    if not strict:
        _drop_unknown(merge.values, where)
    return _config(merge)


def _plain(value: Any) -> Any:
    """Mappings as dicts and lists copied, all the way down: the caller's data is never
    changed, and the loader's steps see what YAML would have given them."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _settle(merge: _Merge, main: YamlDoc, *, deerflow: bool) -> None:
    """The merged values made ready to validate: a ``model`` with every field empty is none,
    ``model_name`` looked up, storage paths made absolute, nested nulls meaning "default"
    dropped."""
    values = merge.values
    model = values.get("model")
    if isinstance(model, dict) and all(item in (None, "") for item in model.values()):
        values["model"] = None  # DeerFlow: every field left out means "no model of its own"
    _resolve_model_name(merge, main)
    _storage_paths(merge, deerflow)
    values["model"] = _without_nulls(values.get("model"), ModelConfig)
    values["storage"] = _without_nulls(values.get("storage"), StorageConfig)
    values["embeddings"] = _without_nulls(values.get("embeddings"), EmbeddingsConfig)
    for key in ("model", "storage", "embeddings"):
        if values[key] is None and key not in merge.origins:
            del values[key]


def _drop_unknown(values: dict[str, Any], where: str) -> None:
    """Leave out the keys :class:`MemoryConfig` (or a model nested in it) does not know, with
    one WARNING naming them."""
    try:
        MemoryConfig.model_validate(values)
        return
    except ValidationError as exc:
        unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
    dropped: list[str] = []
    for loc in unknown:
        holder: Any = values
        path: list[str] = []
        for part in loc[:-1]:
            child = holder.get(part) if isinstance(holder, dict) else None
            if isinstance(child, dict):  # else the name of a union's member: not a key
                holder = child
                path.append(str(part))
        if isinstance(holder, dict) and loc and loc[-1] in holder:
            del holder[loc[-1]]
            dropped.append(".".join([*path, str(loc[-1])]))
    if dropped:
        logger.warning(
            "%s: unknown keys ignored (check the spelling): %s", where, ", ".join(dropped)
        )


def _config(merge: _Merge) -> MemoryConfig:
    config = _validate(merge.values, merge.origins)
    if config.model is not None and config.model.use and "model" in merge.origins:
        origin = merge.origins["model"]
        config.model._use_where = at(origin.doc, (*origin.key, "use"))
    return config


def _validate(merged: Mapping[str, Any], origins: Mapping[str, _Origin]) -> MemoryConfig:
    try:
        return MemoryConfig.model_validate(dict(merged))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(part for part in error["loc"] if part not in UNION_TAGS)
            head = str(loc[0]) if loc else ""
            origin = origins.get(head)
            if origin is None:
                where = f"memory config: {dotted(tuple(loc))}"
            else:
                where = at(origin.doc, (*origin.key, *loc[1:]))
            if error["type"] == "extra_forbidden":
                message = "unknown key (check the spelling; see the config reference)"
            else:
                message = error["msg"]
                if "input" in error and not isinstance(error["input"], dict | list):
                    message += f", got {error['input']!r}"
            problems.append(f"{where}: {message}")
        if len(problems) == 1:  # one line: what a host's start-up error shows in full
            raise ConfigError(f"invalid memory config: {problems[0]}") from None
        raise ConfigError("invalid memory config:\n  " + "\n  ".join(problems)) from None


register_yaml_loader(load_memory_config)
