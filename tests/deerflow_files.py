"""Where DeerFlow's real files are, for the tests that check against them.

The pinned copies of DeerFlow's files (config examples, its ``MemoryManager`` contract, its memory
folders) are reference material kept beside the project, never inside it:
``$DEERMEM_DEERFLOW_FILES`` when set, else a ``shared/deerflow`` folder next to the repository or
one of its parents. Tests parametrise over what is found *in addition to* the fixtures we wrote
in DeerFlow's shapes, so a checkout without the pinned files still runs every test (none skips).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pinned_deerflow_dir() -> Path | None:
    """The folder of DeerFlow's pinned files, or None when this checkout has none nearby."""
    explicit = os.environ.get("DEERMEM_DEERFLOW_FILES")
    if explicit:
        path = Path(explicit)
        return path if path.is_dir() else None
    for parent in REPO.parents:
        candidate = parent / "shared" / "deerflow"
        if (candidate / "head").is_dir() and (candidate / "v2.0.0").is_dir():
            return candidate
    return None


def pinned(*parts: str) -> list[Path]:
    """``[path]`` of one pinned file or folder when present, else ``[]`` (for parametrize)."""
    root = pinned_deerflow_dir()
    if root is None:
        return []
    path = root.joinpath(*parts)
    return [path] if path.exists() else []
