"""``memory_config_from_mapping``: a ``memory:`` block given as a dict, by the loader's rules."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from deermem_middleware.config import ConfigError, EmbeddingsConfig, memory_config_from_mapping


@pytest.fixture(autouse=True)
def _deerflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "deer-flow-home"
    monkeypatch.setenv("DEER_FLOW_HOME", str(home))
    return home


def test_our_keys_nulls_and_deerflow_keys(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    block = {
        "storage_path": "/srv/deer-flow",
        "debounce_seconds": 5,
        "top_k": None,  # cannot be null: not set
        "max_wait_seconds": None,  # may be null: no bound
        "model": {"provider": None, "model": None},  # every field empty: no model
        "eviction_access_weight": 0.1,  # DeerFlow's own: ignored
        "mode": "middleware",
        "backend_config": {"max_facts": 100, "fact_dedup_enabled": True},
    }
    config = memory_config_from_mapping(block)
    assert config.storage_path == os.path.join("/srv/deer-flow", "deermem_middleware")
    assert (config.debounce_seconds, config.max_facts, config.top_k) == (5, 100, 15)
    assert config.max_wait_seconds is None and config.model is None
    assert "backend_config.eviction_access_weight" in caplog.text
    assert "backend_config.backend_config.fact_dedup_enabled" in caplog.text
    assert block["backend_config"] == {"max_facts": 100, "fact_dedup_enabled": True}  # unchanged


def test_deerflow_storage_rules_and_model_name(_deerflow_home: Path) -> None:
    config = memory_config_from_mapping({"model_name": "gpt-4o"})  # DeerFlow moved it already
    assert config.storage_path == str(_deerflow_home / "deermem_middleware")
    assert config.model_name is None
    relative = memory_config_from_mapping({"storage_path": "memory"})
    assert relative.storage_path == str(_deerflow_home / "memory" / "deermem_middleware")


def test_a_plain_block_keeps_its_paths_and_looks_model_name_up() -> None:
    config = memory_config_from_mapping({"storage_path": "mem"}, deerflow=False)
    assert config.storage_path == "mem"
    with pytest.raises(ConfigError, match=r"backend_config\.model_name: 'gpt-4o' refers to"):
        memory_config_from_mapping({"model_name": "gpt-4o"}, deerflow=False)


def test_env_references_are_not_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    config = memory_config_from_mapping(
        {"model": {"model": "m", "api_key": "${NOT_SET_ANYWHERE}"}}, deerflow=False
    )
    assert config.model is not None and config.model.api_key is not None
    assert config.model.api_key.get_secret_value() == "${NOT_SET_ANYWHERE}"


def test_errors_name_where_and_the_key() -> None:
    with pytest.raises(ConfigError) as error:
        memory_config_from_mapping({"max_facts": 0}, where="memory.backend_config")
    assert "memory.backend_config.max_facts: " in str(error.value)
    assert "got 0" in str(error.value)
    with pytest.raises(ConfigError, match=r"^invalid memory config: backend_config\.colour: "):
        memory_config_from_mapping({"colour": "blue"})
    with pytest.raises(ConfigError, match=r"settings\.model\.temperatur: unknown key"):
        memory_config_from_mapping({"model": {"model": "m", "temperatur": 0}}, where="settings")
    with pytest.raises(ConfigError, match="backend_config must be a mapping"):
        memory_config_from_mapping(["max_facts"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"backend_config\.backend: unsupported backend"):
        memory_config_from_mapping({"backend": "redis"})


def test_not_strict_leaves_unknown_keys_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = memory_config_from_mapping(
        {
            "colour": "blue",
            "max_facts": 50,
            "model": {"model": "gpt-4o-mini", "api_base": "http://x/v1", "flavour": 1},
            "embeddings": {"provider": "openai", "dimensions_typo": 3},
        },
        where="memory.backend_config",
        strict=False,
    )
    assert config.max_facts == 50
    assert config.model is not None and config.model.base_url == "http://x/v1"
    assert "memory.backend_config: unknown keys ignored (check the spelling)" in caplog.text
    for key in ("colour", "model.flavour"):
        assert key in caplog.text
    # an embeddings mapping is init_embeddings' keyword arguments: the provider's class decides
    assert "embeddings.dimensions_typo" not in caplog.text
    assert isinstance(config.embeddings, EmbeddingsConfig)
    assert config.embeddings.model_extra == {"dimensions_typo": 3}
    with pytest.raises(ConfigError, match=r"memory\.backend_config\.max_facts"):
        memory_config_from_mapping(
            {"max_facts": 0, "x": 1}, where="memory.backend_config", strict=False
        )
