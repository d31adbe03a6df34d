"""The patterns a configuration names (``recall_rules``' ``match`` and ``topics``), compiled.

Here, under the configuration, because a bad regex is a config error naming the rule, raised while
the config is read; the rule route (:mod:`~deermem_middleware.retrieval.rules`) compiles its rules
with the same function, so a pattern the config accepted is a pattern recall can run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["compile_pattern"]


def compile_pattern(value: str | Sequence[str], where: str) -> re.Pattern[str]:
    """A case-insensitive pattern from a regex or a list of keywords (matched literally).

    Raises ``ValueError`` naming ``where`` for an empty or invalid pattern.
    """
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError(f"{where}: an empty pattern would match every message")
    else:
        words = [w.strip() for w in value if isinstance(w, str) and w.strip()]
        if not words:
            raise ValueError(f"{where}: give at least one keyword")
        text = "|".join(re.escape(w) for w in words)
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"{where}: invalid regular expression {text!r}: {exc}") from None
