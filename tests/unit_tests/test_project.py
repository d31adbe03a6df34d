"""Promises about the project itself: public API, README <-> CI, config reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import deermem_middleware
from deermem_middleware import MemoryConfig

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_public_api() -> None:
    assert sorted(deermem_middleware.__all__) == sorted(
        [
            "ConfigError",
            "CorruptedMemoryError",
            "EmbeddingsConfig",
            "Fact",
            "InMemoryStorage",
            "JSONFileStorage",
            "Memory",
            "MemoryConfig",
            "MemoryMiddleware",
            "MemoryNodes",
            "MemoryScope",
            "MemoryService",
            "MemoryState",
            "MemoryStorage",
            "ModelConfig",
            "RevisionConflict",
            "Section",
            "StorageConfig",
            "StorageError",
            "StoreStorage",
            "StoredMemory",
            "__version__",
            "load_memory_config",
        ]
    )
    for name in deermem_middleware.__all__:
        assert hasattr(deermem_middleware, name)


def test_names_that_moved_still_import_with_a_warning_naming_their_home() -> None:
    from deermem_middleware.retrieval.selector import FactSelector

    with pytest.warns(DeprecationWarning, match=r"deermem_middleware\.retrieval\.selector"):
        assert deermem_middleware.FactSelector is FactSelector
    with pytest.raises(AttributeError, match="NoSuchThing"):
        deermem_middleware.NoSuchThing  # noqa: B018


def _block(marker: str) -> str:
    match = re.search(rf"<!-- ci:{marker} -->\n```bash\n(.*?)```", README, re.DOTALL)
    assert match, f"README has no fenced block after <!-- ci:{marker} -->"
    return match.group(1).strip()


def test_readme_carries_the_install_demo_and_test_commands_ci_runs() -> None:
    assert "deermem local-llm install" in _block("install")
    assert _block("demo") == "deermem demo"
    assert _block("test") == "python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "block install" in ci and "block test" in ci
    assert "DEERMEM_REQUIRE_LLM=1" in ci


def test_every_config_key_is_in_the_readme_reference() -> None:
    for name in MemoryConfig.model_fields:
        assert f"| `{name}` |" in README, f"config key {name!r} missing from the README table"


def test_changelog_has_an_unreleased_section() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog


def test_every_test_the_readme_names_exists() -> None:
    """The README backs its claims with test names (DeerFlow's section above all): each must be
    a test function of this suite, so a renamed or deleted test cannot leave a claim unbacked."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", readme))
    assert len(named) > 20
    defined = set()
    for path in (root / "tests").rglob("test_*.py"):
        defined.update(
            re.findall(r"^\s*(?:async )?def (test_[a-z0-9_]+)", path.read_text("utf-8"), re.M)
        )
    assert sorted(named - defined) == []
