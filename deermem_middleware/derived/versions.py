"""What makes each derived part, as version strings stored with it.

A derived value is only as good as the code that made it: a stored verdict made by older rules,
or n-grams hashed by another analyser, would silently disagree with what runs now. Each part of a
snapshot records its maker (:class:`~deermem_middleware.derived.snapshot.MadeBy`); a part made by
something else is re-derived in the background, and a stale verdict is not trusted meanwhile
(the block screens the few facts it is about to show instead).

The versions are digests of the source files that make each part, so a release cannot change a
rule and forget to bump a number; the embedding's is the model's identity
(:func:`~deermem_middleware.retrieval.embeddings.endpoint_name`).
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Final

from deermem_middleware.screen import SCREEN_VERSION

__all__ = ["ENTITIES_VERSION", "LEXICAL_VERSION", "SCREEN_VERSION", "source_digest"]


def source_digest(prefix: str, package: str, *names: str) -> str:
    """``prefix-<digest>`` of the named files of ``package``."""
    digest = hashlib.blake2b(digest_size=6)
    root = resources.files(package)
    for name in names:
        digest.update(name.encode())
        digest.update(root.joinpath(name).read_bytes())
    return f"{prefix}-{digest.hexdigest()}"


LEXICAL_VERSION: Final = source_digest("lexical", "deermem_middleware.retrieval", "lexical.py")
"""The character n-gram analyser (and its hashing) that made the stored lexical rows."""
ENTITIES_VERSION: Final = source_digest("entities", "deermem_middleware.retrieval", "entities.py")
"""The entity rules that made the stored entity lists."""
