"""``DeermemMemoryManager`` against our model of DeerFlow's backend contract.

DeerFlow cannot be installed here (it needs Python 3.12), so ``tests/deerflow_contract`` holds a
model of its ``deerflow.agents.memory.manager`` written from DeerFlow's file; each test puts it on
``sys.path`` (the ``contract`` fixture). What the manager hands the gateway goes through the
gateway's response models (``tests/deerflow_gateway.py``): HEAD's, and v2.0.0's strict one, whose
``source`` has no lenient validator: we must send strings.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from deermem_middleware.storage.base import CorruptedMemoryError, RevisionConflict
from deermem_middleware.testing import ScriptedChatModel, update_json
from tests.deerflow_contract_model import CONTRACT
from tests.deerflow_files import pinned
from tests.deerflow_gateway import HeadGatewayMemory, StrictGatewayMemory

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"


# -- the gateway ------------------------------------------------------------------------------


def _gateway(data: dict[str, Any]) -> HeadGatewayMemory:
    """What the gateway builds from a manager's dict (v2.0.0's strict model must take it too: no
    ``source`` but a string), with what its web page needs: times it can parse (an empty
    ``lastUpdated`` is the frontend's "Invalid time value")."""
    StrictGatewayMemory.model_validate(data)
    response = HeadGatewayMemory.model_validate(data)
    for stamp in (response.lastUpdated, *(f.createdAt for f in response.facts)):
        assert stamp, f"empty timestamp in {data}"
        datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return response


def _status(contract: ModuleType, call: Callable[[], Any]) -> int:
    """The HTTP status DeerFlow's gateway answers for what ``call`` raised (its mapping)."""
    try:
        call()
    except NotImplementedError:
        return 501
    except ValueError as exc:
        return 409 if exc.args and exc.args[0] == "Duplicate fact" else 400
    except KeyError:
        return 404
    except contract.MemoryConflictError:
        return 409
    except contract.MemoryCorruptionError:
        return 500
    return 200


# -- fixtures -------------------------------------------------------------------------------------


Build = Callable[..., Any]


@pytest.fixture
def build(contract: ModuleType, tmp_path: Path) -> Iterator[Build]:
    """Managers built the way DeerFlow's factory builds them; closed after the test."""
    built: list[Any] = []
    home = tmp_path / "deer-flow"
    home.mkdir()

    def make(
        backend_config: dict[str, Any] | None = None,
        *,
        mode: str = "middleware",
        model: Any = None,
        hooks: dict[str, Any] | None = None,
    ) -> Any:
        config = {"debounce_seconds": 3600, "flush_on_exit_seconds": None, "embeddings": "none"}
        config.update(backend_config or {})
        if hooks is None:
            hooks = contract.default_host_hooks(lambda: model)
        manager = contract.build_memory_manager(
            MANAGER_CLASS, config, runtime_home=home, mode=mode, host_hooks=hooks
        )
        built.append(manager)
        return manager

    yield make
    for manager in built:
        manager.close()


def _conversation(*pairs: tuple[str, str]) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for said, answered in pairs:
        messages += [HumanMessage(said), AIMessage(answered)]
    return messages


def _fact_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("- [")]


def _wait_for(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


# -- the contract ---------------------------------------------------------------------------------


def test_manager_class_resolves_through_deerflows_resolver(contract: ModuleType) -> None:
    for spelling in (MANAGER_CLASS, "deermem_middleware.deerflow.manager.DeermemMemoryManager"):
        cls = contract._resolve_manager_class(spelling)
        assert issubclass(cls, contract.MemoryManager)
        assert cls.__name__ == "DeermemMemoryManager"
    assert cls.supports_search is True
    assert not inspect.isabstract(cls)
    with pytest.raises(TypeError):  # the model keeps DeerFlow's abstract methods
        contract.MemoryManager()


def test_every_override_has_the_contracts_exact_signature(contract: ModuleType) -> None:
    cls = contract._resolve_manager_class(MANAGER_CLASS)
    base = contract.MemoryManager
    contracted = [
        name
        for name, value in vars(base).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or isinstance(value, classmethod))
    ]
    static = inspect.getattr_static  # the class's own or a mixin's, not the contract's
    overridden = [name for name in contracted if static(cls, name) is not static(base, name)]
    assert set(overridden) >= {
        "add",
        "get_context",
        "add_nowait",
        "search",
        "get_memory",
        "delete_memory",
        "clear_memory",
        "import_memory",
        "export_memory",
        "shutdown_flush",
        "warm",
        "reload_memory",
        "create_fact",
        "delete_fact",
        "update_fact",
        "batch_update_facts",
        "batch_delete_facts",
        "on_turn_start",
        "aadd",
        "aget_context",
        "asearch",
        "from_config",
        "close",
    }
    for name in overridden:
        ours = inspect.signature(getattr(cls, name)).parameters
        theirs = inspect.signature(getattr(base, name)).parameters
        assert [(p.name, p.kind, p.default) for p in ours.values()] == [
            (p.name, p.kind, p.default) for p in theirs.values()
        ], name
        assert inspect.iscoroutinefunction(getattr(cls, name)) == inspect.iscoroutinefunction(
            getattr(base, name)
        ), name
    assert cls.supports_query_aware_context is True
    # today's DeerFlow (without the pull requests): the same parameters, and what they add is
    # keyword-only with a None default, so every call of today's contract binds as it did
    added = {p for pr in contract.PULL_REQUEST_ADDITIONS.values() for p in pr.get("parameters", ())}
    today, _ = _model_signatures(base, contract.PULL_REQUEST_ADDITIONS, _MODELLED_PULL_REQUESTS)
    for name in set(overridden) & set(today):
        params = list(inspect.signature(getattr(cls, name)).parameters.values())
        if not isinstance(inspect.getattr_static(cls, name), classmethod):
            params = params[1:]
        extra = [p for p in params if f"{name}.{p.name}" in added]
        assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in extra), name
        kept = [(p.name, p.kind, p.default) for p in params if p not in extra]
        assert kept == today[name], name


_NO_DEFAULT = inspect.Parameter.empty


def _ast_signatures(path: Path) -> tuple[dict[str, list[tuple[str, Any, Any]]], set[str], set[str]]:
    """From a ``manager.py`` source (never imported): the ``MemoryManager`` methods' parameters
    as (name, kind, default), its annotated class attributes, and the module's class names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    methods: dict[str, list[tuple[str, Any, Any]]] = {}
    for node in classes["MemoryManager"].body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        positional = [*args.posonlyargs, *args.args][1:]  # without self / cls
        defaults = [_NO_DEFAULT] * (len(positional) - len(args.defaults)) + [
            ast.literal_eval(d) for d in args.defaults
        ]
        params = [
            (a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d)
            for a, d in zip(positional, defaults, strict=True)
        ]
        if args.vararg is not None:
            params.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, _NO_DEFAULT))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            default = _NO_DEFAULT if d is None else ast.literal_eval(d)
            params.append((a.arg, inspect.Parameter.KEYWORD_ONLY, default))
        if args.kwarg is not None:
            params.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, _NO_DEFAULT))
        methods[node.name] = params
    attributes = {
        node.target.id
        for node in classes["MemoryManager"].body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    return methods, attributes, set(classes)


_MANAGER_FILE = ("backend", "packages", "harness", "deerflow", "agents", "memory", "manager.py")
_MODELLED_PULL_REQUESTS = (4732, 4885)
"""The open DeerFlow pull requests applied in our contract model (``PULL_REQUEST_ADDITIONS``)."""
_PATCHES = [
    patch
    for number in _MODELLED_PULL_REQUESTS
    for patch in pinned("prs", f"deerflow-pr-{number}.patch")
]


def _patched(manager_file: Path, patches: list[Path], folder: Path) -> Path:
    """DeerFlow's ``manager.py`` with the pull requests' patches applied (their other files left
    out), in ``folder``."""
    target = folder.joinpath(*_MANAGER_FILE)
    target.parent.mkdir(parents=True)
    target.write_bytes(manager_file.read_bytes())
    for patch in patches:
        subprocess.run(
            ["git", "apply", f"--include={'/'.join(_MANAGER_FILE)}", str(patch)],
            cwd=folder,
            check=True,
            capture_output=True,
        )
    return target


def _model_signatures(
    model: type[Any], additions: dict[int, dict[str, tuple[str, ...]]], left_out: tuple[int, ...]
) -> tuple[dict[str, list[tuple[str, Any, Any]]], set[str]]:
    """The model's public methods as (name, kind, default) lists, and its class attributes,
    without what the pull requests ``left_out`` add."""
    gone = {
        kind: {n for pr in left_out for n in additions[pr].get(kind, ())}
        for kind in ("methods", "parameters", "attributes")
    }
    methods: dict[str, list[tuple[str, Any, Any]]] = {}
    for name, value in vars(model).items():
        if name.startswith("_") or name in gone["methods"]:
            continue
        if not (inspect.isfunction(value) or isinstance(value, classmethod)):
            continue
        params = list(inspect.signature(getattr(model, name)).parameters.values())
        if not isinstance(value, classmethod):
            params = params[1:]  # self (a classmethod's signature is already bound)
        methods[name] = [
            (p.name, p.kind, p.default)
            for p in params
            if f"{name}.{p.name}" not in gone["parameters"]
        ]
    attributes = {*vars(model), *model.model_fields} - gone["attributes"]
    return methods, attributes


@pytest.mark.parametrize(
    ("source", "left_out", "patched"),
    [
        pytest.param(CONTRACT.joinpath("deerflow", *_MANAGER_FILE[4:]), (), False, id="our-model"),
        *(
            pytest.param(path, _MODELLED_PULL_REQUESTS, False, id="deerflow-pinned")
            for path in pinned("head", *_MANAGER_FILE)
        ),
        *(
            pytest.param(path, (), True, id="deerflow-pinned-with-pr4732-pr4885")
            for path in pinned("head", *_MANAGER_FILE)
            if len(_PATCHES) == len(_MODELLED_PULL_REQUESTS)
        ),
    ],
)
def test_the_contract_model_matches_deerflows_file(
    contract: ModuleType,
    source: Path,
    left_out: tuple[int, ...],
    patched: bool,
    tmp_path: Path,
) -> None:
    """Our model has DeerFlow's methods with DeerFlow's parameters, fields and errors: checked
    against DeerFlow's own file where this checkout has it — as pinned (without what the open
    pull requests add) and with their patches applied (exactly) — and always against our
    model's source, which keeps the reader itself tested."""
    if patched:
        source = _patched(source, _PATCHES, tmp_path)
    methods, attributes, classes = _ast_signatures(source)
    model = contract.MemoryManager
    ours, our_attributes = _model_signatures(model, contract.PULL_REQUEST_ADDITIONS, left_out)
    assert {name for name in methods if not name.startswith("_")} == set(ours)
    for name, params in ours.items():
        assert params == methods[name], name
    assert attributes >= {"backend_config", "mode", "callbacks", "supports_search"}
    if not left_out:
        assert "supports_query_aware_context" in attributes
    assert {"model_config", *attributes} <= our_attributes
    assert {"MemoryManagerError", "MemoryConflictError", "MemoryCorruptionError"} <= classes


def test_errors_are_deerflows_own_classes(contract: ModuleType) -> None:
    from deermem_middleware.deerflow import manager

    assert manager.MemoryConflictError is contract.MemoryConflictError
    assert manager.MemoryCorruptionError is contract.MemoryCorruptionError
    assert manager.MemoryManagerError is contract.MemoryManagerError


def test_importing_the_package_never_imports_deerflow() -> None:
    code = (
        "import sys, deermem_middleware, deermem_middleware.deerflow\n"
        "import deermem_middleware.formats.deerflow\n"
        "import deermem_middleware.deerflow.backend_config, deermem_middleware.deerflow.gateway\n"
        "import deermem_middleware.deerflow.turns\n"
        "bad = sorted(m for m in sys.modules if m == 'deerflow' or m.startswith('deerflow.'))\n"
        "assert not bad, bad\n"
        "assert 'deermem_middleware.deerflow.manager' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CONTRACT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


# -- construction ---------------------------------------------------------------------------------


def test_from_config_stores_under_storage_path_and_shares_one_engine(
    contract: ModuleType, build: Build, tmp_path: Path
) -> None:
    first = build({"max_facts": 100})
    second = build({"max_facts": 100})
    assert first.service is second.service and first.service.users == 2
    ours = tmp_path / "deer-flow" / "deermem_middleware"  # our folder under the injected root
    assert first.config.storage_path == str(ours)
    second.create_fact("User writes Rust at work", "knowledge", 0.9, user_id="alice")
    assert [p.name for p in (ours / "users").iterdir()] == ["alice"]
    assert [f["content"] for f in first.get_memory(user_id="alice")["facts"]] == [
        "User writes Rust at work"
    ]
    service = first.service
    second.close()
    second.close()  # twice: released once
    assert not service.closed and service.users == 1
    with pytest.raises(contract.MemoryManagerError, match="closed"):
        second.get_memory()
    first.close()
    assert service.closed


def test_backend_config_takes_our_keys_and_ignores_deermem_ones(
    contract: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    from deermem_middleware.deerflow.manager import memory_config_from_backend_config

    config = memory_config_from_backend_config(
        {
            "storage_path": "/srv/deer-flow",
            "debounce_seconds": 5,
            "top_k": None,  # cannot be null: not set
            "max_wait_seconds": None,  # may be null: no bound
            "max_facts": 100,
            "token_counting": "tiktoken",
            "guaranteed_categories": ["correction"],
            "model": {"provider": None, "model": None, "api_key": None},
            "storage_class": "file",
            "eviction_access_weight": 0.1,
            "fact_eviction_policy": "hybrid-v1",
            "host_llm_factory": lambda: None,
            "colour": "blue",
        }
    )
    assert (config.storage_path, config.debounce_seconds, config.max_facts) == (
        os.path.join("/srv/deer-flow", "deermem_middleware"),
        5,
        100,
    )
    assert config.model is None  # every field empty: DeerFlow's "no model"
    assert config.top_k == 15 and config.max_wait_seconds is None
    assert "unknown keys ignored (check the spelling): colour" in caplog.text
    with_model = memory_config_from_backend_config(
        {"model": {"provider": "openai", "model": "gpt-4o-mini", "base_url": None}}
    )
    assert with_model.model is not None and with_model.model.model == "gpt-4o-mini"
    with pytest.raises(ValueError, match=r"memory\.backend_config\.max_facts"):
        memory_config_from_backend_config({"max_facts": 0})


def test_deerflows_own_files_under_storage_path_are_never_touched(
    build: Build, tmp_path: Path
) -> None:
    """DeerFlow's state folder holds its own memory and each user's custom agents under
    ``users/<uid>/``; clearing or erasing a user of ours must leave all of it alone."""
    home = tmp_path / "deer-flow"
    theirs = {
        home / "memory.json": '{"version": "1.0", "facts": []}',
        home / "users" / "alice" / "memory.json": '{"version": "2.0", "revision": 3}',
        home / "users" / "alice" / "agents" / "coder" / "config.yaml": "name: coder\n",
        home / "users" / "alice" / "agents" / "coder" / "SOUL.md": "Be brief.\n",
    }
    for path, text in theirs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    manager = build()
    assert manager.get_memory(user_id="alice")["facts"] == []  # DeerFlow's file is not ours
    manager.create_fact("Alice prefers tabs", user_id="alice")
    manager.create_fact("Alice writes Go", user_id="alice", agent_name="coder")
    manager.clear_memory(user_id="alice")
    manager.create_fact("Alice prefers spaces", user_id="alice")
    manager.delete_memory(user_id="alice")
    assert manager.get_memory(user_id="alice")["facts"] == []
    assert {p: p.read_text(encoding="utf-8") for p in theirs} == theirs


# -- the gateway's operations ---------------------------------------------------------------------


def test_gateway_shapes_validate_and_never_carry_an_empty_time(build: Build) -> None:
    manager = build()
    empty = _gateway(manager.get_memory())  # nothing stored yet
    assert empty.facts == [] and empty.revision == 0
    data, fact_id = manager.create_fact("User prefers dark mode", "preference", 0.9)
    created = _gateway(data)
    assert [f.id for f in created.facts] == [fact_id] and created.revision == 1
    assert created.facts[0].source == "manual"
    for call in (
        manager.get_memory,
        manager.export_memory,
        manager.reload_memory,
        lambda: manager.update_fact(fact_id, confidence=0.8),
        lambda: manager.delete_fact(fact_id),
        manager.clear_memory,
        lambda: manager.import_memory(created.model_dump(exclude_none=True)),
    ):
        _gateway(call())


def test_facts_added_by_hand_never_carry_a_null_source(build: Build) -> None:
    """DeerFlow v2.0.0's API types ``source`` as a string and rejects ``null``: a fact added or
    edited by hand reads ``"manual"``, and the stored document has no ``null`` either."""
    manager = build()
    data, fact_id = manager.create_fact("User prefers green tea", "preference", 0.9)
    assert [f["source"] for f in data["facts"]] == ["manual"]
    data = manager.update_fact(fact_id, content="User prefers oolong tea")
    assert [f["source"] for f in data["facts"]] == ["manual"]
    for fact in _gateway(manager.get_memory()).facts:
        assert fact.source == "manual"
    service = manager.service
    stored = json.loads(service._storage.path_for(service.scope()).read_text(encoding="utf-8"))
    (fact,) = stored["facts"]
    assert "source" not in fact and fact["manual"] is True


def test_fact_errors_map_to_the_gateways_statuses(contract: ModuleType, build: Build) -> None:
    manager = build()
    _, fact_id = manager.create_fact("User lives in Lisbon", "context", 0.9)
    assert _status(contract, lambda: manager.delete_fact("fact_missing")) == 404
    assert _status(contract, lambda: manager.update_fact("fact_missing", content="x")) == 404
    with pytest.raises(ValueError) as duplicate:
        manager.create_fact("  user LIVES in lisbon. ", "context", 0.5)
    assert duplicate.value.args[0] == "Duplicate fact"
    _, other = manager.create_fact("User cycles to work", "behavior", 0.7)
    with pytest.raises(ValueError, match="Duplicate fact"):
        manager.update_fact(other, content="User lives in Lisbon")
    for bad in (1.5, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ValueError) as error:
            manager.create_fact("User owns a cat", "context", bad)
        assert error.value.args[0] == "confidence"
        with pytest.raises(ValueError) as error:
            manager.update_fact(fact_id, confidence=bad)
        assert error.value.args[0] == "confidence"
    for blank in ("", "   ", "\u200b"):
        with pytest.raises(ValueError) as error:
            manager.create_fact(blank)
        assert error.value.args[0] not in ("confidence", "agent_name", "Duplicate fact")
    assert _status(contract, lambda: manager.create_fact("x" * 401)) == 400
    facts = manager.get_memory()["facts"]
    assert sorted(f["content"] for f in facts) == ["User cycles to work", "User lives in Lisbon"]


def test_update_fact_keeps_what_it_is_not_given_and_marks_it_manual(build: Build) -> None:
    manager = build()
    _, fact_id = manager.create_fact("User drinks green tea", "preference", 0.6, user_id="ann")
    data = manager.update_fact(fact_id, confidence=0.95, user_id="ann")
    (fact,) = data["facts"]
    assert (fact["content"], fact["category"], fact["confidence"]) == (
        "User drinks green tea",
        "preference",
        0.95,
    )
    data = manager.update_fact(fact_id, content="User drinks oolong tea", user_id="ann")
    (fact,) = data["facts"]
    assert (fact["content"], fact["category"], fact["confidence"]) == (
        "User drinks oolong tea",
        "preference",
        0.95,
    )
    (stored,) = manager.service.get_memory("ann").facts
    assert stored.manual and stored.updatedAt


def test_lost_races_and_unreadable_memory_raise_deerflows_errors(
    contract: ModuleType, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = build({"storage": {"backend": "memory"}})  # a store: compare-and-set on save
    storage = manager.service._storage.innermost  # under the DeerFlow carry-over
    _, fact_id = manager.create_fact("User plays chess", "context", 0.8)

    def always_behind(scope: Any, memory: Any, expected_revision: int, **kw: Any) -> int:
        raise RevisionConflict(scope, expected_revision, expected_revision + 1)

    monkeypatch.setattr(storage, "save", always_behind)
    assert _status(contract, lambda: manager.create_fact("User plays go")) == 409
    assert _status(contract, lambda: manager.update_fact(fact_id, confidence=0.9)) == 409
    assert _status(contract, lambda: manager.delete_fact(fact_id)) == 409
    assert _status(contract, manager.clear_memory) == 409

    def unreadable(scope: Any) -> Any:
        raise CorruptedMemoryError("users/default/__default__.json", "invalid JSON")

    monkeypatch.setattr(storage, "load", unreadable)
    for call in (manager.get_memory, manager.reload_memory, lambda: manager.search("chess")):
        assert _status(contract, call) == 500
    assert manager.get_context("default") == ""  # injection never breaks the model call


def test_clear_import_and_delete_follow_the_gateways_meaning(build: Build) -> None:
    manager = build()
    manager.create_fact("User is learning Japanese", "goal", 0.9, user_id="kim")
    manager.create_fact("Kim reviews code on Fridays", user_id="kim", agent_name="coder")
    manager.create_fact("Lee likes jazz", "preference", 0.9, user_id="lee")
    cleared = _gateway(manager.clear_memory(user_id="kim"))  # no agent: all of kim's memory
    assert cleared.facts == []
    assert manager.get_memory(user_id="kim", agent_name="coder")["facts"] == []
    assert len(manager.get_memory(user_id="lee")["facts"]) == 1  # other users untouched

    imported = {
        "version": "1.0",
        "lastUpdated": "2026-03-28T10:30:00Z",
        "user": {"workContext": {"summary": "Builds data pipelines", "updatedAt": ""}},
        "facts": [
            {
                "id": "fact_a",
                "content": "User prefers Polars",
                "category": "preference",
                "confidence": 0.9,
                "createdAt": "2026-03-01T00:00:00Z",
                "source": "thread_1",
            },
            {"content": "User uses uv", "confidence": None},
            {"id": "fact_bad", "content": None},
        ],
    }
    data = _gateway(manager.import_memory(imported, user_id="kim"))
    assert [f.content for f in data.facts] == ["User prefers Polars", "User uses uv"]
    assert data.user.workContext.summary == "Builds data pipelines"
    assert data.facts[0].source == "thread_1"
    pixi = {"facts": [{"content": "User uses pixi"}]}
    again = _gateway(manager.import_memory(pixi, user_id="kim"))
    assert [f.content for f in again.facts] == ["User uses pixi"]  # an import replaces
    assert manager.export_memory(user_id="kim") == manager.get_memory(user_id="kim")
    manager.delete_memory(user_id="lee")
    assert manager.get_memory(user_id="lee")["facts"] == []
    assert all(s.user_id != "lee" for s in manager.service.list_scopes())


def test_the_gateway_import_logs_which_fact_ids_it_replaced(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    manager = build()
    imported = {"facts": [{"id": "  ", "content": "User uses uv"}, {"id": 7, "content": "x"}]}
    with caplog.at_level(logging.INFO, logger="deermem_middleware.deerflow.gateway"):
        data = _gateway(manager.import_memory(imported, user_id="kim"))
    assert sorted(f.content for f in data.facts) == ["User uses uv", "x"]
    assert all(f.id.startswith("fact_") for f in data.facts)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("facts[0].id: blank id '  ' (fact 'User uses uv'); given fact_" in m for m in lines)
    assert any("facts[1].id: id 7 is a number" in m for m in lines)
    assert (
        "memory import into user 'kim' agent '__default__': 2 fact(s) read, 2 kept; "
        "2 repaired (2 given a new id), 0 dropped" in lines
    )


# -- injection and search -----------------------------------------------------------------------

BAKING = (
    "User bakes sourdough bread with a rye starter every weekend",
    "User is perfecting a croissant dough lamination for baking",
)
CYCLING = (
    "User races road bicycles and trains for a cycling sportive",
    "User is choosing new tubeless tyres for the racing bicycle",
)


def _topic(line: str) -> str:
    if any(fact in line for fact in BAKING):
        return "baking"
    if any(fact in line for fact in CYCLING):
        return "cycling"
    return line


def test_get_context_ranks_by_the_turn_start_message(build: Build) -> None:
    manager = build({"top_k": 4})
    for baking, cycling in zip(BAKING, CYCLING, strict=True):
        manager.create_fact(baking, "preference", 0.9, user_id="alice")
        manager.create_fact(cycling, "preference", 0.9, user_id="alice")

    unranked = manager.get_context("alice", thread_id="t1")  # no turn seen yet: no query
    assert len(_fact_lines(unranked)) == 4 and "<memory>" not in unranked  # DeerFlow wraps it

    baking = HumanMessage("My sourdough bread came out flat, baking tips?")
    manager.on_turn_start(1, baking, thread_id="t1", user_id="alice")
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t1"))[0]) == "baking"
    cycling = {"role": "user", "content": "Which tyres for my road bicycle?"}
    manager.on_turn_start(2, cycling, config={"configurable": {"thread_id": "t1"}})
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t1"))[0]) == "cycling"
    manager.on_turn_start(3, AIMessage("Bake the sourdough bread longer"), thread_id="t1")
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t1"))[0]) == "cycling"

    # a turn filed under another user does not steer alice's ranking of that thread
    manager.on_turn_start(4, "sourdough bread baking", thread_id="t2", user_id="bob")
    assert manager.get_context("alice", thread_id="t2") == unranked
    # a turn naming no thread ranks that user's threads that have none of their own
    manager.on_turn_start(5, "sourdough bread baking", user_id="alice")
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t3"))[0]) == "baking"
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t1"))[0]) == "cycling"


def test_get_context_without_a_message_ranks_by_the_users_last_add(build: Build) -> None:
    """DeerFlow's lead agent asks ``get_context(user_id, agent_name)`` with no message and no
    thread: the user's previous message, seen in ``add``, is the query."""
    manager = build({"top_k": 4})
    for baking, cycling in zip(BAKING, CYCLING, strict=True):
        manager.create_fact(baking, "preference", 0.9, user_id="alice")
        manager.create_fact(cycling, "preference", 0.9, user_id="alice")
    unranked = manager.get_context("alice")
    manager.add(
        "t9",
        [HumanMessage("Which tyres for my road bicycle?"), AIMessage("28 mm.")],
        user_id="alice",
    )
    ranked = manager.get_context("alice")
    assert ranked != unranked
    assert _topic(_fact_lines(ranked)[0]) == "cycling"
    assert manager.get_context("bob") == ""  # another user's add steers nothing of alice's
    manager.add("t9", [HumanMessage("sourdough bread baking"), AIMessage("ok")], user_id="alice")
    assert _topic(_fact_lines(manager.get_context("alice", thread_id="t9"))[0]) == "baking"


def test_get_context_stays_within_the_token_budget(build: Build) -> None:
    manager = build({"max_injection_tokens": 120, "token_counting": "char"})
    for number in range(40):
        manager.create_fact(f"User collected vintage postcard number {number} from Porto")
    block = manager.get_context(None)
    assert 0 < len(_fact_lines(block)) < 40
    assert manager.service._recall.count_tokens(block) <= 120
    assert build({"injection_enabled": False}).get_context(None) == ""


def test_tool_mode_search_filters_the_category_before_top_k(build: Build) -> None:
    manager = build(mode="tool")
    assert manager.mode == "tool"
    for text in ("User loves Python typing", "User prefers Python over Java", "Python at work"):
        manager.create_fact(text, "preference", 0.9)
    manager.create_fact("User wants to give a Python talk", "goal", 0.7)
    manager.create_fact("User keeps bees", "context", 0.9)
    top = manager.search("Python", 2)
    assert len(top) == 2 and all("Python" in r["content"] for r in top)
    assert set(top[0]) >= {"id", "content", "category", "confidence", "score", "createdAt"}
    assert top[0]["source"] == "manual"  # the memory_search tool's description promises it
    assert top[0]["score"] >= top[1]["score"]
    (goal,) = manager.search("Python", 1, category="goal")
    assert goal["content"] == "User wants to give a Python talk"
    assert manager.search("Python", 0) == []
    assert len(manager.search("", 10)) == 5  # no query: every active fact, by confidence
    assert manager.search("Python", 3, user_id="someone-else") == []


def test_tool_mode_injects_the_summaries_and_leaves_the_facts_to_the_tools(build: Build) -> None:
    """DeerFlow's tool-mode prompt tells the model that only the summaries are injected and
    that it finds facts with ``memory_search`` (what DeerFlow's own backend does)."""
    document = {
        "user": {"workContext": {"summary": "Backend engineer on payments.", "updatedAt": ""}},
        "facts": [{"id": "fact_go", "content": "User writes Go", "category": "knowledge"}],
    }
    tool = build(mode="tool")
    tool.import_memory(document, user_id="alice")
    context = tool.get_context("alice")
    assert "Backend engineer on payments." in context and "User writes Go" not in context
    assert tool.search("Go", 1, user_id="alice")[0]["content"] == "User writes Go"
    middleware = build()
    middleware.import_memory(document, user_id="alice")
    assert "User writes Go" in middleware.get_context("alice")


# -- capture and extraction -----------------------------------------------------------------------


def test_add_then_shutdown_flush_stores_the_extraction(build: Build) -> None:
    model = ScriptedChatModel(
        answers=[update_json(facts=[("User loves sushi", "preference", 0.9)])]
    )
    asked: list[int] = []

    def host_llm() -> Any:
        asked.append(1)
        return model

    def keep_clarifications(extra: Any) -> bool:
        return "human_input_response" in extra

    hooks = {
        "callbacks": None,
        "should_keep_hidden_message": keep_clarifications,
        "trace_context_manager": None,
        "host_llm_factory": host_llm,
        "extraction_callback": None,
    }
    manager = build(hooks=hooks)
    assert asked == []  # built lazily, only when an update needs it
    messages = [
        HumanMessage("Sushi is my favourite food, just so you know."),
        AIMessage("", tool_calls=[{"name": "search", "args": {"q": "sushi"}, "id": "c1"}]),
        ToolMessage("TOOL-RESULT-7731", tool_call_id="c1"),
        HumanMessage("REMINDER-4410 todo list", additional_kwargs={"hide_from_ui": True}),
        HumanMessage(
            "CLARIFIED-2208 yes, salmon",
            additional_kwargs={"hide_from_ui": True, "human_input_response": {"answer": "yes"}},
        ),
        AIMessage("Noted: you love sushi."),
    ]
    manager.add("thread-1", messages, agent_name=None, user_id=None, trace_id="trace-1")
    assert manager.get_memory()["facts"] == []  # debounced, not yet run
    assert manager.shutdown_flush(10.0) is True
    assert asked == [1]
    assert [f["content"] for f in manager.get_memory()["facts"]] == ["User loves sushi"]
    prompt = json.dumps([str(m.content) for m in model.calls[0]])
    assert "Sushi is my favourite food" in prompt and "CLARIFIED-2208" in prompt
    assert "TOOL-RESULT-7731" not in prompt and "REMINDER-4410" not in prompt


def test_extraction_never_removes_a_manual_fact(build: Build) -> None:
    model = ScriptedChatModel(answers=[])
    manager = build(model=model)
    _, fact_id = manager.create_fact("User's dog is called Miso", "context", 0.9)
    model.answers.append(update_json(remove=[fact_id]))
    manager.add("t", _conversation(("I walked the dog today", "Nice walk!")))
    assert manager.shutdown_flush(10.0)
    assert len(model.calls) == 1
    assert [f["id"] for f in manager.get_memory()["facts"]] == [fact_id]


def test_add_nowait_runs_the_update_without_waiting_for_the_debounce(build: Build) -> None:
    model = ScriptedChatModel(
        answers=[update_json(facts=[("User is moving to Oslo", "context", 0.9)])]
    )
    manager = build(model=model)  # an hour of debounce
    manager.add_nowait("t", _conversation(("We move to Oslo in May", "Exciting!")), user_id="u")
    assert _wait_for(lambda: bool(manager.get_memory(user_id="u")["facts"]))
    assert [f["content"] for f in manager.get_memory(user_id="u")["facts"]] == [
        "User is moving to Oslo"
    ]


def test_add_nowait_runs_only_its_own_thread_now(build: Build) -> None:
    """``add_nowait`` starts this thread's update; other threads keep their debounce."""
    model = ScriptedChatModel(
        answers=[
            update_json(facts=[("User is moving to Oslo", "context", 0.9)]),
            update_json(facts=[("User keeps bees", "context", 0.9)]),
        ]
    )
    manager = build(model=model)  # an hour of debounce
    manager.add("bees", _conversation(("I keep bees in the garden", "Lovely")), user_id="u")
    manager.add_nowait("oslo", _conversation(("We move to Oslo in May", "Exciting!")), user_id="u")

    def facts() -> list[str]:
        return [f["content"] for f in manager.get_memory(user_id="u")["facts"]]

    assert _wait_for(lambda: facts() == ["User is moving to Oslo"])
    assert _wait_for(lambda: manager.service._scheduler.pending() == 1)  # "bees" still waits
    assert len(model.calls) == 1 and facts() == ["User is moving to Oslo"]
    assert manager.shutdown_flush(10.0) is True
    assert sorted(facts()) == ["User is moving to Oslo", "User keeps bees"]  # listed by id


def test_shutdown_flush_honours_a_hard_timeout(build: Build) -> None:
    release = threading.Event()

    def slow(messages: list[BaseMessage]) -> str:
        release.wait(20)
        return update_json(facts=[("User owns a kayak", "context", 0.9)])

    manager = build(model=ScriptedChatModel(answers=[slow]))
    manager.add("t", _conversation(("I paddle my kayak on weekends", "Sounds fun")))
    started = time.monotonic()
    assert manager.shutdown_flush(0.3) is False
    assert time.monotonic() - started < 3.0
    release.set()
    assert manager.shutdown_flush(10.0) is True
    assert [f["content"] for f in manager.get_memory()["facts"]] == ["User owns a kayak"]
    assert manager.warm() is True


async def test_async_methods_run_off_the_event_loop(build: Build) -> None:
    model = ScriptedChatModel(
        answers=[update_json(facts=[("User plays the cello", "context", 0.9)])]
    )
    manager = build(model=model)
    loop_thread = threading.get_ident()
    seen: list[int] = []
    original = manager.service.capture

    def recording_capture(*args: Any, **kwargs: Any) -> bool:
        seen.append(threading.get_ident())
        return bool(original(*args, **kwargs))

    manager.service.capture = recording_capture
    await manager.aadd("t", _conversation(("I practise the cello daily", "Lovely")))
    assert seen and seen[0] != loop_thread
    assert await asyncio.to_thread(manager.shutdown_flush, 10.0)
    assert "cello" in await manager.aget_context(None)
    (hit,) = await manager.asearch("cello", 1)
    assert hit["content"] == "User plays the cello"


def test_deerflows_turns_feed_the_usage_signal(build: Build) -> None:
    """get_context outside a graph run, then add() with the answer: the facts the answer
    repeated count as used, in that thread only."""
    manager = build({"top_k": 4})
    for baking, cycling in zip(BAKING, CYCLING, strict=True):
        manager.create_fact(baking, "preference", 0.9, user_id="alice")
        manager.create_fact(cycling, "preference", 0.9, user_id="alice")
    question = HumanMessage("My sourdough bread came out flat, baking tips?")
    manager.on_turn_start(1, question, thread_id="t1", user_id="alice")
    block = manager.get_context("alice", thread_id="t1")
    top = _fact_lines(block)[0].split("] ", 1)[1]
    answer = AIMessage(f"Since you told me: {top}. Try a longer proof.")
    manager.add("t2", [HumanMessage("hello"), AIMessage(f"{top}")], user_id="alice")
    manager.add("t1", [question, answer], user_id="alice")
    service = manager.service
    scope = service.scope("alice")
    used = service._injections._used.get(scope, {})
    assert len(used) == 1 and next(iter(used.values())) == 1
    fact_id = next(iter(used))
    assert any(f.id == fact_id and f.content == top for f in service.get_memory("alice").facts)


# -- per-agent settings ---------------------------------------------------------------------------


def test_an_agents_own_settings_apply_to_its_calls(build: Build) -> None:
    """``backend_config.agents.<name>`` gives an agent its own settings, as ``memory.agents`` does
    for the middleware and the node pair: ``brief`` injects one fact, ``quiet`` none, and an
    agent without settings of its own gets the backend's."""
    manager = build(
        {
            "top_k": 4,
            "agents": {"brief": {"top_k": 1}, "quiet": {"injection_enabled": False}},
        }
    )
    for agent in ("brief", "quiet", "coder", None):
        for fact in (*BAKING, *CYCLING):
            manager.create_fact(fact, "preference", 0.9, user_id="alice", agent_name=agent)
    assert len(_fact_lines(manager.get_context("alice", agent_name="coder"))) == 4
    assert len(_fact_lines(manager.get_context("alice", agent_name="brief"))) == 1
    assert manager.get_context("alice", agent_name="quiet") == ""
    assert len(_fact_lines(manager.get_context("alice"))) == 4  # DeerFlow's "global" memory
    # each agent's memory is its own, whichever engine serves it
    assert len(manager.get_memory(user_id="alice", agent_name="brief")["facts"]) == 4
    manager.delete_memory(user_id="alice", agent_name="brief")
    assert manager.get_memory(user_id="alice", agent_name="brief")["facts"] == []
    assert len(manager.get_memory(user_id="alice")["facts"]) == 4
    assert manager.shutdown_flush(5.0)


def test_an_agents_captures_follow_its_own_switch(build: Build) -> None:
    """``enabled: false`` for one agent: its turns are not extracted; another agent's are."""
    extractor = ScriptedChatModel(
        answers=[update_json(facts=[("The user writes Go", "knowledge", 0.9)])]
    )
    manager = build({"agents": {"quiet": {"enabled": False}}}, model=extractor)
    said = _conversation(("I write Go services.", "Noted."))
    manager.add_nowait("t-quiet", said, user_id="alice", agent_name="quiet")
    manager.add_nowait("t-coder", said, user_id="alice", agent_name="coder")
    assert manager.shutdown_flush(10.0)
    assert len(extractor.calls) == 1
    assert manager.get_memory(user_id="alice", agent_name="coder")["facts"]
    assert manager.get_memory(user_id="alice", agent_name="quiet")["facts"] == []


# -- query-aware recall (DeerFlow PR #4732) -------------------------------------------------------


def test_get_context_ranks_by_the_query_it_is_given(build: Build) -> None:
    """DeerFlow's per-turn recall passes the turn's message as ``query``: it ranks the facts,
    ahead of any message remembered from a turn start; no (or a blank) query keeps the path of
    today's contract."""
    manager = build({"top_k": 4})
    for baking, cycling in zip(BAKING, CYCLING, strict=True):
        manager.create_fact(baking, "preference", 0.9, user_id="alice")
        manager.create_fact(cycling, "preference", 0.9, user_id="alice")
    unranked = manager.get_context("alice", thread_id="t1")

    def first(block: str) -> str:
        return _topic(_fact_lines(block)[0])

    baking = "My sourdough bread came out flat, baking tips?"
    cycling = "Which tyres for my road bicycle?"
    assert first(manager.get_context("alice", thread_id="t1", query=baking)) == "baking"
    assert first(manager.get_context("alice", thread_id="t1", query=cycling)) == "cycling"
    assert manager.get_context("alice", query=cycling) == manager.get_context(
        "alice", thread_id="t1", query=cycling
    )
    # a query outranks the turn start remembered for the thread ...
    manager.on_turn_start(1, HumanMessage(baking), thread_id="t1", user_id="alice")
    assert first(manager.get_context("alice", thread_id="t1", query=cycling)) == "cycling"
    # ... which ranks again without one, or with a blank one
    assert first(manager.get_context("alice", thread_id="t1")) == "baking"
    assert first(manager.get_context("alice", thread_id="t1", query="  ")) == "baking"
    assert manager.get_context("alice", thread_id="t2") == unranked
    # the async path forwards it
    ranked = asyncio.run(manager.aget_context("alice", thread_id="t2", query=cycling))
    assert first(ranked) == "cycling"
    assert manager.get_context("bob", query=cycling) == ""


# -- batch fact operations (DeerFlow PR #4885) ----------------------------------------------------


def _facts_by_id(data: dict[str, Any]) -> dict[str, tuple[str, str, float]]:
    return {f["id"]: (f["content"], f["category"], f["confidence"]) for f in data["facts"]}


def _counting_writes(manager: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The compare-and-set writes the manager's engine runs from now on."""
    writes: list[Any] = []
    service = manager.service
    change = service.change

    def counted(scope: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        writes.append(scope)
        return change(scope, fn, *args, **kwargs)

    monkeypatch.setattr(service, "change", counted)
    return writes


def test_batch_update_facts_changes_them_all_in_one_write(
    contract: ModuleType, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = build()
    ids = [
        manager.create_fact(text, "context", 0.5, user_id="ann")[1]
        for text in ("User drinks green tea", "User runs at dawn", "User reads sci-fi")
    ]
    writes = _counting_writes(manager, monkeypatch)
    data = manager.batch_update_facts(
        [
            {"fact_id": ids[0], "content": "User drinks oolong tea"},
            {"fact_id": ids[1], "category": "habit", "confidence": 0.9},
        ],
        user_id="ann",
    )
    assert len(writes) == 1
    _gateway(data)
    assert _facts_by_id(data) == {
        ids[0]: ("User drinks oolong tea", "context", 0.5),
        ids[1]: ("User runs at dawn", "habit", 0.9),
        ids[2]: ("User reads sci-fi", "context", 0.5),
    }
    assert manager.get_memory(user_id="ann") == data


@pytest.mark.parametrize(
    ("updates", "status"),
    [
        # the second item names a fact that is not there: the first is not applied either
        ([{"content": "User drinks mint tea"}, {"fact_id": "fact_gone", "confidence": 0.2}], 404),
        ([{"content": "User drinks mint tea"}, {"confidence": 1.5}], 400),
        ([{"content": "User drinks mint tea"}, {"content": "   "}], 400),
        ([{"content": "User drinks mint tea"}, {"fact_id": ""}], 400),
        ([{"content": "User drinks mint tea"}, {"colour": "red"}], 400),
        ([{"content": "User runs at dawn"}], 409),  # another fact's text
        ([], 400),
        ([{"confidence": 0.7}] * 101, 400),
    ],
    ids=[
        "missing-id",
        "confidence",
        "blank",
        "empty-id",
        "unknown-key",
        "duplicate",
        "none",
        "101",
    ],
)
def test_a_batch_update_with_one_wrong_item_changes_nothing(
    contract: ModuleType, build: Build, updates: list[dict[str, Any]], status: int
) -> None:
    manager = build()
    _, tea = manager.create_fact("User drinks green tea", "context", 0.5, user_id="ann")
    manager.create_fact("User runs at dawn", "context", 0.5, user_id="ann")
    before = manager.get_memory(user_id="ann")
    batch = [{"fact_id": tea, **item} for item in updates]
    assert _status(contract, lambda: manager.batch_update_facts(batch, user_id="ann")) == status
    assert manager.get_memory(user_id="ann") == before
    if status == 404:
        with pytest.raises(KeyError, match="fact_gone"):
            manager.batch_update_facts(batch, user_id="ann")


def test_batch_delete_facts_removes_them_all_or_none(
    contract: ModuleType, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = build()
    ids = [
        manager.create_fact(text, "context", 0.5, user_id="ann")[1]
        for text in ("User drinks green tea", "User runs at dawn", "User reads sci-fi")
    ]
    before = manager.get_memory(user_id="ann")
    for wrong, status in (
        ([ids[0], "fact_gone"], 404),
        ([], 400),
        ([ids[0], " "], 400),
        ([ids[0]] * 101, 400),
    ):
        assert _status(contract, lambda w=wrong: manager.batch_delete_facts(w, user_id="ann")) == (
            status
        ), wrong
        assert manager.get_memory(user_id="ann") == before
    with pytest.raises(KeyError, match="fact_gone"):
        manager.batch_delete_facts([ids[0], "fact_gone"], user_id="ann")

    writes = _counting_writes(manager, monkeypatch)
    data = manager.batch_delete_facts([ids[0], ids[2], ids[0]], user_id="ann")
    assert len(writes) == 1
    assert [f.id for f in _gateway(data).facts] == [ids[1]]
    assert [f.id for f in manager.service.get_memory("ann").facts] == [ids[1]]


def test_batch_operations_that_lose_a_race_raise_deerflows_conflict(
    contract: ModuleType, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = build({"storage": {"backend": "memory"}})
    storage = manager.service._storage.innermost
    _, fact_id = manager.create_fact("User plays chess", "context", 0.8)

    def always_behind(scope: Any, memory: Any, expected_revision: int, **kw: Any) -> int:
        raise RevisionConflict(scope, expected_revision, expected_revision + 1)

    monkeypatch.setattr(storage, "save", always_behind)
    update = [{"fact_id": fact_id, "confidence": 0.9}]
    assert _status(contract, lambda: manager.batch_update_facts(update)) == 409
    assert _status(contract, lambda: manager.batch_delete_facts([fact_id])) == 409


# -- the order of facts in the gateway's answers ---------------------------------------------------


def test_fact_routes_list_facts_as_deermem_does(build: Build) -> None:
    """DeerMem answers every document with its facts in id order (it reads its fact files back
    sorted by id): after DeerFlow's Settings page adds "Project uses Python" beside a fact
    ``fact_legacy`` and edits it, the edited fact is listed first (DeerFlow's
    ``test_settings_fact_crud_without_agent_name_uses_default_agent``). The stored order stays
    the order the facts came in."""
    manager = build()
    legacy = {
        "id": "fact_legacy",
        "content": "Legacy global fact",
        "category": "context",
        "confidence": 0.9,
        "createdAt": "2026-03-20T00:00:00Z",
        "source": "manual",
    }
    manager.import_memory({"version": "1.0", "facts": [legacy]}, user_id="alice")
    created, fact_id = manager.create_fact("Project uses Python", "context", 0.8, user_id="alice")
    assert [f["id"] for f in created["facts"]] == [fact_id, "fact_legacy"]
    updated = manager.update_fact(fact_id, content="Project uses Python 3.12", user_id="alice")
    assert updated["facts"][0]["content"] == "Project uses Python 3.12"
    batch = manager.batch_update_facts([{"fact_id": fact_id, "confidence": 0.6}], user_id="alice")
    assert [f["id"] for f in batch["facts"]] == [fact_id, "fact_legacy"]
    assert [f["id"] for f in manager.get_memory(user_id="alice")["facts"]] == [
        fact_id,
        "fact_legacy",
    ]
    assert [f.id for f in manager.service.get_memory("alice").facts] == ["fact_legacy", fact_id]
    deleted = manager.delete_fact(fact_id, user_id="alice")
    assert [f["id"] for f in deleted["facts"]] == ["fact_legacy"]


# -- backend_config.failure_policy.read ------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (CorruptedMemoryError("users/default/__default__.json", "invalid JSON"), "corruption"),
        (ConnectionError("the store is away"), "manager"),
        (RuntimeError("the store broke"), "manager"),
    ],
    ids=["corrupted", "outage", "other"],
)
def test_a_failed_read_follows_the_read_failure_policy(
    contract: ModuleType,
    build: Build,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    error: str,
) -> None:
    """DeerFlow's host re-raises a ``MemoryManagerError`` from ``get_context`` under
    ``failure_policy.read: fail_closed`` and injects nothing for anything else: so a failed
    read raises DeerFlow's error there, and is logged and answered with "" under
    ``fail_open`` (the default)."""
    expected = {
        "corruption": contract.MemoryCorruptionError,
        "manager": contract.MemoryManagerError,
    }[error]
    for read in (None, "fail_open", "fail_closed"):  # one engine: each problem logged once
        config: dict[str, Any] = {"storage": {"backend": "memory"}}
        if read is not None:
            config["failure_policy"] = {"read": read, "write": "log_and_drop"}
        manager = build(config)
        user = f"user-{read}"
        manager.create_fact("User plays chess", "context", 0.8, user_id=user)
        storage = manager.service._storage.innermost

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise failure

        monkeypatch.setattr(storage, "load", broken)
        monkeypatch.setattr(storage, "revision", broken)
        caplog.clear()
        if read == "fail_closed":
            with pytest.raises(expected) as raised:
                manager.get_context(user)
            assert isinstance(raised.value, contract.MemoryManagerError)
            with pytest.raises(expected):
                asyncio.run(manager.aget_context(user, query="chess?"))
        else:
            assert manager.get_context(user) == ""
            assert asyncio.run(manager.aget_context(user, query="chess?")) == ""
            assert read or any(r.levelno >= logging.WARNING for r in caplog.records)
        monkeypatch.undo()


def test_failure_policy_is_read_and_a_wrong_one_names_its_key(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    from deermem_middleware.config import ConfigError

    with caplog.at_level(logging.WARNING):
        build({"failure_policy": {"read": "fail_closed", "write": "log_and_drop"}})
    assert not [r for r in caplog.records if "failure_policy" in r.getMessage()]
    with pytest.raises(ConfigError, match=r"memory\.backend_config\.failure_policy\.read"):
        build({"failure_policy": {"read": "fail_shut"}})
