"""What made a verdict: the screen's version, a digest of its rule modules and model weights.

Computed from the files themselves, so no release can change a rule and forget to bump a
number: any change gives a new version, and verdicts stored by an older one are re-derived in
the background (:mod:`deermem_middleware.derived`). Edits to comments count too — a spurious
re-derivation costs background work, a missed one would keep a stale verdict.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Final

__all__ = ["SCREEN_VERSION"]


def _version() -> str:
    """A digest of every rule module and the learned model's weights: any change to either
    gives a new version (and stored verdicts made by the old one are re-derived)."""
    digest = hashlib.blake2b(digest_size=6)
    package = resources.files("deermem_middleware.screen")
    names = sorted(
        entry.name
        for entry in package.iterdir()
        if entry.name.endswith((".py", ".json")) and entry.name not in ("__init__.py", "version.py")
    )
    for name in names:
        digest.update(name.encode())
        digest.update(package.joinpath(name).read_bytes())
    return "screen-" + digest.hexdigest()


SCREEN_VERSION: Final = _version()
"""What made a stored verdict: the screen's rules and model, as a digest of their files."""
