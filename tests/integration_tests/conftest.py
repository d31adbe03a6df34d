"""Integration fixtures: a real llama.cpp server with the bundled model.

Without the server (``deermem local-llm install`` not run) these tests skip with the reason —
unless ``DEERMEM_REQUIRE_LLM=1`` (set by CI), which turns every such skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from deermem_middleware.extraction.local_llm import (
    LocalLLMError,
    LocalLLMServer,
    bundled_gguf,
    find_llama_server,
)

REQUIRE_LLM = os.environ.get("DEERMEM_REQUIRE_LLM") == "1"


def require_local_llm() -> None:
    """Skip (or, under DEERMEM_REQUIRE_LLM=1, fail) when the local server is not installed."""
    try:
        find_llama_server()
        bundled_gguf()
    except LocalLLMError as exc:
        if REQUIRE_LLM:
            pytest.fail(f"DEERMEM_REQUIRE_LLM=1 but the local LLM is missing: {exc}")
        pytest.skip(f"local LLM not installed ({exc}); run `deermem local-llm install`")


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLMServer]:
    """One llama-server for the whole session (start-up is ~1 s, but the model is shared)."""
    require_local_llm()
    with LocalLLMServer() as server:
        yield server


REQUIRE_POSTGRES = os.environ.get("DEERMEM_REQUIRE_POSTGRES") == "1"


def postgres_dsn() -> str:
    """``$DEERMEM_TEST_DSN``; skip without it (or, under DEERMEM_REQUIRE_POSTGRES=1, fail)."""
    dsn = os.environ.get("DEERMEM_TEST_DSN")
    if not dsn:
        if REQUIRE_POSTGRES:
            pytest.fail("DEERMEM_REQUIRE_POSTGRES=1 but DEERMEM_TEST_DSN is not set")
        pytest.skip('no PostgreSQL: run `eval "$(.ci/postgres.sh start)"` to test against one')
    return dsn


def storage_location(backend: str, tmp_path: Path) -> str:
    """Where worker processes keep memory: a folder (``file``) or the test PostgreSQL."""
    return str(tmp_path / "memory") if backend == "file" else postgres_dsn()
