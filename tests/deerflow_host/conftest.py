"""Fixtures for the end-to-end tests against DeerFlow installed for real.

Run in DeerFlow's own environment (Python 3.12, its locked versions) with its backend folder on
``PYTHONPATH`` (DeerFlow's gateway package ``app`` is importable only from there)::

    PYTHONPATH=<backend> <venv>/bin/python -m pytest tests/deerflow_host -p no:cacheprovider

Nothing here skips: without DeerFlow, or without the local llama.cpp server
(``deermem local-llm install``), every test fails and says what is missing.

:class:`DeerFlowHost` is one DeerFlow deployment in a temporary project folder, set up the way
DeerFlow finds its own files: a ``config.yaml`` named by ``DEER_FLOW_CONFIG_PATH``, the
``extensions_config.json`` beside it, and the data folder named by ``DEER_FLOW_HOME``, seeded
with DeerFlow's own (v1.0) memory of another user. Its config is loaded by DeerFlow's
``get_app_config()`` (which also sets DeerFlow's memory config), its memory backend is what
DeerFlow's ``get_memory_manager()`` builds, turns are run by DeerFlow's ``make_lead_agent`` on
the async path DeerFlow's run worker uses (``astream``), and its memory REST API is DeerFlow's
gateway router behind DeerFlow's ``AuthMiddleware``, reached the way DeerFlow's IM channel
workers reach it for a user (its internal token and owner header).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from deermem_middleware.extraction.local_llm import (
    LocalLLMError,
    LocalLLMServer,
    bundled_gguf,
    find_llama_server,
)

OURS = "deermem_middleware"
"""Our folder in DeerFlow's data folder; every other file there is DeerFlow's."""
EXTRACTION_MODEL = "smollm2"
"""DeerFlow's first ``models:`` entry: its default model, which its factory's
``host_llm_factory`` builds for our extraction (``max_tokens`` 384: the tiny model repeats
itself to any limit, and our parser keeps the complete items of a cut answer)."""
CHAT_MODEL = "smollm2-brief"
"""The ``models:`` entry the test runs ask for (``context.model_name``, as DeerFlow's UI does):
the same server with ``max_tokens`` 24, so each lead-agent turn is short."""
SLOT_CONTEXT = 8192
"""Tokens per llama.cpp slot: DeerFlow's system prompt with its tools is about 3,000."""
OTHER_USER = "priya"
"""The user whose DeerFlow (v1.0) memory is in the data folder before anything runs."""
OTHER_USERS_FACT = "Priya maintains the billing service in Rust"
DEERFLOW_MODULES = (
    "deerflow.agents.lead_agent.agent",
    "deerflow.agents.memory",
    "deerflow.agents.memory.tools",
    "deerflow.config.app_config",
    "deerflow.config.memory_config",
    "app.gateway.routers.memory",
    "app.gateway.auth_middleware",
    "app.gateway.internal_auth",
)


def deerflow_module(name: str) -> Any:
    """DeerFlow's module ``name``; without DeerFlow, a test failure that says how to run these
    tests."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = f"{name}: {exc}"
    pytest.fail(
        f"DeerFlow is not importable ({missing}). These tests run against DeerFlow installed "
        "for real: use DeerFlow's environment (Python 3.12) with this package installed in it, "
        "and put DeerFlow's backend folder on PYTHONPATH (see .ci/deerflow.sh).",
        pytrace=False,
    )


@pytest.fixture(scope="session", autouse=True)
def _deerflow_installed() -> None:
    for name in DEERFLOW_MODULES:
        deerflow_module(name)


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLMServer]:
    """One llama.cpp server (the bundled SmolLM2-135M) for the session."""
    missing = None
    try:
        find_llama_server()
        bundled_gguf()
    except LocalLLMError as exc:
        missing = str(exc)
    if missing is not None:
        pytest.fail(
            f"the local LLM is missing ({missing}): run `deermem local-llm install` in "
            "DeerFlow's environment (or set DEERMEM_LLAMA_SERVER to a llama-server binary)",
            pytrace=False,
        )
    # two slots: DeerFlow's long system prompt stays cached in one while extractions use the
    # other; one core is left to DeerFlow and the engine
    server = LocalLLMServer(
        context_size=2 * SLOT_CONTEXT,
        threads=max(1, (os.cpu_count() or 2) - 1),
        extra_args=["-np", "2"],
    ).start()
    try:
        yield server
    finally:
        # an extraction a closing engine started may still be running: no need to wait for it
        server.stop(timeout=2.0)


# -- what the model receives --------------------------------------------------------------------


class ModelInputs(BaseCallbackHandler):
    """Every chat-model call of a run, as the messages the model received (the provider's
    request), recorded through the run's callbacks."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.calls.extend(list(batch) for batch in messages)


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(
        part if isinstance(part, str) else str(part.get("text", "")) for part in content
    )


@dataclass
class Run:
    """A lead agent DeerFlow built for one run, with the run's config and runtime context."""

    agent: Any
    config: dict[str, Any]
    context: dict[str, Any]
    inputs: ModelInputs

    def go(self, payload: Any) -> Turn:
        """Run the graph (``payload`` None: resume from the checkpoint) to its end."""
        first = len(self.inputs.calls)
        state = asyncio.run(self._astream(payload))
        return Turn(self.agent, state, self.inputs.calls[first:])

    async def _astream(self, payload: Any) -> dict[str, Any]:
        state: dict[str, Any] = {}
        async for chunk in self.agent.astream(
            payload, config=self.config, context=self.context, stream_mode="values"
        ):
            state = chunk
        return state


@dataclass
class Turn:
    """One lead-agent run: the agent DeerFlow built, the thread's state after it, and the
    messages of every model call it made."""

    agent: Any
    state: dict[str, Any]
    model_calls: list[list[BaseMessage]]

    @property
    def answers(self) -> list[AIMessage]:
        """The model's messages in the thread (an empty answer is replaced by DeerFlow's
        ``TerminalResponseMiddleware``, so each has content or tool calls)."""
        return [m for m in self.state["messages"] if isinstance(m, AIMessage)]


# -- the manager's calls, as DeerFlow makes them --------------------------------------------------


@dataclass
class ManagerCall:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class ManagerCalls:
    """The calls DeerFlow makes on our ``DeermemMemoryManager`` (its class's methods wrapped)."""

    calls: list[ManagerCall] = field(default_factory=list)

    def of(self, method: str) -> list[ManagerCall]:
        return [call for call in self.calls if call.method == method]

    def clear(self) -> None:
        self.calls.clear()


SPIED_METHODS = (
    "add",
    "aadd",
    "add_nowait",
    "get_context",
    "aget_context",
    "on_turn_start",
    "search",
    "get_memory",
    "reload_memory",
    "clear_memory",
    "import_memory",
    "create_fact",
    "update_fact",
    "delete_fact",
    "shutdown_flush",
    "warm",
)


@pytest.fixture
def manager_calls(monkeypatch: pytest.MonkeyPatch) -> ManagerCalls:
    from deermem_middleware.deerflow import DeermemMemoryManager

    record = ManagerCalls()

    def spy(method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(original):

            async def awrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                record.calls.append(ManagerCall(method, args, dict(kwargs)))
                return await original(self, *args, **kwargs)

            return awrapper

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            record.calls.append(ManagerCall(method, args, dict(kwargs)))
            return original(self, *args, **kwargs)

        return wrapper

    for method in SPIED_METHODS:
        monkeypatch.setattr(
            DeermemMemoryManager, method, spy(method, getattr(DeermemMemoryManager, method))
        )
    return record


# -- the host -----------------------------------------------------------------------------------


def deerflow_v1_memory(facts: list[dict[str, Any]]) -> dict[str, Any]:
    """A memory document as DeerFlow (v1.0) writes it."""
    empty = {"summary": "", "updatedAt": ""}
    return {
        "version": "1.0",
        "lastUpdated": "2026-05-01T09:00:00Z",
        "user": {
            "workContext": {
                "summary": "Backend engineer on the payments team.",
                "updatedAt": "2026-05-01T09:00:00Z",
            },
            "personalContext": dict(empty),
            "topOfMind": dict(empty),
        },
        "history": {
            "recentMonths": dict(empty),
            "earlierContext": dict(empty),
            "longTermBackground": dict(empty),
        },
        "facts": facts,
    }


@dataclass
class DeerFlowHost:
    """One DeerFlow deployment in a temporary project folder (see the module docstring)."""

    root: Path
    llm: LocalLLMServer
    monkeypatch: pytest.MonkeyPatch
    baseline: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        """DeerFlow's data folder (``DEER_FLOW_HOME``)."""
        return self.root / ".deer-flow"

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def extensions_path(self) -> Path:
        return self.root / "extensions_config.json"

    @property
    def ours(self) -> Path:
        return self.home / OURS

    def models(self) -> list[dict[str, Any]]:
        """DeerFlow ``models:`` entries: ChatOpenAI against the local llama.cpp server."""

        def entry(name: str, max_tokens: int) -> dict[str, Any]:
            return {
                "name": name,
                "display_name": name,
                "use": "langchain_openai:ChatOpenAI",
                "model": self.llm.alias,
                "base_url": self.llm.base_url,
                "api_key": "not-needed",
                "temperature": 0,
                "max_tokens": max_tokens,
                "timeout": 600,
                "max_retries": 1,
                "extra_body": {"repeat_penalty": 1.1},
                "supports_thinking": False,
                "supports_vision": False,
            }

        return [entry(EXTRACTION_MODEL, 384), entry(CHAT_MODEL, 24)]

    def write_config(self, memory: dict[str, Any], *, middlewares: list[str] | None = None) -> None:
        """DeerFlow's ``config.yaml`` with this ``memory:`` block (and ``extensions.middlewares``);
        the files DeerFlow owns are hashed, then DeerFlow starts afresh and loads it."""
        config: dict[str, Any] = {
            "log_level": "warning",
            "models": self.models(),
            "sandbox": {"use": "deerflow.sandbox.local:LocalSandboxProvider"},
            "title": {"enabled": False},
            "summarization": {"enabled": False},
            "memory": memory,
        }
        if middlewares is not None:
            config["extensions"] = {"middlewares": middlewares}
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.baseline = self.deerflow_files()
        self.start()

    # DeerFlow's process state

    def start(self) -> Any:
        """DeerFlow (re)loads ``config.yaml`` and forgets its memory manager, as a new gateway
        process would; returns the loaded ``AppConfig``."""
        self.stop()
        app_config = deerflow_module("deerflow.config.app_config")
        app_config.reset_app_config()
        return app_config.get_app_config()

    def stop(self) -> None:
        """Close our backend if DeerFlow built one, and drop DeerFlow's cached manager."""
        factory = deerflow_module("deerflow.agents.memory.manager")
        current = factory._memory_manager
        factory.reset_memory_manager()
        close = getattr(current, "close", None)
        if callable(close):
            close()

    def memory_manager(self) -> Any:
        """DeerFlow's ``get_memory_manager()``, warmed as the gateway's start-up warms it."""
        manager = deerflow_module("deerflow.agents.memory").get_memory_manager()
        manager.warm()
        return manager

    def shutdown_flush(self) -> bool:
        """What DeerFlow's gateway does on shutdown: ``shutdown_flush`` within
        ``memory.shutdown_flush_timeout_seconds``."""
        app_config = deerflow_module("deerflow.config.app_config").get_app_config()
        manager = deerflow_module("deerflow.agents.memory").get_memory_manager()
        return bool(manager.shutdown_flush(app_config.memory.shutdown_flush_timeout_seconds))

    # the gateway

    @contextlib.contextmanager
    def gateway(self) -> Iterator[Any]:
        """DeerFlow's memory router behind DeerFlow's ``AuthMiddleware``, in a TestClient."""
        from fastapi import FastAPI
        from fastapi.testclient import TestClient

        app = FastAPI()
        app.add_middleware(deerflow_module("app.gateway.auth_middleware").AuthMiddleware)
        app.include_router(deerflow_module("app.gateway.routers.memory").router)
        with TestClient(app) as client:
            yield client

    @staticmethod
    def as_user(user_id: str) -> dict[str, str]:
        """Headers of a trusted internal call for ``user_id`` (what DeerFlow's IM channel
        workers send for a connection's owner; the router then reads that owner's memory)."""
        internal_auth = deerflow_module("app.gateway.internal_auth")
        return internal_auth.create_internal_auth_headers(owner_user_id=user_id)

    # the lead agent

    def build_agent(self, user_id: str, thread_id: str, *, agent_name: str | None = None) -> Run:
        """DeerFlow's real lead agent for one run, built by ``make_lead_agent`` from the run
        config DeerFlow's gateway builds (runtime context: thread, run, user, model; with
        ``agent_name``, a run of that custom agent)."""
        make_lead_agent = deerflow_module("deerflow.agents.lead_agent.agent").make_lead_agent
        inputs = ModelInputs()
        context: dict[str, Any] = {
            "thread_id": thread_id,
            "run_id": str(uuid.uuid4()),
            "user_id": user_id,
            "model_name": CHAT_MODEL,
            "thinking_enabled": False,
        }
        configurable: dict[str, Any] = {"thread_id": thread_id}
        if agent_name is not None:
            context["agent_name"] = configurable["agent_name"] = agent_name
        config: dict[str, Any] = {
            "configurable": configurable,
            "context": dict(context),
            "callbacks": [inputs],
            "recursion_limit": 25,
        }
        return Run(make_lead_agent(config), config, context, inputs)

    def run_turn(
        self, user_id: str, thread_id: str, text: str, *, checkpointer: Any = None
    ) -> Turn:
        """One turn of DeerFlow's real lead agent, run with ``astream`` as DeerFlow's run worker
        runs it (with ``checkpointer``: the thread's state is kept, as the worker keeps it)."""
        run = self.build_agent(user_id, thread_id)
        if checkpointer is not None:
            run.agent.checkpointer = checkpointer
        return run.go({"messages": [HumanMessage(text)]})

    # DeerFlow's own files

    def seed(self) -> None:
        """The data folder before DeerFlow starts: another user's DeerFlow (v1.0) memory."""
        folder = self.home / "users" / OTHER_USER
        folder.mkdir(parents=True)
        document = deerflow_v1_memory(
            [
                {
                    "id": "fact_priya_rust",
                    "content": OTHER_USERS_FACT,
                    "category": "context",
                    "confidence": 0.9,
                    "createdAt": "2026-04-30T12:00:00Z",
                    "source": "thread-priya-1",
                }
            ]
        )
        (folder / "memory.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
        self.extensions_path.write_text(
            json.dumps({"mcpServers": {}, "skills": {}}, indent=2), encoding="utf-8"
        )

    def deerflow_files(self) -> dict[str, str]:
        """SHA-256 of every file that is DeerFlow's: its config files and everything in its
        data folder outside ours."""
        files = [self.config_path, self.extensions_path]
        files += [
            path
            for path in self.home.rglob("*")
            if path.is_file() and path.relative_to(self.home).parts[0] != OURS
        ]
        return {
            str(path.relative_to(self.root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(files)
            if path.is_file()
        }

    def assert_deerflow_files_untouched(self) -> None:
        assert self.baseline, "no baseline: write_config() hashes DeerFlow's files"
        assert self.deerflow_files() == self.baseline


@pytest.fixture
def deerflow_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_llm: LocalLLMServer
) -> Iterator[DeerFlowHost]:
    """A DeerFlow deployment in ``tmp_path`` (call ``write_config`` to start it)."""
    root = tmp_path / "project"
    root.mkdir()
    host = DeerFlowHost(root=root, llm=local_llm, monkeypatch=monkeypatch)
    monkeypatch.setenv("DEER_FLOW_PROJECT_ROOT", str(root))
    monkeypatch.setenv("DEER_FLOW_HOME", str(host.home))
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(host.config_path))
    monkeypatch.setenv("DEER_FLOW_EXTENSIONS_CONFIG_PATH", str(host.extensions_path))
    monkeypatch.delenv("DEERMEM_CONFIG", raising=False)
    monkeypatch.delenv("DEER_FLOW_AUTH_DISABLED", raising=False)
    monkeypatch.chdir(root)
    host.seed()
    # the checkpoint mode DeerFlow freezes per process (as DeerFlow's own conftest resets it)
    checkpoint_mode = deerflow_module("deerflow.runtime.checkpoint_mode")
    monkeypatch.setattr(checkpoint_mode, "_frozen_checkpoint_channel_mode", None)
    monkeypatch.setattr(checkpoint_mode, "_frozen_checkpoint_snapshot_frequency", None)
    try:
        yield host
    finally:
        host.stop()
        deerflow_module("deerflow.config.app_config").reset_app_config()
        memory_config = deerflow_module("deerflow.config.memory_config")
        memory_config.set_memory_config(memory_config.MemoryConfig())


@pytest.fixture
def our_middlewares(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, tuple, dict]]]:
    """Every ``deermem_middleware.MemoryMiddleware`` built while the test runs, with the
    arguments it was built with; each is closed at the end."""
    from deermem_middleware import MemoryMiddleware

    built: list[tuple[Any, tuple, dict]] = []
    original = MemoryMiddleware.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        built.append((self, args, kwargs))

    monkeypatch.setattr(MemoryMiddleware, "__init__", recording_init)
    try:
        yield built
    finally:
        for middleware, _, _ in built:
            middleware.close(5.0)
