"""MemoryConfig defaults and DeerFlow-style YAML loading (``deermem_middleware.config``).

DeerFlow's own files (its keys, paths and model profiles): ``test_config_deerflow.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from deermem_middleware.config import (
    CONFIG_ENV_VAR,
    DEFAULT_MAX_FACTS,
    ConfigError,
    EmbeddingsConfig,
    MemoryConfig,
    default_config_path,
    load_memory_config,
)
from tests.helpers import error_of, line_of, write

# -- defaults ----------------------------------------------------------------------------------


def test_defaults_match_deerflow() -> None:
    config = MemoryConfig()
    assert config.enabled is True
    assert config.injection_enabled is True
    assert config.debounce_seconds == 30
    # not DeerFlow's 100: trimming to 100 deleted what later questions needed (long-horizon
    # replay); an explicit max_facts, DeerFlow's included, is honoured
    assert config.max_facts == DEFAULT_MAX_FACTS == 5000
    assert config.archive_floor is None  # nothing is archived for its age by default
    assert config.fact_confidence_threshold == pytest.approx(0.7)
    assert config.max_injection_tokens == 2000
    assert config.model_name is None
    assert config.token_counting == "char"  # never tiktoken by default (no network)


def test_empty_memory_block_gives_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "models: []\n")
    config = load_memory_config(path)
    assert config.max_facts == DEFAULT_MAX_FACTS
    assert config.enabled is True
    assert load_memory_config(write(tmp_path / "empty.yaml", "")).debounce_seconds == 30


# -- the two DeerFlow forms --------------------------------------------------------------------


def test_flat_memory_form(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: true
          injection_enabled: false
          storage_path: /var/lib/deermem
          debounce_seconds: 10
          max_facts: 50
          fact_confidence_threshold: 0.8
          max_injection_tokens: 1000
        """,
    )
    config = load_memory_config(path)
    assert config.injection_enabled is False
    assert config.storage_path == "/var/lib/deermem"
    assert config.debounce_seconds == 10
    assert config.max_facts == 50
    assert config.fact_confidence_threshold == pytest.approx(0.8)
    assert config.max_injection_tokens == 1000


def test_backend_config_form(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: true
          backend: file
          backend_config:
            storage_path: /data/memory
            debounce_seconds: 5
            max_facts: 20
            queue_max_depth: 50
            token_counting: char
            guaranteed_categories: [correction, goal]
            guaranteed_token_budget: 300
            model:
              provider: openai
              model: qwen2.5-7b-instruct
              base_url: http://localhost:8000/v1
              temperature: 0.1
        """,
    )
    config = load_memory_config(path)
    assert config.storage_path == "/data/memory"
    assert config.debounce_seconds == 5
    assert config.max_facts == 20
    assert config.queue_max_depth == 50
    assert config.guaranteed_categories == ["correction", "goal"]
    assert config.guaranteed_token_budget == 300
    assert config.model is not None
    assert config.model.model == "qwen2.5-7b-instruct"
    assert config.model.base_url == "http://localhost:8000/v1"
    assert config.model.temperature == pytest.approx(0.1)


def test_unsupported_backend_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  backend: cassandra\n")
    message = error_of(path)
    assert f"{path}:2" in message
    assert "memory.backend" in message


def test_model_name_resolves_from_top_level_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    path = write(
        tmp_path / "config.yaml",
        """
        models:
          - name: big
            use: langchain_openai:ChatOpenAI
            model: gpt-4o
            api_key: $OPENAI_API_KEY
          - name: local-qwen
            use: langchain_openai:ChatOpenAI
            model: qwen2.5-7b-instruct
            api_key: ${OPENAI_API_KEY}
            base_url: http://127.0.0.1:8080/v1
        memory:
          enabled: true
          model_name: local-qwen
        """,
    )
    config = load_memory_config(path)
    assert config.model is not None
    assert config.model.provider == "openai"
    assert config.model.model == "qwen2.5-7b-instruct"
    assert config.model.base_url == "http://127.0.0.1:8080/v1"
    assert config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == "sk-test-123"


def test_unknown_model_name_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        models:
          - name: big
            model: gpt-4o
        memory:
          model_name: small
        """,
    )
    message = error_of(path)
    assert f"{path}:{line_of(path, 'model_name')}" in message
    assert "memory.model_name" in message
    assert "small" in message


# -- environment variables ---------------------------------------------------------------------


def test_env_vars_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEM_ROOT", "/srv/memory")
    monkeypatch.setenv("MEM_TOKENS", "1234")
    monkeypatch.setenv("MEM_KEY", "secret-key")
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          storage_path: ${MEM_ROOT}/users
          max_injection_tokens: $MEM_TOKENS
          model:
            model: gpt-4o-mini
            api_key: $MEM_KEY
        """,
    )
    config = load_memory_config(path)
    assert config.storage_path == "/srv/memory/users"
    assert config.max_injection_tokens == 1234
    assert config.model is not None and config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == "secret-key"


@pytest.mark.parametrize("reference", ["$DEERMEM_TEST_UNSET", "${DEERMEM_TEST_UNSET}/x"])
def test_unset_env_var_names_file_line_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str
) -> None:
    monkeypatch.delenv("DEERMEM_TEST_UNSET", raising=False)
    path = write(
        tmp_path / "config.yaml",
        f"""
        memory:
          enabled: true
          storage_path: "{reference}"
        """,
    )
    message = error_of(path)
    assert f"{path}:3" in message
    assert "memory.storage_path" in message
    assert "DEERMEM_TEST_UNSET" in message


# -- errors with file:line:key -----------------------------------------------------------------


def test_unknown_key_names_file_line_and_dotted_key(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        # a DeerFlow config
        models: []

        memory:
          enabled: true
          debounce_secnds: 3
          max_facts: 10
        """,
    )
    message = error_of(path)
    assert f"{path}:{line_of(path, 'debounce_secnds')}:" in message
    assert line_of(path, "debounce_secnds") == 6
    assert "memory.debounce_secnds" in message
    assert "unknown key" in message


def test_unknown_nested_keys_are_located(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          backend_config:
            max_fact: 10
          model:
            provider: openai
            modle: gpt-4o
        """,
    )
    message = error_of(path)
    assert f"{path}:3: memory.backend_config.max_fact" in message
    assert f"{path}:6: memory.model.modle" in message


def test_wrong_type_names_file_line_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: true
          debounce_seconds: soon
        """,
    )
    message = error_of(path)
    assert f"{path}:3: memory.debounce_seconds" in message
    assert "soon" in message


def test_errors_in_backend_config_and_agents_block_are_located(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          agents:
            researcher:
              enabeld: false
          backend_config:
            debounce_seconds: soon
        """,
    )
    message = error_of(path, agent_name="researcher")
    assert f"{path}:4: memory.agents.researcher.enabeld" in message
    assert f"{path}:6: memory.backend_config.debounce_seconds" in message


def test_unset_env_var_in_referenced_model_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEERMEM_TEST_UNSET", raising=False)
    path = write(
        tmp_path / "config.yaml",
        """
        models:
          - name: m
            model: gpt-4o
            api_key: $DEERMEM_TEST_UNSET
        memory:
          model_name: m
        """,
    )
    message = error_of(path)
    assert f"{path}:4: models.0.api_key" in message
    assert "DEERMEM_TEST_UNSET" in message


@pytest.mark.parametrize(
    ("key", "line"),
    [("max_facts: yes", "max_facts"), ("debounce_seconds: true", "debounce_seconds")],
)
def test_yaml_boolean_for_a_number_is_a_type_error(tmp_path: Path, key: str, line: str) -> None:
    """YAML 1.1 reads ``yes`` as True; it must not silently become max_facts=1."""
    path = write(tmp_path / "config.yaml", f"memory:\n  enabled: true\n  {key}\n")
    message = error_of(path)
    assert f"{path}:3: memory.{line}" in message


def test_out_of_range_value_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  fact_confidence_threshold: 95\n")
    message = error_of(path)
    assert f"{path}:2: memory.fact_confidence_threshold" in message


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: true
           debounce_seconds: 3
          max_facts: 10
        """,
    )
    message = error_of(path)
    assert f"{path}:3" in message
    assert "invalid YAML" in message


def test_missing_file_and_non_mapping(tmp_path: Path) -> None:
    assert "no such config file" in error_of(tmp_path / "absent.yaml")
    assert "mapping" in error_of(write(tmp_path / "list.yaml", "- a\n- b\n"))
    assert "memory must be a mapping" in error_of(write(tmp_path / "m.yaml", "memory: 3\n"))


# -- per-agent switch --------------------------------------------------------------------------


def test_memory_agents_block_disables_only_that_agent(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          enabled: true
          max_facts: 40
          agents:
            researcher:
              enabled: false
            writer:
              max_facts: 10
        """,
    )
    researcher = load_memory_config(path, agent_name="researcher")
    writer = load_memory_config(path, agent_name="writer")
    other = load_memory_config(path, agent_name="coder")
    default = load_memory_config(path)
    assert researcher.enabled is False
    assert researcher.max_facts == 40  # inherited
    assert researcher.agent_name == "researcher"
    assert writer.enabled is True and writer.max_facts == 10
    assert other.enabled is True and other.max_facts == 40
    assert default.enabled is True and default.agent_name is None


def test_agent_config_file_disables_only_that_agent(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  enabled: true\n  max_facts: 40\n")
    write(
        tmp_path / "agents" / "researcher" / "config.yaml",
        """
        name: researcher
        memory:
          enabled: false
        """,
    )
    write(tmp_path / "agents" / "writer" / "config.yaml", "name: writer\n")
    assert load_memory_config(path, agent_name="researcher").enabled is False
    assert load_memory_config(path, agent_name="writer").enabled is True
    assert load_memory_config(path, agent_name="coder").enabled is True
    assert load_memory_config(path).enabled is True


def test_agent_file_wins_over_agents_block(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        "memory:\n  agents:\n    researcher:\n      max_facts: 10\n      enabled: false\n",
    )
    write(tmp_path / "agents" / "researcher" / "config.yaml", "memory:\n  enabled: true\n")
    config = load_memory_config(path, agent_name="researcher")
    assert config.enabled is True
    assert config.max_facts == 10


def test_error_in_agent_file_names_that_file(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  enabled: true\n")
    agent_file = write(
        tmp_path / "agents" / "researcher" / "config.yaml",
        "name: researcher\nmemory:\n  enabeld: false\n",
    )
    message = error_of(path, agent_name="researcher")
    assert f"{agent_file.resolve()}:3: memory.enabeld" in message


@pytest.mark.parametrize("name", ["../etc", "a/b", "has space", "", "名字", "a.b"])
def test_bad_agent_names_are_rejected(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  enabled: true\n")
    with pytest.raises(ConfigError):
        load_memory_config(path, agent_name=name)
    with pytest.raises(ValidationError):
        MemoryConfig(agent_name=name)


def test_good_agent_names_are_accepted() -> None:
    for name in ("researcher", "Agent-2", "my_agent"):
        assert MemoryConfig(agent_name=name).agent_name == name


# -- paths -------------------------------------------------------------------------------------


def test_relative_storage_path_resolves_against_yaml_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "deerflow" / "config.yaml", "memory:\n  storage_path: data/memory\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_memory_config(path)
    expected = (tmp_path / "deerflow" / "data" / "memory").resolve()
    assert Path(config.storage_path).resolve() == expected


def test_absolute_and_home_storage_paths_are_kept(tmp_path: Path) -> None:
    absolute = write(tmp_path / "a.yaml", "memory:\n  storage_path: /abs/memory\n")
    home = write(tmp_path / "h.yaml", "memory:\n  storage_path: ~/.deermem\n")
    assert load_memory_config(absolute).storage_path == "/abs/memory"
    assert load_memory_config(home).storage_path == "~/.deermem"


def test_default_config_path_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "custom" / "deermem.yaml", "memory: {}\n")
    monkeypatch.setenv(CONFIG_ENV_VAR, str(path))
    monkeypatch.chdir(tmp_path)
    assert default_config_path() == path


def test_default_config_path_env_pointing_nowhere_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV_VAR, str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError) as info:
        default_config_path()
    assert CONFIG_ENV_VAR in str(info.value)


def test_default_config_path_falls_back_to_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (CONFIG_ENV_VAR, "DEER_FLOW_CONFIG_PATH", "DEER_FLOW_PROJECT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_config_path() is None
    write(tmp_path / "config.yaml", "memory: {}\n")
    found = default_config_path()
    assert found is not None
    assert found.resolve() == (tmp_path / "config.yaml").resolve()


def test_from_yaml_is_load_memory_config(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "memory:\n  max_facts: 7\n")
    assert MemoryConfig.from_yaml(path).max_facts == 7


def test_a_changed_config_file_is_read_again(tmp_path: Path) -> None:
    """Parsed files are cached (hosts build middleware per request), by size and mtime."""
    path = tmp_path / "config.yaml"
    path.write_text("memory:\n  debounce_seconds: 5\n", encoding="utf-8")
    assert load_memory_config(path).debounce_seconds == 5
    assert load_memory_config(path).debounce_seconds == 5
    path.write_text("memory:\n  debounce_seconds: 12.5\n", encoding="utf-8")
    assert load_memory_config(path).debounce_seconds == 12.5


def test_api_key_env_in_a_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``api_key_env`` names the variable (never its value) in our own files too; unset, the
    error names the file, the line and the key."""
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          model:
            model: gpt-4o-mini
            api_key_env: MEMORY_LLM_KEY
          embeddings:
            provider: openai
            api_key_env: MEMORY_EMBED_KEY
        """,
    )
    monkeypatch.setenv("MEMORY_LLM_KEY", "sk-llm")
    monkeypatch.setenv("MEMORY_EMBED_KEY", "sk-embed")
    config = load_memory_config(path)
    assert config.model is not None and config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == "sk-llm"
    assert isinstance(config.embeddings, EmbeddingsConfig) and config.embeddings.api_key
    assert config.embeddings.api_key.get_secret_value() == "sk-embed"
    monkeypatch.delenv("MEMORY_LLM_KEY")
    message = error_of(path)
    assert f"{path}:{line_of(path, 'model:')}: memory.model: " in message
    assert "api_key_env: the environment variable MEMORY_LLM_KEY is not set" in message
