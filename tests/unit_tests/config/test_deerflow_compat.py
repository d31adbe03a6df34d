"""DeerFlow's real ``config.yaml`` loads, without loosening the checks on our own keys.

Parametrised over DeerFlow's pinned ``config.example.yaml`` (HEAD and v2.0.0) when this checkout
has them, and always over our own fixtures written in the same shapes
(``tests/fixtures/deerflow_config/``).
"""

from __future__ import annotations

import logging
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import SecretStr

from deermem_middleware import MemoryMiddleware
from deermem_middleware.config import (
    ConfigError,
    MemoryConfig,
    ModelConfig,
    default_config_path,
    load_memory_config,
)
from deermem_middleware.config.deerflow_compat import (
    DEERFLOW_BACKEND_KEYS,
    DEERFLOW_HOST_KEYS,
    is_deerflow_config,
    model_from_entry,
    thinking_off_settings,
)
from deermem_middleware.config.model_class import build_class_model, import_class_path
from deermem_middleware.extraction.models import build_chat_model
from deermem_middleware.formats import deerflow_paths as paths
from tests.deerflow_files import REPO, pinned
from tests.helpers import error_of, line_of, write

FIXTURES = REPO / "tests" / "fixtures" / "deerflow_config"
OUR_SHAPES = sorted(FIXTURES.glob("*.yaml"))
DEERFLOW_FILES = [
    *pinned("head", "config.example.yaml"),
    *pinned("v2.0.0", "config.example.yaml"),
    *OUR_SHAPES,
]
LOADING_LOGGER = "deermem_middleware.config.loading"
OURS = "deermem_middleware"
"""Our subfolder of DeerFlow's memory root (its own files live under ``users/`` there)."""


def _file_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


deerflow_files = pytest.mark.parametrize("source", DEERFLOW_FILES, ids=_file_id)


@pytest.fixture(autouse=True)
def deerflow_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test: DeerFlow's data folder in the temp folder, no config variable set."""
    home = tmp_path / "deerflow-home"
    monkeypatch.setenv("DEER_FLOW_HOME", str(home))
    for name in ("DEERMEM_CONFIG", "DEER_FLOW_CONFIG_PATH", "DEER_FLOW_PROJECT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    return home


def ignored_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOADING_LOGGER
        and record.levelno == logging.INFO
        and "ignoring DeerFlow" in record.getMessage()
    ]


def deerflow_keys_in(path: Path) -> list[str]:
    """The DeerFlow-only memory keys of ``path``, read with plain PyYAML (dotted)."""
    memory = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("memory") or {}
    found = [f"memory.{k}" for k in memory if k in DEERFLOW_HOST_KEYS | DEERFLOW_BACKEND_KEYS]
    nested = memory.get("backend_config") or {}
    found += [f"memory.backend_config.{k}" for k in nested if k in DEERFLOW_BACKEND_KEYS]
    return found


# -- DeerFlow's files load unchanged -------------------------------------------------------------


def test_the_parametrisation_has_our_shapes_and_both_pinned_examples_when_present() -> None:
    assert len(OUR_SHAPES) >= 3
    names = {_file_id(path) for path in DEERFLOW_FILES}
    assert {"deerflow_config/head_shape.yaml", "deerflow_config/v2_shape.yaml"} <= names
    if pinned("head"):
        assert {"head/config.example.yaml", "v2.0.0/config.example.yaml"} <= names


@deerflow_files
def test_deerflow_config_loads_unchanged(source: Path, deerflow_env: Path) -> None:
    config = load_memory_config(source)
    assert is_deerflow_config(yaml.safe_load(source.read_text(encoding="utf-8")))
    assert config.enabled is True
    # HEAD's `storage_path: ""`, v2.0's `storage_path: memory.json`: DeerFlow's data folder
    assert Path(config.storage_path) == deerflow_env.resolve() / OURS
    # the knobs both share are read, DeerFlow's values included
    memory = yaml.safe_load(source.read_text(encoding="utf-8"))["memory"]
    shared = {**memory, **(memory.get("backend_config") or {})}
    assert config.max_facts == shared["max_facts"]
    assert config.debounce_seconds == shared["debounce_seconds"]


@deerflow_files
def test_no_argument_middleware_loads_deerflow_config_in_the_working_directory(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deerflow_env: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copyfile(source, project / "config.yaml")
    monkeypatch.chdir(project)
    middleware = MemoryMiddleware()
    try:
        assert middleware.config.max_facts == load_memory_config(source).max_facts
        assert Path(middleware.config.storage_path) == deerflow_env.resolve() / OURS
    finally:
        middleware.close()


@deerflow_files
@pytest.mark.parametrize("where", ["memory", "backend_config"])
def test_a_typo_in_one_of_our_keys_is_still_an_error(
    source: Path, tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under ``backend_config``; at DeerFlow's own level it is ignored as a host setting, with
    a WARNING that names the key we meant."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    anchor = "memory:\n" if where == "memory" else "  backend_config:\n"
    if anchor not in lines:  # a flat file: add the nested form
        at = lines.index("memory:\n") + 1
        lines[at:at] = ["  backend_config:\n"]
    at = lines.index(anchor) + 1
    indent = "  " if where == "memory" else "    "
    lines[at:at] = [f"{indent}max_factz: 10\n"]
    broken = tmp_path / "config.yaml"
    broken.write_text("".join(lines), encoding="utf-8")
    if where == "memory":  # DeerFlow's level: a host setting to us, never an error
        caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
        load_memory_config(broken)
        [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert f"{broken}:{line_of(broken, 'max_factz')}: memory.max_factz" in warning
        assert "did you mean max_facts?" in warning
        [info] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert "memory.max_factz (not a setting of ours" in info
        return
    message = error_of(broken)
    key = "memory.backend_config.max_factz"
    assert f"{broken}:{line_of(broken, 'max_factz')}: {key}: unknown key" in message
    assert message.count("unknown key") == 1  # DeerFlow's own keys are not reported


@deerflow_files
def test_one_info_log_lists_the_ignored_deerflow_keys(
    source: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    load_memory_config(source)
    logs = ignored_logs(caplog)
    expected = deerflow_keys_in(source)
    if not expected:  # v2.0's flat block: every key is one of ours
        assert logs == []
        return
    assert len(logs) == 1
    listed = logs[0].split(": ", 2)[-1].split(", ")
    assert sorted(listed) == sorted(expected)
    assert not any("debounce_seconds" in key or "max_facts" in key for key in listed)


def test_the_ignored_keys_of_a_head_shaped_file(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    load_memory_config(FIXTURES / "head_shape.yaml")
    (message,) = ignored_logs(caplog)
    for key in (
        "memory.manager_class",
        "memory.mode",
        "memory.shutdown_flush_timeout_seconds",
        "memory.backend_config.storage_class",
        "memory.backend_config.eviction_access_weight",
        "memory.backend_config.staleness_age_days",
        "memory.backend_config.consolidation_max_sources",
        "memory.backend_config.prompts_dir",
    ):
        assert key in message
    assert str((FIXTURES / "head_shape.yaml").resolve()) in message


def test_deerflow_keys_are_accepted_in_a_file_that_is_not_deerflows_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          staleness_age_days: 30
          backend_config:
            eviction_audit_max_entries: 0
        """,
    )
    load_memory_config(path)
    (message,) = ignored_logs(caplog)
    assert "memory.staleness_age_days" in message
    assert "memory.backend_config.eviction_audit_max_entries" in message


def test_no_ignored_keys_no_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    load_memory_config(write(tmp_path / "config.yaml", "memory:\n  max_facts: 9\n"))
    assert ignored_logs(caplog) == []


def test_host_keys_belong_to_the_memory_block_not_backend_config(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  backend_config:\n    manager_class: x\n")
    assert f"{path}:3: memory.backend_config.manager_class: unknown key" in error_of(path)


def test_another_backends_config_is_not_ours(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: false
          manager_class: honcho
          backend_config:
            base_url: http://localhost:8000
            workspace_prefix: team-
        """,
    )
    config = load_memory_config(path)
    assert config.enabled is False
    (message,) = ignored_logs(caplog)
    assert "memory.backend_config (the config of manager_class 'honcho')" in message


@pytest.mark.parametrize("manager", ["deermem", "deermem_middleware.deerflow:DeermemMemoryManager"])
def test_our_managers_backend_config_is_read(tmp_path: Path, manager: str) -> None:
    path = write(
        tmp_path / "config.yaml",
        f"""
        memory:
          manager_class: "{manager}"
          backend_config:
            max_facts: 33
        """,
    )
    assert load_memory_config(path).max_facts == 33


# -- null scalars ------------------------------------------------------------------------------


def test_null_scalars_mean_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          debounce_seconds:
          max_facts: null
          model_name: null
          token_counting: ~
          max_wait_seconds: null       # null means something here: no bound
          model:
            provider:
            model: local-model
            temperature:
            max_retries: null
            max_tokens: null           # null means something here: not sent
        """,
    )
    config = load_memory_config(path)
    defaults = MemoryConfig()
    assert config.debounce_seconds == defaults.debounce_seconds
    assert config.max_facts == defaults.max_facts
    assert config.token_counting == defaults.token_counting
    assert config.model_name is None
    assert config.max_wait_seconds is None
    assert config.model is not None
    assert config.model.provider == "openai"
    assert config.model.temperature == 0.0
    assert config.model.max_retries == ModelConfig().max_retries
    assert config.model.max_tokens is None


def test_a_null_in_an_agent_block_inherits_the_shared_value(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        "memory:\n  top_k: 7\n  agents:\n    coder:\n      top_k:\n",
    )
    assert load_memory_config(path, agent_name="coder").top_k == 7


def test_a_null_for_an_unknown_key_is_still_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  max_factz:\n")
    assert f"{path}:2: memory.max_factz: unknown key" in error_of(path)


# -- storage_path --------------------------------------------------------------------------------

DEERFLOW_HEADER = "config_version: 1\nsandbox: {use: example:Sandbox}\n"


@pytest.mark.parametrize("value", ['""', '"  "', None])
def test_blank_or_absent_storage_path_is_deerflows_data_folder(
    tmp_path: Path, deerflow_env: Path, value: str | None
) -> None:
    line = f"  storage_path: {value}\n" if value is not None else ""
    path = write(tmp_path / "config.yaml", f"{DEERFLOW_HEADER}memory:\n  enabled: true\n{line}")
    assert Path(load_memory_config(path).storage_path) == deerflow_env.resolve() / OURS


def test_without_deer_flow_home_the_data_folder_is_under_the_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEER_FLOW_HOME")
    path = write(tmp_path / "conf" / "config.yaml", f"{DEERFLOW_HEADER}memory: {{}}\n")
    monkeypatch.chdir(tmp_path)
    assert Path(load_memory_config(path).storage_path) == tmp_path.resolve() / ".deer-flow" / OURS
    root = tmp_path / "root"
    monkeypatch.setenv("DEER_FLOW_PROJECT_ROOT", str(root))
    assert Path(load_memory_config(path).storage_path) == root.resolve() / ".deer-flow" / OURS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("memory.json", ""),
        ("data/memory.json", "data"),
        ("data/memory", "data/memory"),
        ("./mem", "mem"),
    ],
)
def test_relative_storage_path_resolves_under_deerflows_data_folder(
    tmp_path: Path, deerflow_env: Path, value: str, expected: str
) -> None:
    path = write(tmp_path / "config.yaml", f"{DEERFLOW_HEADER}memory:\n  storage_path: {value}\n")
    expected_root = deerflow_env.resolve() / expected
    assert Path(load_memory_config(path).storage_path) == expected_root / OURS


def test_an_absolute_json_storage_path_means_its_folder(tmp_path: Path) -> None:
    target = tmp_path / "shared" / "memory.json"
    path = write(
        tmp_path / "config.yaml",
        f"{DEERFLOW_HEADER}memory:\n  backend_config:\n    storage_path: {target}\n",
    )
    assert load_memory_config(path).storage_path == str(tmp_path / "shared" / OURS)


def test_outside_deerflow_files_a_json_storage_path_is_its_folder_beside_the_yaml(
    tmp_path: Path, deerflow_env: Path
) -> None:
    path = write(tmp_path / "app" / "config.yaml", "memory:\n  storage_path: memory.json\n")
    assert Path(load_memory_config(path).storage_path) == (tmp_path / "app").resolve()
    relative = write(tmp_path / "app" / "other.yaml", "memory:\n  storage_path: data\n")
    assert Path(load_memory_config(relative).storage_path) == (tmp_path / "app" / "data").resolve()
    blank = write(tmp_path / "app" / "blank.yaml", "memory:\n  storage_path: ''\n")
    assert load_memory_config(blank).storage_path == "~/.deermem"  # not DeerFlow's folder


def test_storage_root_rules() -> None:
    env = {"DEER_FLOW_HOME": "/srv/df"}
    assert paths.storage_root("", env=env) == Path("/srv/df").resolve()
    assert paths.storage_root(None, env=env) == Path("/srv/df").resolve()
    assert paths.storage_root("memory.json", env=env) == Path("/srv/df").resolve()
    assert paths.storage_root("x/y", env=env) == Path("/srv/df").resolve() / "x" / "y"
    assert paths.storage_root("/abs/memory.json", env=env) == Path("/abs")
    assert paths.storage_root("~/mem", env=env) == Path("~/mem").expanduser()
    assert paths.storage_root("", env={}, cwd="/proj") == Path("/proj").resolve() / ".deer-flow"


# -- which config.yaml ---------------------------------------------------------------------------


def test_deer_flow_config_path_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deerflow_config = write(
        tmp_path / "df" / "app.yaml",
        f"memory:\n  max_facts: 11\n  storage_path: {tmp_path / 'memory'}\n",
    )
    ours = write(tmp_path / "ours.yaml", "memory:\n  max_facts: 22\n")
    write(tmp_path / "cwd" / "config.yaml", "memory:\n  max_facts: 33\n")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(deerflow_config))
    assert default_config_path() == deerflow_config
    middleware = MemoryMiddleware()
    try:
        assert middleware.config.max_facts == 11
    finally:
        middleware.close()
    monkeypatch.setenv("DEERMEM_CONFIG", str(ours))  # ours first
    assert default_config_path() == ours


def test_deer_flow_config_path_naming_no_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "config.yaml", "memory: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="DEER_FLOW_CONFIG_PATH"):
        default_config_path()


def test_deer_flow_project_root_replaces_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "cwd" / "config.yaml", "memory: {}\n")
    root = tmp_path / "root"
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("DEER_FLOW_PROJECT_ROOT", str(root))
    assert default_config_path() is None  # as in DeerFlow: the root, not the cwd
    write(root / "config.yaml", "memory: {}\n")
    assert default_config_path() == root.resolve() / "config.yaml"


def test_find_config_path_in_deerflows_source_tree(tmp_path: Path) -> None:
    package = tmp_path / "repo" / "backend" / "packages" / "harness" / "deerflow"
    package.mkdir(parents=True)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert paths.find_config_path(env={}, cwd=cwd, package_dir=package) is None
    root_config = write(tmp_path / "repo" / "config.yaml", "memory: {}\n")
    assert paths.find_config_path(env={}, cwd=cwd, package_dir=package) == root_config.resolve()
    backend_config = write(tmp_path / "repo" / "backend" / "config.yaml", "memory: {}\n")
    found = paths.find_config_path(env={}, cwd=cwd, package_dir=package)
    assert found == backend_config.resolve()
    local = write(cwd / "config.yaml", "memory: {}\n")
    assert paths.find_config_path(env={}, cwd=cwd, package_dir=package) == local.resolve()
    relative = {"DEER_FLOW_CONFIG_PATH": "config.yaml"}
    assert paths.find_config_path(env=relative, cwd=cwd) == cwd / "config.yaml"


# -- models: `use` class paths and api_base -----------------------------------------------------


class RecordingChatModel(BaseChatModel):
    """A chat model class for ``use:`` (answers "ok"), keeping what it was built with."""

    model: str = ""
    base_url: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    request_timeout: float | None = None
    num_predict: int | None = None

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="ok"))])


RECORDING = f"{__name__}:RecordingChatModel"


def models_file(tmp_path: Path, entry: str, memory: str = "model_name: chosen") -> Path:
    """A config whose ``models:`` list is another entry, then ``entry`` (so ``models.1``)."""
    first, *rest = textwrap.dedent(entry).strip("\n").splitlines()
    lines = ["models:", "  - name: other", "    model: other", f"  - {first}"]
    lines += [f"    {line}" for line in rest]
    lines += ["memory:", f"  {memory}", ""]
    return write(tmp_path / "config.yaml", "\n".join(lines))


def test_use_class_path_builds_that_model(tmp_path: Path) -> None:
    path = models_file(
        tmp_path,
        f"""
        name: chosen
        display_name: Chosen
        use: {RECORDING}
        model: big-model
        api_base: http://gateway.invalid/v1
        api_key: sk-abc
        temperature: 0.3
        request_timeout: 600.0
        num_predict: 256
        supports_vision: true
        context_window: 8192
        """,
    )
    config = load_memory_config(path)
    assert config.model is not None
    assert config.model.use == RECORDING
    assert config.model.base_url == "http://gateway.invalid/v1"
    assert config.model.options == {"request_timeout": 600.0, "num_predict": 256}
    model = build_class_model(config.model)
    assert isinstance(model, RecordingChatModel)
    assert model.model == "big-model"
    assert model.base_url == "http://gateway.invalid/v1"
    assert model.api_key == "sk-abc"
    assert model.temperature == pytest.approx(0.3)
    assert model.request_timeout == 600.0
    assert model.num_predict == 256
    assert model.invoke("hi").content == "ok"


def test_use_class_path_passes_options_to_a_real_langchain_class(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          model:
            use: langchain_core.language_models.fake_chat_models:FakeListChatModel
            options:
              responses: ["from the class"]
        """,
    )
    config = load_memory_config(path)
    assert config.model is not None
    model = build_class_model(config.model)
    assert isinstance(model, FakeListChatModel)
    assert model.invoke("hi").content == "from the class"


def test_our_defaults_are_not_forced_on_a_use_class() -> None:
    config = ModelConfig(use=RECORDING, model="m")
    model = build_class_model(config)
    assert isinstance(model, RecordingChatModel)
    assert model.temperature is None  # ours is 0.0, but it was not set


def test_secret_looking_options_are_kept_secret() -> None:
    config = ModelConfig(use=RECORDING, options={"gemini_api_key": "sk-x", "num_predict": 3})
    assert isinstance(config.options["gemini_api_key"], SecretStr)
    assert "sk-x" not in repr(config)
    assert config.options["num_predict"] == 3


def test_an_unimportable_use_loads_and_fails_at_build_naming_file_line_and_key(
    tmp_path: Path,
) -> None:
    path = models_file(
        tmp_path,
        """
        name: chosen
        use: deerflow_not_installed.models:PatchedChat
        model: m
        """,
    )
    config = load_memory_config(path)  # lazily: loading does not import it
    assert config.model is not None
    for copy in (config.model, config.for_agent("coder").model):
        assert copy is not None
        with pytest.raises(ConfigError) as info:
            build_class_model(copy)
        message = str(info.value)
        assert f"{path}:{line_of(path, 'deerflow_not_installed')}: models.1.use" in message
        assert "deerflow_not_installed.models:PatchedChat" in message


def test_an_inline_unimportable_use_names_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        "memory:\n  backend_config:\n    model:\n      use: nowhere_pkg:Chat\n",
    )
    config = load_memory_config(path)
    assert config.model is not None
    with pytest.raises(ConfigError, match=re.escape(f"{path}:4: memory.backend_config.model.use")):
        build_class_model(config.model)


def test_a_missing_class_in_a_real_module_is_a_clear_error() -> None:
    config = ModelConfig(use="langchain_core.language_models:NoSuchChatModel")
    with pytest.raises(ConfigError, match="NoSuchChatModel"):
        build_class_model(config)
    with pytest.raises(ImportError, match=r"package\.module:ClassName"):
        import_class_path("no-colon")


def test_a_malformed_use_is_a_load_error_naming_file_line_and_key(tmp_path: Path) -> None:
    path = models_file(tmp_path, "name: chosen\nuse: not a class path\nmodel: m\n")
    message = error_of(path)
    assert f"{path}:{line_of(path, 'not a class path')}: models.1.use" in message


def test_chat_openai_profiles_keep_the_openai_provider_with_api_base(tmp_path: Path) -> None:
    path = models_file(
        tmp_path,
        """
        name: chosen
        use: langchain_openai:ChatOpenAI
        model: served-model
        api_base: http://127.0.0.1:9/v1
        api_key: local
        request_timeout: 90.0
        use_responses_api: true
        """,
    )
    config = load_memory_config(path)
    assert config.model is not None
    assert config.model.use is None and config.model.provider == "openai"
    assert config.model.base_url == "http://127.0.0.1:9/v1"
    assert config.model.timeout == 90.0
    chat = build_chat_model(config.model)
    assert getattr(chat, "openai_api_base", None) == "http://127.0.0.1:9/v1"


def test_unused_settings_of_an_openai_profile_are_in_the_one_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    path = models_file(
        tmp_path,
        "name: chosen\nuse: langchain_openai:ChatOpenAI\nmodel: m\nuse_responses_api: true\n",
        memory="model_name: chosen\n  manager_class: deermem",
    )
    load_memory_config(path)
    (message,) = ignored_logs(caplog)
    assert "memory.manager_class" in message
    assert "models.1.use_responses_api" in message


def test_api_base_is_base_url_inline(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        "memory:\n  model:\n    model: m\n    api_base: http://127.0.0.1:9/v1\n",
    )
    config = load_memory_config(path)
    assert config.model is not None and config.model.base_url == "http://127.0.0.1:9/v1"
    assert ModelConfig(api_base="http://a/v1", base_url="http://a/v1").base_url == "http://a/v1"
    both = write(
        tmp_path / "both.yaml",
        "memory:\n  model:\n    api_base: http://a/v1\n    base_url: http://b/v1\n",
    )
    assert f"{both}:2: memory.model" in error_of(both)


def test_thinking_is_switched_off_as_deerflow_does() -> None:
    assert thinking_off_settings({"when_thinking_disabled": {"x": 1}}) == {"x": 1}
    gateway = {"when_thinking_enabled": {"extra_body": {"thinking": {"type": "enabled"}}}}
    assert thinking_off_settings(gateway) == {
        "extra_body": {"thinking": {"type": "disabled"}},
        "reasoning_effort": "minimal",
    }
    vllm = {
        "when_thinking_enabled": {"extra_body": {"chat_template_kwargs": {"enable_thinking": 1}}}
    }
    assert thinking_off_settings(vllm) == {
        "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}
    }
    anthropic = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert thinking_off_settings(anthropic) == {"thinking": {"type": "disabled"}}
    assert thinking_off_settings({"model": "plain"}) == {}


def test_a_model_entry_gets_its_thinking_off_settings() -> None:
    entry = {
        "name": "doubao",
        "use": "some.provider:Chat",
        "model": "seed",
        "extra_body": {"top_k": 5},
        "supports_thinking": True,
        "when_thinking_enabled": {"extra_body": {"thinking": {"type": "enabled"}}},
    }
    translated = model_from_entry(entry)
    assert translated.model["extra_body"] == {"top_k": 5, "thinking": {"type": "disabled"}}
    assert "reasoning_effort" not in translated.model.get("options", {})  # not supported
    with_effort = model_from_entry({**entry, "supports_reasoning_effort": True})
    assert with_effort.model["options"] == {"reasoning_effort": "minimal"}


# -- per-agent config.yaml in DeerFlow's data folder ---------------------------------------------


def test_per_agent_config_in_the_per_user_layout(tmp_path: Path, deerflow_env: Path) -> None:
    main = write(tmp_path / "config.yaml", f"{DEERFLOW_HEADER}memory:\n  top_k: 5\n")
    write(
        deerflow_env / "users" / "alice" / "agents" / "researcher" / "config.yaml",
        "name: researcher\nmemory:\n  enabled: false\n  top_k: 9\n",
    )
    config = load_memory_config(main, agent_name="researcher", user_id="alice")
    assert config.enabled is False and config.top_k == 9
    assert load_memory_config(main, agent_name="researcher", user_id="bob").enabled is True
    assert load_memory_config(main, agent_name="researcher").enabled is True  # user "default"


def test_per_agent_config_in_the_legacy_layout(tmp_path: Path, deerflow_env: Path) -> None:
    main = write(tmp_path / "config.yaml", "memory:\n  top_k: 5\n")
    write(deerflow_env / "agents" / "writer" / "config.yaml", "memory:\n  top_k: 3\n")
    assert load_memory_config(main, agent_name="writer").top_k == 3
    assert load_memory_config(main, agent_name="writer", user_id="carol").top_k == 3
    assert load_memory_config(main, agent_name="Writer").top_k == 3  # folders are lower-case
    # the per-user folder, when it has a config.yaml, is the one DeerFlow reads
    write(deerflow_env / "users" / "carol" / "agents" / "writer" / "config.yaml", "name: w\n")
    assert load_memory_config(main, agent_name="writer", user_id="carol").top_k == 5


def test_default_user_layout_and_order_of_the_agent_files(
    tmp_path: Path, deerflow_env: Path
) -> None:
    main = write(tmp_path / "config.yaml", "memory:\n  top_k: 5\n  max_facts: 50\n")
    write(tmp_path / "agents" / "coder" / "config.yaml", "memory:\n  top_k: 6\n  max_facts: 60\n")
    write(
        deerflow_env / "users" / "default" / "agents" / "coder" / "config.yaml",
        "memory:\n  top_k: 7\n",
    )
    config = load_memory_config(main, agent_name="coder")
    assert config.top_k == 7  # DeerFlow's own file for the agent wins
    assert config.max_facts == 60  # then the file beside config.yaml


def test_an_error_in_deerflows_agent_file_names_that_file(
    tmp_path: Path, deerflow_env: Path
) -> None:
    main = write(tmp_path / "config.yaml", "memory: {}\n")
    agent_file = write(
        deerflow_env / "agents" / "coder" / "config.yaml", "name: coder\nmemory:\n  top_kk: 1\n"
    )
    assert f"{agent_file.resolve()}:3: memory.top_kk: unknown key" in error_of(
        main, agent_name="coder"
    )


def test_names_deerflow_would_refuse_are_not_looked_up(tmp_path: Path, deerflow_env: Path) -> None:
    main = write(tmp_path / "config.yaml", "memory: {}\n")
    write(deerflow_env / "agents" / "my_agent" / "config.yaml", "memory:\n  top_k: 2\n")
    assert load_memory_config(main, agent_name="my_agent").top_k == MemoryConfig().top_k
    assert paths.agent_config_file("my_agent", env={"DEER_FLOW_HOME": str(deerflow_env)}) is None


@pytest.mark.parametrize("user_id", ["../x", "a/b", "", "sp ace", "x\n"])
def test_unsafe_user_ids_are_refused(tmp_path: Path, user_id: str) -> None:
    main = write(tmp_path / "config.yaml", "memory: {}\n")
    assert "user id must match" in error_of(main, agent_name="coder", user_id=user_id)


def test_agent_paths_are_deerflows() -> None:
    home = Path("/h")
    assert paths.user_agent_dir(home, "u-1", "Coder") == Path("/h/users/u-1/agents/coder")
    assert paths.legacy_agent_dir(home, "Coder") == Path("/h/agents/coder")
    assert paths.is_agent_name("Agent-2") and not paths.is_agent_name("a_b")
    assert not paths.is_agent_name("coder\n")
    with pytest.raises(ValueError, match="user id"):
        paths.user_agent_dir(home, "..", "coder")


def test_from_yaml_takes_the_user_id(tmp_path: Path, deerflow_env: Path) -> None:
    main = write(tmp_path / "config.yaml", "memory: {}\n")
    write(
        deerflow_env / "users" / "dana" / "agents" / "coder" / "config.yaml",
        "memory:\n  top_k: 4\n",
    )
    assert MemoryConfig.from_yaml(main, agent_name="coder", user_id="dana").top_k == 4


def test_a_model_block_with_every_field_left_out_is_no_model(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        models:
          - name: chosen
            model: served
        memory:
          backend_config:
            model:
              provider:
              model:
              base_url: ""
        """,
    )
    assert load_memory_config(path).model is None  # the middleware's or the agent's model
    path.write_text(path.read_text(encoding="utf-8") + "  model_name: chosen\n", encoding="utf-8")
    config = load_memory_config(path)
    assert config.model is not None and config.model.model == "served"


def test_ignored_keys_of_an_agent_file_name_that_file(
    tmp_path: Path, deerflow_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    main = write(tmp_path / "config.yaml", "memory:\n  mode: middleware\n")
    agent_file = write(deerflow_env / "agents" / "coder" / "config.yaml", "memory:\n  mode: tool\n")
    load_memory_config(main, agent_name="coder")
    (message,) = ignored_logs(caplog)
    assert f"memory.mode, memory.mode (in {agent_file.resolve()})" in message


def test_the_engine_builds_a_use_class_path_model(tmp_path: Path) -> None:
    """The extraction model the engine builds is the ``use:`` class, not ChatOpenAI."""
    from deermem_middleware.extraction.models import build_chat_model

    path = models_file(
        tmp_path,
        f"""
        name: chosen
        use: {RECORDING}
        model: big-model
        """,
    )
    config = load_memory_config(path)
    assert config.model is not None
    model = build_chat_model(config.model)
    assert isinstance(model, RecordingChatModel)
    assert model.model == "big-model"


def test_with_noop_our_settings_are_the_flat_keys(tmp_path: Path) -> None:
    """The two-line middleware setup: DeerFlow's memory is ``noop``; ours reads the flat keys,
    and ``noop``'s ``backend_config`` is not ours."""
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          manager_class: noop
          debounce_seconds: 7
          max_injection_tokens: 1500
          backend_config:
            max_facts: 33
        """,
    )
    config = load_memory_config(path)
    assert (config.debounce_seconds, config.max_injection_tokens) == (7, 1500)
    assert config.max_facts == MemoryConfig().max_facts


@pytest.mark.parametrize("source", pinned("head", "config.example.yaml"), ids=_file_id)
def test_deerflows_host_keys_of_4732_and_any_future_one_load_in_the_two_line_setup(
    source: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """DeerFlow #4732 adds ``memory.session_injection_enabled`` / ``turn_injection_enabled``;
    DeerFlow will add more. At DeerFlow's level they are host settings: the config loads, and
    one INFO line names them; no warning, no error."""
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["memory"].update(
        {
            "manager_class": "deermem_middleware.deerflow:DeermemMemoryManager",
            "session_injection_enabled": True,
            "turn_injection_enabled": False,
            "recall_cache_size_of_the_future": 64,
        }
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    config = load_memory_config(path)
    assert config.injection_enabled is True
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    [info] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    for key in ("session_injection_enabled", "turn_injection_enabled"):
        assert f"memory.{key}," in info or info.endswith(f"memory.{key}")
    assert "memory.recall_cache_size_of_the_future (not a setting of ours" in info


@pytest.mark.parametrize("source", pinned("head", "config.example.yaml"), ids=_file_id)
def test_deerflows_failure_policy_loads_in_the_two_line_setup(
    source: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``backend_config.failure_policy`` is the host's read policy (DeerFlow's prompt loader
    reads it; our DeerFlow backend honours it): the file loader takes it as DeerFlow's key."""
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    backend = data["memory"].setdefault("backend_config", {}) or {}
    backend["failure_policy"] = {"read": "fail_closed", "write": "fail_open"}
    data["memory"]["backend_config"] = backend
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    caplog.set_level(logging.INFO, logger=LOADING_LOGGER)
    load_memory_config(path)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("memory.backend_config.failure_policy" in m for m in ignored_logs(caplog))


def test_memory_enabled_false_in_an_agents_own_file_switches_its_memory_off(
    tmp_path: Path, deerflow_env: Path
) -> None:
    """DeerFlow #5167's spelling of #4184's ``memory: {enabled: false}``; a file switches memory
    off, never on; anything but a boolean is an error naming the file, line and key."""
    main = write(tmp_path / "config.yaml", f"{DEERFLOW_HEADER}memory:\n  top_k: 5\n")
    folder = deerflow_env / "users" / "alice" / "agents"
    write(folder / "quiet" / "config.yaml", "name: quiet\nmemory_enabled: false\n")
    write(folder / "loud" / "config.yaml", "name: loud\nmemory_enabled: true\n")
    write(folder / "odd" / "config.yaml", "name: odd\nmemory_enabled: 'no'\n")
    assert load_memory_config(main, agent_name="quiet", user_id="alice").enabled is False
    assert load_memory_config(main, agent_name="loud", user_id="alice").enabled is True
    assert load_memory_config(main, agent_name="quiet", user_id="bob").enabled is True
    with pytest.raises(ConfigError, match=r"odd/config.yaml:2.*memory_enabled must be true or"):
        load_memory_config(main, agent_name="odd", user_id="alice")
